"""The migration plan: ordered steps, and never a pod switched in place."""

from __future__ import annotations

import pytest

from audit.migration import Rollout, Verdict, plan

ROLLOUT = Rollout(canary_namespaces=("team-a",), expand_namespaces=("team-b", "team-c"))


def test_rollback_stops_the_template_before_switching_workloads_and_removes_it_last() -> None:
    steps = [s.action for s in plan(Verdict.ROLLBACK, ROLLOUT)]
    assert steps == ["freeze", "switch-back", "drain", "remove-template", "verify"]


def test_rollback_leaves_bound_workloads_to_their_termination_policy() -> None:
    drain = next(s for s in plan(Verdict.ROLLBACK, ROLLOUT) if s.action == "drain")
    assert "termination policy" in drain.detail and "do not delete their claims" in drain.detail


def test_promote_enables_the_class_before_publishing_the_template() -> None:
    steps = plan(Verdict.PROMOTE, ROLLOUT)
    assert [s.action for s in steps] == ["enable-class", "publish-template", "switch-workloads", "watch", "expand"]
    assert "team-b, team-c" in steps[1].detail
    # the kustomization beside the overlays, by the path a reader types
    assert [s.command for s in steps[:2]] == ["kubectl apply -k deploy/dra", "kubectl apply -k deploy/overlays/migration-expand"]


@pytest.mark.parametrize("verdict", list(Verdict), ids=[v.value for v in Verdict])
def test_no_step_swaps_claim_and_device_plugin_on_a_running_pod(verdict: Verdict) -> None:
    for step in plan(verdict, ROLLOUT):
        text = (step.detail + " " + step.command).lower()
        assert "kubectl delete pod" not in text and "kubectl patch pod" not in text
