"""Probing one node leaves nothing behind for the next: devices it retired are whole again."""

from __future__ import annotations

from audit.dra.model import ResourceClaim
from audit.explain import ClusterView
from audit.explain.probe import NodeProber, parse_as, probe_claim
from audit.explain.tiers import pod_tiers
from tests.explain.builders import claim, gpu, node, scenario, slice_

SHARED = ("gpu.nvidia.com/shared/gpu-0", "gpu.nvidia.com/shared/gpu-1", "gpu.nvidia.com/shared/gpu-2")


def _admin_view() -> tuple[ClusterView, ResourceClaim]:
    """Three H100s in one slice every node reaches; the asking claim has admin access, so each
    device the probe picks is retired with a taint before the next search."""
    admin_claim = claim("train-gpu")
    admin_claim["spec"]["devices"]["requests"] = [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "adminAccess": True}}]
    objects = scenario(node("n1"), node("n2"),
                       slice_("", [gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2")], name="shared", pool="shared",
                              allNodes=True),
                       pod_claim=admin_claim)
    view = ClusterView.from_objects(objects)
    raw_claim = view.claims[("team-a", "train-gpu")]
    [tier] = pod_tiers([raw_claim])
    return view, parse_as(probe_claim(raw_claim, tier), ResourceClaim)


def test_a_second_node_sees_the_devices_the_first_probe_retired_as_they_are() -> None:
    view, request = _admin_view()
    fresh = NodeProber(view, [("team-a", "train-gpu")], ["n1", "n2"]).probe("n2", request, set(SHARED))
    reused = NodeProber(view, [("team-a", "train-gpu")], ["n1", "n2"])
    first = reused.probe("n1", request, set(SHARED))
    second = reused.probe("n2", request, set(SHARED))
    assert {d: v[0] for d, v in fresh.items()} == {d: "available" for d in SHARED}
    assert first == fresh
    assert second == fresh
