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


def _judgments(log: Log, monkeypatch: pytest.MonkeyPatch, pod: str = "p") -> tuple[int, bool]:
    """How often team-a/``pod``'s first choice was judged, and whether it was regretted."""
    from audit.metrics import lifecycle

    judged = []
    allocatable = lifecycle.first_choice_allocatable

    def counted(world: Any, c: Any, no_room: Any = None) -> bool:
        if c.life.pod == pod:
            judged.append(world.time_ms)
        return allocatable(world, c, no_room)

    monkeypatch.setattr(lifecycle, "first_choice_allocatable", counted)
    (p,) = [p for p in fold_lifecycle(log.events, "c1").pods if p.key == f"team-a/{pod}"]
    return len(judged), p.regretted


def _released_at_minute_2(release: str) -> Log:
    """team-a/p asks for 4 H100s and falls back to A100s at minute 1, while team-z/x1 holds the only
    H100 node and team-z/a1 a whole A100 node; at minute 2 ``release`` happens, and a pod created at
    minute 3 ends that instant."""
    log = Log(policy_doc("1", {"team-a": 1, "team-z": 1})).nodes("H100", 1, 4).nodes("A100", 2, 8)
    log.at(0).pod("team-z/x1", ("gpu", ["H100"], 4)).bind("team-z/x1", "h100-0", {"gpu": ("", [0, 1, 2, 3])})
    log.pod("team-z/a1", ("gpu", ["A100"], 8)).bind("team-z/a1", "a100-1", {"gpu": ("", list(range(8)))})
    log.at(1).pod("team-a/p", ("gpu", ["H100", "A100"], 4)).bind("team-a/p", "a100-0", {"gpu": ("a100", [0, 1, 2, 3])})
    log.at(2)
    if release == "x1":
        log.finish("team-z/x1")
    elif release == "a1":
        log.finish("team-z/a1")
    elif release == "taint":
        log.taint("sick", "a100-1", "gpu-0")
    elif release == "pending":
        log.pod("team-z/w", ("gpu", ["A100"], 1)).finish("team-z/w")  # a delete that gave nothing back
    log.at(3).pod("team-z/later", ("gpu", ["A100"], 1))
    return log


@pytest.mark.parametrize(("release", "judged", "regretted"), [
    ("nothing", 1, False),
    # A100s given back: no help to a first choice of H100s, which is not judged again
    ("a1", 1, False),
    ("pending", 1, False),
    # its own model given back: judged again, and the freed node fits it
    ("x1", 2, True),
    # the inventory changed: anything may have, so it is judged again (and still does not fit)
    ("taint", 2, False),
])
def test_a_judged_first_choice_is_judged_again_only_after_its_models_or_the_inventory_change(
        release: str, judged: int, regretted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _judgments(_released_at_minute_2(release), monkeypatch) == (judged, regretted)


@pytest.mark.parametrize(("dp_finishes", "regretted"), [(False, False), (True, True)])
def test_quota_a_device_plugin_pod_gives_back_reopens_a_judged_first_choice(
        dp_finishes: bool, regretted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """team-a may hold 2 H100s and holds them on a device-plugin node; its DRA pod asks for 2 H100s
    first and falls back to A100s while a DRA H100 node stands free. When the device-plugin pod
    leaves, its quota is back: the first choice is judged again and fits."""
    log = Log(policy_doc("1", {"team-a": 1}, quotas={"team-a": {"H100": 2}}))
    log.nodes("H100", 1, 4).nodes("A100", 1, 8).dp_nodes("H100", 1, 8)
    log.at(0).dp_pod("team-a/dp", 2).bind("team-a/dp", "h100-dp-0")
    log.at(1).pod("team-a/p", ("gpu", ["H100", "A100"], 2)).bind("team-a/p", "a100-0", {"gpu": ("a100", [0, 1])})
    if dp_finishes:
        log.at(2).finish("team-a/dp")
    log.at(3).pod("team-a/later", ("gpu", ["A100"], 1))
    assert _judgments(log, monkeypatch) == (1 + dp_finishes, regretted)


def test_judging_only_candidates_something_was_given_back_for_regrets_the_same_pods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a simulated day (quotas, device-plugin pods, health flaps, driver upgrades), skipping the
    candidates nothing of theirs was given back for regrets exactly the pods that judging every
    candidate at the end of every instant does, with fewer judgments."""
    from audit.metrics import lifecycle, regret
    from tests.simulate.runs import cluster_day

    day = cluster_day()
    judged = []
    allocatable = lifecycle.first_choice_allocatable

    def counted(world: Any, c: Any, no_room: Any = None) -> bool:
        judged.append(c)
        return allocatable(world, c, no_room)

    monkeypatch.setattr(lifecycle, "first_choice_allocatable", counted)
    skipping = {p.key: p.regretted for p in fold_lifecycle(day.events, day.world.cluster).pods}
    skipping_judged = len(judged)
    judged.clear()
    due = regret.RegretWatch.due
    monkeypatch.setattr(regret.RegretWatch, "due", lambda self, t, changed, freed: due(self, t, True, freed))
    every = {p.key: p.regretted for p in fold_lifecycle(day.events, day.world.cluster).pods}
    assert skipping == every and sum(every.values()) > 0
    assert skipping_judged < len(judged)


def _watched(*models: str, deadline: int = 100) -> Any:
    from types import SimpleNamespace

    from audit.metrics.regret import RegretCandidate

    c = RegretCandidate(life=SimpleNamespace(regretted=False), pod={}, claims=[],  # type: ignore[arg-type]
                        deadline_ms=deadline)
    c.models = frozenset(models)
    return c


# a slack below nothing files the open candidates anew at every judgment
@pytest.mark.parametrize("slack", [4096, -10**9])
def test_the_watch_gives_a_candidate_again_only_for_its_models_or_a_change_within_its_window(
        slack: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.metrics import regret

    monkeypatch.setattr(regret, "REINDEX_SLACK", slack)
    watch = regret.RegretWatch()
    h100, both, late = _watched("H100"), _watched("H100", "A100", deadline=10), _watched("L40S", deadline=300)
    watch.add(h100)
    watch.add(both)
    steps: list[tuple[int, bool, set[str], list[Any]]] = [
        (1, False, set(), [h100, both]),  # new: judged whatever was given back
        (2, False, set(), []),
        (3, False, {"L40S"}, []),
        (4, False, {"A100"}, [both]),
        (5, False, {"A100", "H100"}, [h100, both]),  # once each, in the order they appeared
        (11, False, {"H100", "A100"}, [h100]),  # past its window
        (12, True, set(), [h100, late]),  # the inventory changed: every open one
    ]
    for t, changed, freed, expected in steps:
        if t == 11:
            watch.add(late)
            expected = [h100, late]
        due = watch.due(t, changed, freed)
        assert [c.serial for c in due] == [c.serial for c in expected], t
        watch.judged(t, due)
    h100.life.regretted = True
    assert [c.serial for c in watch.due(13, True, set())] == [late.serial]
    assert watch.due(301, True, set()) == [] and len(watch) == 0
