"""The what-if folds the history before its window once and forks the fold for its two sides: each
side's lifecycle, and the deltas read from them, are bit for bit what folding that side's whole
log from the start gives — for windows early, in the middle and at the end of a simulated run
(where the history does not go on past the window)."""

from __future__ import annotations

import copy
import json

import pytest

from audit.metrics import Lifecycle, LifecycleFold
from audit.replay.service import counterfactual
from audit.replay.whatif import Side, WhatIf, deltas
from audit.timestamps import parse_time_ms
from tests.metrics.foldstate import fold_state
from tests.replay.runs import busy, busy_source

HOURS = 3.0
HOUR = 3_600_000


def _tighter() -> dict:
    doc = copy.deepcopy(busy(HOURS).events[0].payload)
    for t in doc["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    return doc


def _alone(cluster: str, before: list, window_events: list, goes_on: bool) -> Lifecycle:
    fold = LifecycleFold(cluster).apply_all(before + window_events)
    if goes_on:
        fold.end_instant()
    return fold.lifecycle()


@pytest.mark.parametrize(("since_h", "until_h"), [(0.5, 1.0), (1.0, 2.0), (2.0, 3.0)])
def test_each_side_is_its_whole_log_folded_from_the_start(since_h: float, until_h: float) -> None:
    day = busy(HOURS)
    t0 = parse_time_ms(day.events[0].time)
    since, until = t0 + int(since_h * HOUR), t0 + int(until_h * HOUR)
    w = counterfactual(busy_source(HOURS), day.world.cluster, day.events, day.records, _tighter(), since, until)
    start_seq = max(e.seq for e in day.events if parse_time_ms(e.time) < since)
    before = [e for e in day.events if e.seq <= start_seq]
    goes_on = any(parse_time_ms(e.time) >= until for e in day.events)
    assert goes_on is (until_h < HOURS)
    lives = [_alone(day.world.cluster, before, side.events, goes_on) for side in (w.recorded, w.counterfactual)]
    assert fold_state(w.recorded.life) == fold_state(lives[0])
    assert fold_state(w.counterfactual.life) == fold_state(lives[1])
    alone = WhatIf(Side(w.recorded.records, w.recorded.events, w.recorded.violations, lives[0]),
                   Side(w.counterfactual.records, w.counterfactual.events, w.counterfactual.violations, lives[1]),
                   w.start_ms, w.end_ms, w.dropped_effects, w.unknown_durations)
    d = deltas(w)
    assert json.dumps(d, sort_keys=True) == json.dumps(deltas(alone), sort_keys=True)  # floats by their repr
    assert d["tenants"]["team-b"]["pods_started"][0] != d["tenants"]["team-b"]["pods_started"][1]
