"""Pods with several claims: all claims land on one node, scored together, as brute force would."""

import copy

import pytest

from audit.scheduler.engine import brute_force_choice
from audit.timestamps import format_time_ms
from tests.scheduler.worlds import cluster, decide_and_bind, hold


def _two_claim_pod(sim, name, templates):
    claims = []
    for i, tmpl in enumerate(templates):
        spec = copy.deepcopy(sim.templates[tmpl]["spec"]["spec"])
        cname = f"{name}-c{i}"
        sim.emit("ResourceClaim", "alpha", cname, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                                    "metadata": {"name": cname, "namespace": "alpha", "uid": f"u-{cname}"},
                                                    "spec": spec})
        claims.append({"name": f"c{i}", "resourceClaimName": cname})
    sim.emit("Pod", "alpha", name, {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": name, "namespace": "alpha", "uid": f"u-{name}",
                                                 "creationTimestamp": format_time_ms(sim.now)},
                                    "spec": {"resourceClaims": claims, "containers": [{"name": "main"}]}})
    return f"alpha/{name}"


@pytest.mark.parametrize(
    ("held", "templates", "expected"),
    [
        pytest.param({}, ["h100-first", "h100-first"], ("h100-000", ["H100", "H100"]), id="both-first-choice-one-node"),
        pytest.param({"h100-000": [0, 1, 2, 3, 4, 5, 6]}, ["h100-first", "h100-first"], ("h100-001", ["H100", "H100"]),
                     id="node-must-hold-both-claims"),
        pytest.param({}, ["h100-first", "a100-only"], ("a100-000", ["A100", "A100"]),
                     id="plain-request-forces-a100-node"),
    ],
)
def test_two_claims_share_a_node(held, templates, expected):
    sim = cluster()
    for node, devs in held.items():
        hold(sim, node, devs)
    key = _two_claim_pod(sim, "pair", templates)
    reference = brute_force_choice(sim.world, key, sim.now)
    r = decide_and_bind(sim, key).record
    assert (r.node, [d.model for d in r.devices]) == expected
    assert r.claims == ["pair-c0", "pair-c1"]
    assert reference is not None and reference[0] == r.node
    assert [t.request for t in r.tiers][:1] == ["pair-c0/gpu/h100"]
