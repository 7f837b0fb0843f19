"""``max_steps`` bounds the search by work: past the budget the call gives up with error
``step_budget``; within it the outcome is the unbounded one, step for step."""

from __future__ import annotations

import pytest

from audit.allocator import Status
from tests.allocator.helpers import NODE_1, claim, device, device_class, picks, request, resource_slice, run

SLICE = resource_slice("slice-1", NODE_1, "pool-1", devices=[device(f"device-{i}", {"numa": i % 4}) for i in range(8)])
CLASS_A = device_class("class-a")
# three of eight devices for req-0, then a req-1 no device matches: every triple is tried in turn
EXHAUSTIVE = claim("claim-0", request("req-0", "class-a", 3),
                   request("req-1", "class-a", 1, selectors=["device.attributes['driver-a'].numa == 9"]))
THREE = claim("claim-0", request("req-0", "class-a", 3))

GAVE_UP = "gave up trying to allocate devices after {} search steps (the step budget)"


@pytest.mark.parametrize(("raw", "max_steps", "status", "code", "message", "steps"), [
    pytest.param(EXHAUSTIVE, None, Status.UNSATISFIABLE, "", "cannot allocate all claims", 149, id="unbounded-search-ends"),
    pytest.param(EXHAUSTIVE, 149, Status.UNSATISFIABLE, "", "cannot allocate all claims", 149, id="budget-just-enough"),
    pytest.param(EXHAUSTIVE, 148, Status.ERROR, "step_budget", GAVE_UP.format(148), 149, id="one-step-short-gives-up"),
    pytest.param(THREE, 6, Status.SUCCESS, "", "", 6, id="success-within-budget"),
    pytest.param(THREE, 5, Status.ERROR, "step_budget", GAVE_UP.format(5), 6, id="success-out-of-budget-gives-up"),
    pytest.param(THREE, 0, Status.ERROR, "step_budget", GAVE_UP.format(0), 1, id="zero-budget-takes-no-step"),
])
def test_search_gives_up_exactly_past_its_step_budget(raw: dict, max_steps: int | None, status: Status, code: str,
                                                       message: str, steps: int) -> None:
    outcome = run([SLICE, CLASS_A, raw], max_steps=max_steps)
    assert (outcome.status, outcome.error_code, outcome.message, outcome.steps) == (status, code, message, steps)


def test_a_budget_that_suffices_changes_nothing() -> None:
    unbounded = run([SLICE, CLASS_A, THREE], explain=True)
    bounded = run([SLICE, CLASS_A, THREE], explain=True, max_steps=unbounded.steps)
    assert picks(bounded) == picks(unbounded) == [("claim-0", "req-0", f"pool-1/device-{i}") for i in range(3)]
    assert bounded.evidence == unbounded.evidence


def test_a_search_that_gave_up_still_explains_what_it_saw() -> None:
    outcome = run([SLICE, CLASS_A, EXHAUSTIVE], explain=True, max_steps=10)
    assert outcome.error_code == "step_budget"
    # evidence as for any failed call: the last verdict the search reached per device, none selected
    reasons = {t.request: {v.reason for v in t.verdicts} for t in outcome.evidence}
    assert reasons == {"req-0": {"not_reached"}, "req-1": {"in_use", "request_selector_mismatch"}}
