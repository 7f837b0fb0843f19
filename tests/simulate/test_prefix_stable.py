"""A shorter window is the start of a longer one: ``claimtrail simulate --hours 1`` writes exactly
the events and decision records that ``--hours 3`` writes before the first hour's end, whatever the
scenario draws (Poisson arrivals, bursts, disruptions, device-plugin pods, a recorded trace)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

from audit.cli.main import main
from audit.timestamps import parse_time_ms

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
START = "2026-11-02T00:00:00Z"  # every case's start, the default scenario's and the traces' too

# the small cluster's policy and templates, with a Workload of each case's own
SMALL = "\n---\n".join(doc for doc in (FIXTURES / "small-cluster.yaml").read_text().split("\n---\n")
                       if "kind: Workload" not in doc)
WORKLOAD = """
---
apiVersion: claimtrail.io/v1alpha1
kind: Workload
metadata: {name: prefix}
spec:
  cluster: prefix
  start: "2026-11-02T00:00:00Z"
"""
BURSTS = WORKLOAD + """\
  nodePools:
    - {model: H100, nodes: 2, gpusPerNode: 8}
    - {model: A100, nodes: 2, gpusPerNode: 8}
  tenants:
    - namespace: alpha
      arrivalsPerHour: 20
      # the second burst runs across the first hour's end, the third comes after it
      bursts: [{at: 20m, jobs: 40, over: 5m}, {at: 50m, jobs: 60, over: 20m}, {at: 2h, jobs: 30, over: 1m}]
      templates: [{name: h100-first}]
      sizes: {"1": 0.5, "2": 0.5}
      durationMinutes: {median: 20, sigma: 0.5}
    - namespace: beta
      bursts: [{at: 40m, jobs: 50, over: 30m}]
      templates: [{name: h100-first}]
      durationMinutes: {median: 30, sigma: 0.5}
"""
DISRUPTIONS = WORKLOAD + """\
  nodePools:
    - {model: H100, nodes: 2, gpusPerNode: 8}
    - {model: A100, nodes: 2, gpusPerNode: 8}
  tenants:
    - namespace: alpha
      arrivalsPerHour: 60
      templates: [{name: h100-first}]
      sizes: {"1": 0.7, "4": 0.3}
      durationMinutes: {median: 20, sigma: 0.5}
    - namespace: beta
      arrivalsPerHour: 40
      templates: [{name: a100-only}]
      durationMinutes: {median: 30, sigma: 0.5}
  disruptions: {healthFlapsPerHour: 12, flapMinutes: 10, nodeLossesPerDay: 48, nodeRepairHours: 0.5,
                driverUpgradesPerDay: 48, bindInterference: 0.2}
"""
DEVICE_PLUGIN = WORKLOAD + """\
  nodePools:
    - {model: H100, nodes: 2, gpusPerNode: 8}
    - {model: A100, nodes: 1, gpusPerNode: 8}
    - {model: H100, nodes: 1, gpusPerNode: 8, devicePlugin: true}
    - {model: L4, nodes: 2, gpusPerNode: 4, devicePlugin: true}
  tenants:
    - namespace: alpha
      arrivalsPerHour: 50
      templates: [{name: h100-first}]
      sizes: {"1": 0.6, "2": 0.4}
      durationMinutes: {median: 25, sigma: 0.6}
      devicePluginFraction: 0.4
      devicePluginModels: {H100: 1, L4: 2}
    - namespace: beta
      arrivalsPerHour: 30
      templates: [{name: h100-first}]
      durationMinutes: {median: 30, sigma: 0.6}
      devicePluginFraction: 0.5
"""


def _shows(events: list[dict[str, Any]], records: list[dict[str, Any]]) -> set[str]:
    """What a run's lines hold of the things a window's end could cut through."""
    shows = set()
    # pods made per ten minutes (creation times up to the tens of minutes): a burst makes far more
    # than arrivalsPerHour does
    made = {(e["namespace"], e["name"]): e["payload"]["metadata"]["creationTimestamp"][:15]
            for e in events if e["object_kind"] == "Pod" and e["type"] == "upsert"}
    if made and max(collections.Counter(made.values()).values()) >= 30:
        shows.add("burst")
    for e in events:
        if e["object_kind"] == "DeviceTaintRule" and e["type"] == "upsert":
            shows.add("health flap")
        elif e["object_kind"] == "Node" and e["type"] == "delete":
            shows.add("node lost")
        elif e["object_kind"] == "ResourceSlice" and e["type"] == "upsert" and e["payload"]["spec"]["pool"]["generation"] > 1:
            shows.add("slice republished")
    for r in records:
        if any("bind_seq" in b["detail"] for b in r["blockers"]):
            shows.add("bind interference")
        if r["track"] == "device-plugin":
            shows.add("device-plugin pod")
    return shows


def _run(tmp_path: Path, argv: list[str], hours: int) -> tuple[list[str], list[str]]:
    records, events = tmp_path / f"{hours}h.jsonl", tmp_path / f"{hours}h.events.jsonl"
    assert main(["simulate", "--quiet", "--seed", "1", "--hours", str(hours), "--out", str(records),
                 "--events", str(events), *argv]) == 0
    return records.read_text().splitlines(), events.read_text().splitlines()


@pytest.mark.parametrize(
    ("scenario", "argv", "shows"),
    [
        pytest.param(None, [], {"health flap", "bind interference", "device-plugin pod"}, id="default-day"),
        pytest.param(BURSTS, [], {"burst"}, id="bursts"),
        pytest.param(DISRUPTIONS, [], {"health flap", "node lost", "slice republished", "bind interference"},
                     id="disruptions"),
        pytest.param(DEVICE_PLUGIN, [], {"device-plugin pod"}, id="device-plugin-tenants"),
        # a trace's --load is the share of GPUs busy by the window's end, so only the recorded
        # arrival times make one window the start of another (docs: README, "Data")
        # (the pods already running when the trace's busy period begins all arrive at the start)
        pytest.param(None, ["--trace", "openb-2023", "--load", "recorded"], {"burst"}, id="openb-2023-recorded"),
    ],
)
def test_one_hour_is_exactly_the_first_hour_of_three(tmp_path: Path, request: pytest.FixtureRequest,
                                                     scenario: str | None, argv: list[str], shows: set[str]) -> None:
    if scenario is not None:
        (tmp_path / "scenario.yaml").write_text(SMALL + scenario)
        argv = ["--scenario", str(tmp_path / "scenario.yaml")]
    elif "--trace" in argv:
        argv = [*argv, "--trace-dir", request.getfixturevalue("trace_dir")]
    hour_records, hour_events = _run(tmp_path, argv, 1)
    day_records, day_events = _run(tmp_path, argv, 3)
    end = parse_time_ms(START) + 3_600_000
    # the longer run's lines up to the hour's end, byte for byte (canonical JSON, digests and all)
    assert hour_records == day_records[:len(hour_records)]
    assert hour_events == day_events[:len(hour_events)]
    # ... and nothing more: what the longer run adds starts at the hour's end
    for later in (day_records[len(hour_records):], day_events[len(hour_events):]):
        times = [parse_time_ms(json.loads(line)["time"]) for line in later]
        assert times and min(times) >= end
    assert _shows([json.loads(line) for line in hour_events], [json.loads(line) for line in hour_records]) == shows
