"""Regret: the first choice alone allocatable on one node, within quota, within the window after."""

from __future__ import annotations

from typing import Any

import pytest

from audit.metrics import fold_lifecycle
from tests.metrics.eventlog import Log, policy_doc


def _history(release_at: float | None, **policy: Any) -> Log:
    """Two H100 nodes of 4 with 2 taken on each (4 free cluster-wide, 2 per node); team-a/p asks for
    4, H100 first, and falls back to the A100 node at minute 1; filler x1 leaves at ``release_at``."""
    log = Log(policy_doc("1", {"team-a": 1, "team-z": 1}, **policy)).nodes("H100", 2, 4).nodes("A100", 1, 8)
    log.at(0).pod("team-z/x1", ("gpu", ["H100"], 2)).pod("team-z/x2", ("gpu", ["H100"], 2))
    log.bind("team-z/x1", "h100-0", {"gpu": ("", [0, 1])}).bind("team-z/x2", "h100-1", {"gpu": ("", [0, 1])})
    log.at(1).pod("team-a/p", ("gpu", ["H100", "A100"], 4)).bind("team-a/p", "a100-0", {"gpu": ("a100", [0, 1, 2, 3])})
    log.tick(3)
    if release_at is not None:
        log.at(release_at).finish("team-z/x1")
    log.tick(30)
    return log


def _regretted(log: Log) -> bool:
    (p,) = [p for p in fold_lifecycle(log.events, "c1").pods if p.key == "team-a/p"]
    assert p.fallback
    return p.regretted


@pytest.mark.parametrize(("release_at", "policy", "regretted"), [
    # 4 H100s free cluster-wide all along, never 4 on one node: a cluster-wide count says regret
    (None, {}, False),
    # x1 leaves 4 minutes later: h100-0 alone fits the pod
    (5, {}, True),
    # ... but 11 minutes after the fallback is past the default 10-minute window
    (12, {}, False),
    (12, {"fallback": {"regretWindow": "15m"}}, True),
    # team-a may hold 2 H100s: the free node is no use to it
    (5, {"_quota": 2}, False),
])
def test_regret(release_at: float | None, policy: dict[str, Any], regretted: bool) -> None:
    quota = policy.pop("_quota", None)
    log = _history(release_at, **policy)
    if quota is not None:
        doc = policy_doc("1", {"team-a": 1, "team-z": 1}, quotas={"team-a": {"H100": quota}})
        log.events[0].payload = doc
    assert _regretted(log) is regretted


def test_regret_waits_for_the_instant_to_end() -> None:
    """The release at minute 5 is judged once a later event shows minute 5 is over."""
    log = Log(policy_doc("1", {"team-a": 1, "team-z": 1})).nodes("H100", 1, 4).nodes("A100", 1, 8)
    log.at(0).pod("team-z/x1", ("gpu", ["H100"], 4)).bind("team-z/x1", "h100-0", {"gpu": ("", [0, 1, 2, 3])})
    log.at(1).pod("team-a/p", ("gpu", ["H100", "A100"], 4)).bind("team-a/p", "a100-0", {"gpu": ("a100", [0, 1, 2, 3])})
    log.at(5).finish("team-z/x1")
    assert _regretted(log) is False
    log.tick(6)
    assert _regretted(log) is True


def _claim(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "team-a"}, "spec": {"devices": {"requests": list(requests)}},
            "status": {"allocation": {"devices": {"results": []}}}}


_H100 = {"name": "h100", "deviceClassName": "gpu.nvidia.com", "count": 4}
_A100 = {"name": "a100", "deviceClassName": "gpu.nvidia.com", "count": 4}


@pytest.mark.parametrize(("claim", "requests"), [
    # firstAvailable cut to its first subrequest
    (_claim({"name": "gpu", "firstAvailable": [_H100, _A100]}), [{"name": "gpu", "firstAvailable": [_H100]}]),
    # a request without alternatives, beside one with them, is kept as it is
    (_claim({"name": "nic", "exactly": {"deviceClassName": "nic"}}, {"name": "gpu", "firstAvailable": [_A100, _H100]}),
     [{"name": "nic", "exactly": {"deviceClassName": "nic"}}, {"name": "gpu", "firstAvailable": [_A100]}]),
    (_claim({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}),
     [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]),
])
def test_the_first_choice_of_a_claim_drops_its_status_and_leaves_the_claim_as_it_was(
        claim: dict[str, Any], requests: list[dict[str, Any]]) -> None:
    import copy

    from audit.metrics.regret import reduced_to_first_choice

    before = copy.deepcopy(claim)
    (reduced,) = reduced_to_first_choice([claim])
    assert reduced == {"metadata": claim["metadata"], "spec": {"devices": {"requests": requests}}}
    assert claim == before  # the world's claim is shared, never changed


def test_needs_with_no_room_are_asked_once_per_instant_and_judge_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the end of an instant every candidate is judged against the same world: needs found to
    have no node with room are not looked up again, and every pod is regretted or not as when
    each candidate asked for itself."""
    from audit.metrics import regret
    from tests.simulate.runs import cluster_day

    day = cluster_day()
    looked_up = []
    nodes_with_room = regret._nodes_with_room

    def counted(world: Any, needs: Any) -> list[str]:
        looked_up.append(needs)
        return nodes_with_room(world, needs)

    monkeypatch.setattr(regret, "_nodes_with_room", counted)
    shared = {p.key: p.regretted for p in fold_lifecycle(day.events, day.world.cluster).pods}
    asked_shared = len(looked_up)
    candidate_nodes = regret._candidate_nodes
    monkeypatch.setattr(regret, "_candidate_nodes", lambda world, c, no_room=None: candidate_nodes(world, c))
    looked_up.clear()
    alone = {p.key: p.regretted for p in fold_lifecycle(day.events, day.world.cluster).pods}
    assert shared == alone and sum(alone.values()) > 0
    assert asked_shared < len(looked_up)  # some needs were answered by the instant's memo (a third here)
