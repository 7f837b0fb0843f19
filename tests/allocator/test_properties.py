"""Property tests: results obey every rule per an independent checker, and order does not matter."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.allocator import Quirks, Status
from tests.allocator.checker import Problem
from tests.allocator.helpers import (
    NODE_1,
    NODE_2,
    allocated,
    claim,
    device,
    device_class,
    first_available,
    request,
    resource_slice,
    result,
    run,
    sub,
)

MODELS = ["h100", "a100"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [device_class("class-a"), device_class("class-b", driver="driver-b")]
    all_devices: list[tuple[str, str, str]] = []
    for p in range(draw(st.integers(1, 3))):
        driver = draw(st.sampled_from(["driver-a", "driver-b"]))
        devices = []
        for d in range(draw(st.integers(1, 3))):
            attrs = {"model": draw(st.sampled_from(MODELS)), "numa": draw(st.integers(0, 1))}
            extra: dict[str, Any] = {}
            if draw(st.integers(0, 5)) == 0:
                extra["taints"] = [{"key": "example.com/unhealthy", "effect": "NoSchedule"}]
            devices.append(device(f"dev-{d}", attrs, **extra))
            all_devices.append((driver, f"pool-{p}", f"dev-{d}"))
        node = NODE_1 if draw(st.integers(0, 4)) else NODE_2
        objects.append(resource_slice(f"slice-{p}", node, f"pool-{p}", driver=driver, devices=devices))
    for i in range(draw(st.integers(0, 1))):
        driver, pool, dev = draw(st.sampled_from(all_devices))
        objects.append(allocated(claim(f"busy-{i}", request("r", "class-a")), result("r", driver, pool, dev)))
    for c in range(draw(st.integers(1, 2))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            cls = draw(st.sampled_from(["class-a", "class-b"]))
            selectors = [f"device.attributes['{cls.replace('class', 'driver')}'].model == '{draw(st.sampled_from(MODELS))}'"] \
                if draw(st.booleans()) else []
            tolerations = [{"operator": "Exists"}] if draw(st.integers(0, 3)) == 0 else []
            if draw(st.booleans()):
                requests.append(first_available(f"req-{r}", sub("first", cls, draw(st.integers(1, 2)), selectors=selectors, tolerations=tolerations),
                                                sub("second", cls, 1, tolerations=tolerations)))
            else:
                requests.append(request(f"req-{r}", cls, draw(st.integers(1, 2)), selectors=selectors, tolerations=tolerations))
        constraints = []
        if draw(st.booleans()):
            key = draw(st.sampled_from(["matchAttribute", "distinctAttribute"]))
            constraints.append({key: draw(st.sampled_from(["driver-a/numa", "driver-a/model"]))})
        objects.append(claim(f"claim-{c}", *requests, constraints=constraints))
    return objects


def api(outcome: Any) -> list[dict[str, Any]]:
    return [a.to_api() for a in outcome.allocations]


@SETTINGS
@given(problems())
def test_results_obey_every_rule_and_unsatisfiable_means_no_solution(objects: list[dict[str, Any]]) -> None:
    # The 1.36 distinctAttribute quirk knowingly lets duplicates through (see test_constraints),
    # so the rules are checked against the fixed behaviour.
    outcome = run(objects, quirks=Quirks.none())
    problem = Problem(objects, NODE_1)
    if outcome.status is Status.SUCCESS:
        assert problem.check(api(outcome)) == []
    else:
        assert outcome.status is Status.UNSATISFIABLE
        assert not problem.brute_force()


@SETTINGS
@given(problems(), st.randoms(use_true_random=False))
def test_input_order_of_slices_and_classes_changes_nothing(objects: list[dict[str, Any]], rnd: random.Random) -> None:
    claims = [o for o in objects if o["kind"] == "ResourceClaim"]
    others = [o for o in objects if o["kind"] != "ResourceClaim"]
    shuffled = list(others)
    rnd.shuffle(shuffled)
    first, second = run(others + claims, explain=True), run(shuffled + claims, explain=True)
    assert (first.status, api(first), first.steps) == (second.status, api(second), second.steps)
    assert first.evidence == second.evidence


@SETTINGS
@given(problems())
def test_evidence_changes_neither_result_nor_steps(objects: list[dict[str, Any]]) -> None:
    plain, explained = run(objects), run(objects, explain=True)
    assert (plain.status, api(plain), plain.steps, plain.message) == (explained.status, api(explained), explained.steps, explained.message)
    assert plain.evidence == []
    for tier in explained.evidence:
        assert len({v.device for v in tier.verdicts}) == len(tier.verdicts)
    chosen = sorted(f"{r['driver']}/{r['pool']}/{r['device']}" for a in api(explained) for r in a["results"])
    selected = sorted(v.device for t in explained.evidence for v in t.verdicts if v.reason == "selected")
    assert selected == chosen


@SETTINGS
@given(problems())
def test_with_1_36_quirks_only_distinct_attribute_can_be_violated(objects: list[dict[str, Any]]) -> None:
    outcome = run(objects)
    if outcome.status is not Status.SUCCESS:
        return
    problems_found = Problem(objects, NODE_1).check(api(outcome))
    has_distinct = any("distinctAttribute" in c for o in objects if o["kind"] == "ResourceClaim"
                       for c in o["spec"]["devices"].get("constraints", []))
    assert all(p.endswith("violates a constraint") for p in problems_found)
    assert has_distinct or not problems_found
