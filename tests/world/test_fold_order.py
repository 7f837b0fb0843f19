"""What a world counts depends on the objects it ends with, not on the order they were logged in.

The invariant: the derived counts after folding a history (each tenant's devices in use by model
and H100-equivalents, the charges, devices allocated, free and in total per model and per node)
equal those of folding the history's final objects in the canonical order, slices before the
claims that hold their devices, except that a held device no slice lists any more counts under
the last model a slice gave it. A live watcher logs a claim before the slice of its devices (its
initial lists complete in any order) and sees a slice deleted and published again while its
devices are held (a driver restarted, a node lost and back): the charge follows each held device
as the world knows it now, and the claim keeps what it was allocated while no slice lists it.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.events import WorldEvent
from audit.policy import parse_policy
from audit.scheduler.quota import QuotaCheck, check_quota
from audit.timestamps import format_time_ms
from audit.world import World
from tests.explain.builders import claim, gpu, node, slice_

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
# one H100 node (gpu-0 held by team-a's infer-1-gpu) and one A100 node (gpu-0 held by team-b's
# etl-1-gpu); the claims come before the slices in the file
DUMP = [yaml.safe_load((FIXTURES / "policy-h100-quota.yaml").read_text()),
        *yaml.safe_load((FIXTURES / "cluster-quota-tier.yaml").read_text())["items"]]
CANONICAL_KINDS = ("Policy", "DeviceClass", "DeviceTaintRule", "Node", "ResourceSlice", "ResourceClaim", "Pod")
START_MS = 1_777_618_800_000  # 2026-05-01T07:00:00Z

Step = tuple[str, dict[str, Any]]  # ("upsert" | "delete", object)


def _time(seq: int) -> str:
    return format_time_ms(START_MS + seq * 60_000)


def fold(steps: Sequence[Step], world: World | None = None, first_seq: int = 0) -> World:
    world = world or World("lab")
    for seq, (kind, obj) in enumerate(steps, first_seq):
        meta = obj["metadata"]
        world.apply(WorldEvent("lab", seq, _time(seq), kind, obj["kind"], meta.get("namespace", ""), meta["name"],
                               obj))
    return world


def final_objects(steps: Sequence[Step]) -> list[dict[str, Any]]:
    alive: dict[tuple[str, str, str], dict[str, Any]] = {}
    for kind, obj in steps:
        key = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if kind == "delete":
            alive.pop(key, None)
        else:
            alive[key] = obj
    return [alive[k] for k in sorted(alive, key=lambda k: (CANONICAL_KINDS.index(k[0]), k[1], k[2]))]


def canonical(steps: Sequence[Step]) -> World:
    """The world of the history's final objects, folded slices before claims."""
    return fold([("upsert", o) for o in final_objects(steps)])


def last_models(steps: Sequence[Step]) -> dict[str, str]:
    """Each device a claim holds at the end of ``steps`` that no slice lists then -> the model the
    last slice to list it while that claim held it gave it, under the rules in force then (read
    off the canonical world after each step); a device no slice listed while held is left out."""
    holder: dict[str, str] = {}
    last: dict[str, str] = {}
    world = World("lab")
    for i in range(1, len(steps) + 1):
        world = canonical(steps[:i])
        for dev_id in [d for d, key in holder.items() if world.allocated_by.get(d) != key]:
            del holder[dev_id]
            last.pop(dev_id, None)
        for dev_id, key in world.allocated_by.items():
            holder[dev_id] = key
            if dev_id in world.devices:
                last[dev_id] = world.devices[dev_id].model
    return {d: m for d, m in sorted(last.items()) if d not in world.devices}


def reference(steps: Sequence[Step]) -> dict[str, Any]:
    """What a fold of ``steps`` must count: the counts of its final objects folded slices first,
    except that a held device no slice lists any more counts under the last model a slice gave it
    (``last_models``), weighed by the policy in force."""
    world = canonical(steps)
    last = last_models(steps)
    expected = derived(world)
    charges: dict[str, tuple[str, float, dict[str, int]]] = {}
    for key, charge in sorted(world.charges.items()):
        ids = world.claim_devices[key]
        models = [world.devices[d].model if d in world.devices else last.get(d, "unknown") for d in ids]
        eq = 0.0
        for model in models:
            eq += world.policy.h100_equivalent(model)
        charges[key] = (charge.tenant, eq, dict(sorted(Counter(models).items())))
    in_use: dict[str, float] = {}
    tenant_models: dict[str, Counter[str]] = {}
    for tenant, held_eq, held in charges.values():
        in_use[tenant] = in_use.get(tenant, 0.0) + held_eq
        tenant_models.setdefault(tenant, Counter()).update(held)
    expected.update(charges=charges, in_use_eq={t: eq for t, eq in sorted(in_use.items()) if eq},
                    tenant_models={t: dict(sorted(m.items())) for t, m in sorted(tenant_models.items())})
    return expected


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: n for k, n in sorted(counts.items()) if n}


def derived(world: World) -> dict[str, Any]:
    """Every count the world derives from its objects and allocations (history aside: decayed
    usage, holding times)."""
    return {
        "tenant_models": {t: _nonzero(m) for t, m in sorted(world.tenant_models.items()) if _nonzero(m)},
        "in_use_eq": {t: u.in_use_eq for t, u in sorted(world.usage.items()) if u.in_use_eq},
        "charges": {k: (c.tenant, c.eq, dict(sorted(c.models.items()))) for k, c in sorted(world.charges.items())},
        "model_allocated": _nonzero(world.model_allocated),
        "model_free": _nonzero(world.model_free),
        "model_totals": _nonzero(world.model_totals),
        "node_model": {n: {m: list(c) for m, c in sorted(per.items())} for n, per in sorted(world.node_model.items())},
        "free_nodes": {m: {k: v for k, v in sorted(by_k.items()) if v}
                       for m, by_k in sorted(world.free_nodes.items()) if any(by_k.values())},
    }


def _named(name: str) -> dict[str, Any]:
    return next(o for o in DUMP if o["metadata"]["name"] == name)


H100_SLICE = "gpu-node-1-gpu.nvidia.com-h4x8k"
A100_SLICE = "gpu-node-2-gpu.nvidia.com-a7m3q"


def _republished(generation: int, devices: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> dict[str, Any]:
    """The H100 slice as its driver publishes it again: a new generation of ``devices`` of its own."""
    out = copy.deepcopy(_named(H100_SLICE))
    out["spec"]["pool"]["generation"] = generation
    out["spec"]["devices"] = devices(out["spec"]["devices"])
    return out


def _as_a100(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    devices[0]["attributes"]["productName"] = {"string": "NVIDIA A100-SXM4-80GB"}
    return devices


def _renamed_a100_policy() -> dict[str, Any]:
    """The dump's policy with a device-model table that calls the A100s "A100-80GB" (same weight)."""
    out = copy.deepcopy(_named("lab"))
    out["spec"]["version"] = "v5"
    out["spec"]["deviceModels"] = [
        {"model": "H100", "match": r"^NVIDIA H100\b", "h100Equivalent": 1.0},
        {"model": "A100-80GB", "match": r"^NVIDIA A100\b", "h100Equivalent": 0.5}]
    return out


def _released(name: str) -> dict[str, Any]:
    out = copy.deepcopy(_named(name))
    del out["status"]
    return out


def _up(*names: str) -> list[Step]:
    return [("upsert", _named(n)) for n in names]


def _generation(obj: dict[str, Any], generation: int) -> dict[str, Any]:
    obj["spec"]["pool"]["generation"] = generation
    return obj


# A tenant with a quota of two H100s holding them on a node the cluster then loses (its Node and
# its slice deleted, as the simulator's lose_node does), and the node's return.
QUOTA_POLICY = {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "lab"},
                "spec": {"version": "v1", "tenants": [
                    {"name": "team-a", "namespaces": ["team-a"], "quotas": {"H100": {"nominal": 2, "borrowingLimit": 0}}},
                    {"name": "team-b", "namespaces": ["team-b"]}]}}
LOST_SLICE = slice_("n1", [gpu("g0"), gpu("g1")])
TRAINING = [("upsert", o) for o in (QUOTA_POLICY, node("n1"), node("n2"), LOST_SLICE, slice_("n2", [gpu("g0")]),
                                    claim("train", "team-a", allocated=[("n1", "g0"), ("n1", "g1")]))]
NODE_LOST = TRAINING + [("delete", node("n1")), ("delete", LOST_SLICE)]
NODE_BACK = [("upsert", node("n1")), ("upsert", _generation(slice_("n1", [gpu("g0"), gpu("g1")]), 2))]
RELEASED = [("upsert", claim("train", "team-a"))]

IN_FILE_ORDER = [("upsert", o) for o in DUMP]
SLICES_FIRST = [("upsert", o) for o in final_objects(IN_FILE_ORDER)]
NO_SLICES = [s for s in IN_FILE_ORDER if s[1]["kind"] != "ResourceSlice"]
CANONICAL_COUNTS = ({"team-a": {"H100": 1}, "team-b": {"A100": 1}}, {"team-a": 1.0, "team-b": 0.5},
                    {"A100": 1, "H100": 1}, {"A100": 1, "H100": 2})

# history -> tenant_models, in_use_eq per tenant, model_allocated, model_free
HISTORIES: dict[str, tuple[list[Step], tuple[dict[str, Any], dict[str, float], dict[str, int], dict[str, int]]]] = {
    "slices_before_claims": (SLICES_FIRST, CANONICAL_COUNTS),
    # was: team-a and team-b charged 1 "unknown" each, team-b 1.0 H100-eq, team-a 0 H100 in use
    "claims_before_slices_as_in_the_dump": (IN_FILE_ORDER, CANONICAL_COUNTS),
    "slices_last": (NO_SLICES + _up(A100_SLICE, H100_SLICE), CANONICAL_COUNTS),
    # was (the device taken as unindexed): team-a 1 "unknown", 0 H100 in use
    "slice_deleted_while_its_device_is_held": (
        SLICES_FIRST + [("delete", _named(H100_SLICE))],
        ({"team-a": {"H100": 1}, "team-b": {"A100": 1}}, {"team-a": 1.0, "team-b": 0.5}, {"A100": 1},
         {"A100": 1})),
    "slice_deleted_and_published_again": (
        SLICES_FIRST + [("delete", _named(H100_SLICE))] + _up(H100_SLICE), CANONICAL_COUNTS),
    # was: team-a 1 "unknown", 0 H100 in use
    "held_device_left_out_of_a_new_generation": (
        SLICES_FIRST + [("upsert", _republished(2, lambda d: d[1:]))],
        ({"team-a": {"H100": 1}, "team-b": {"A100": 1}}, {"team-a": 1.0, "team-b": 0.5}, {"A100": 1},
         {"A100": 1, "H100": 2})),
    "held_device_left_out_then_published_again": (
        SLICES_FIRST + [("upsert", _republished(2, lambda d: d[1:])), ("upsert", _republished(3, lambda d: d))],
        CANONICAL_COUNTS),
    "held_device_published_again_as_another_model": (
        SLICES_FIRST + [("upsert", _republished(2, _as_a100))],
        ({"team-a": {"A100": 1}, "team-b": {"A100": 1}}, {"team-a": 0.5, "team-b": 0.5}, {"A100": 2},
         {"A100": 1, "H100": 2})),
    "device_model_rules_changed_while_held": (
        SLICES_FIRST + [("upsert", _renamed_a100_policy())],
        ({"team-a": {"H100": 1}, "team-b": {"A100-80GB": 1}}, {"team-a": 1.0, "team-b": 0.5},
         {"A100-80GB": 1, "H100": 1}, {"A100-80GB": 1, "H100": 2})),
    "device_model_rules_changed_before_the_slices": (
        NO_SLICES + [("upsert", _renamed_a100_policy())] + _up(H100_SLICE, A100_SLICE),
        ({"team-a": {"H100": 1}, "team-b": {"A100-80GB": 1}}, {"team-a": 1.0, "team-b": 0.5},
         {"A100-80GB": 1, "H100": 1}, {"A100-80GB": 1, "H100": 2})),
    "claim_released_after_its_slice_came": (
        IN_FILE_ORDER + [("upsert", _released("infer-1-gpu"))],
        ({"team-b": {"A100": 1}}, {"team-b": 0.5}, {"A100": 1}, {"A100": 1, "H100": 3})),
    # was: team-a 2 "unknown", 0 H100 in use
    "node_lost_while_its_devices_are_held": (NODE_LOST, ({"team-a": {"H100": 2}}, {"team-a": 2.0}, {}, {"H100": 1})),
    "node_lost_then_its_claim_released": (NODE_LOST + RELEASED, ({}, {}, {}, {"H100": 1})),
    "node_lost_and_back": (NODE_LOST + NODE_BACK, ({"team-a": {"H100": 2}}, {"team-a": 2.0}, {"H100": 2}, {"H100": 1})),
    # the device it lists again as another model counts as that, the other keeps its last model
    "node_lost_and_back_with_one_held_device_as_another_model": (
        NODE_LOST + [("upsert", _generation(slice_("n1", [gpu("g0", "A100")]), 2))],
        ({"team-a": {"A100": 1, "H100": 1}}, {"team-a": 1.5}, {"A100": 1}, {"H100": 1})),
}


@pytest.mark.parametrize("history", sorted(HISTORIES))
def test_counts_follow_the_final_objects_whatever_order_they_were_logged_in(history: str) -> None:
    steps, (tenant_models, in_use_eq, allocated, free) = HISTORIES[history]
    world = fold(steps)
    assert (derived(world)["tenant_models"], {t: world.tenant_usage(t).in_use_eq for t in ("team-a", "team-b")},
            derived(world)["model_allocated"], derived(world)["model_free"]) \
        == (tenant_models, {"team-a": 0.0, "team-b": 0.0, **in_use_eq}, allocated, free)
    assert world.model_in_use("team-a", "H100") == tenant_models.get("team-a", {}).get("H100", 0)
    assert derived(world) == reference(steps)


@pytest.mark.parametrize("history", sorted(HISTORIES))
def test_forks_and_checkpoints_taken_anywhere_go_on_to_the_same_counts(history: str) -> None:
    steps = HISTORIES[history][0]
    expected = derived(fold(steps))
    for at in range(len(steps) + 1):
        midway = fold(steps[:at])
        assert derived(fold(steps[at:], midway.fork(), at)) == expected, at
        assert derived(fold(steps[at:], World.from_snapshot(midway.snapshot()), at)) == expected, at
    assert derived(World.from_snapshot(fold(steps).snapshot())) == expected


# history -> team-a's quota check for one more H100, its H100-equivalents in use
QUOTA_ROWS = {
    "holding_its_quota": (TRAINING, QuotaCheck(False, "H100", 2, 1, 2, 2, 0), 2.0),
    # was: QuotaCheck(True, "H100", 0, 1, 2, 2), 2.0: two more H100s fitted a quota of two it held
    "node_lost_while_its_devices_are_held": (NODE_LOST, QuotaCheck(False, "H100", 2, 1, 2, 2, 0), 2.0),
    "node_lost_then_its_claim_released": (NODE_LOST + RELEASED, QuotaCheck(True, "H100", 0, 1, 2, 2), 0.0),
    "node_lost_and_back": (NODE_LOST + NODE_BACK, QuotaCheck(False, "H100", 2, 1, 2, 2, 0), 2.0),
    "node_lost_and_back_then_its_claim_released": (NODE_LOST + NODE_BACK + RELEASED,
                                                   QuotaCheck(True, "H100", 0, 1, 2, 2), 0.0),
}


@pytest.mark.parametrize("history", sorted(QUOTA_ROWS))
def test_a_claim_on_a_lost_node_holds_its_tenants_quota_until_released(history: str) -> None:
    steps, check, in_use_eq = QUOTA_ROWS[history]
    world = fold(steps)
    assert (check_quota(world, parse_policy(QUOTA_POLICY), "team-a", "H100", 1),
            world.tenant_usage("team-a").in_use_eq) == (check, in_use_eq)


def test_a_checkpoint_written_before_held_devices_kept_their_last_model_reads_it_from_the_charges() -> None:
    """Such a checkpoint has no "unlisted": the claims on a node lost when it was written were
    charged for their devices as they were when allocated, so the model their charge counts
    beyond their listed devices is the one those devices had, as the fold from the start gives."""
    snap = fold(NODE_LOST).snapshot()
    assert snap["unlisted"] == {"gpu.nvidia.com/n1/g0": "H100", "gpu.nvidia.com/n1/g1": "H100"}
    del snap["unlisted"]
    world = World.from_snapshot(snap)
    whole = fold(NODE_LOST)
    assert (world.tenant_models, world.unlisted, world.charges["team-a/train"].models) \
        == (whole.tenant_models, whole.unlisted, whole.charges["team-a/train"].models) \
        == ({"team-a": {"H100": 2}}, {"gpu.nvidia.com/n1/g0": "H100", "gpu.nvidia.com/n1/g1": "H100"}, {"H100": 2})


def test_a_checkpoint_charging_a_claim_as_before_its_slice_came_is_charged_as_the_fold_now_is() -> None:
    """A checkpoint written while charges stayed as the claim was first charged: both claims
    charged one unknown device, 1 H100-equivalent each."""
    world = fold(IN_FILE_ORDER)
    snap = world.snapshot()
    snap["charges"] = {"team-a/infer-1-gpu": ["team-a", 1.0, {"unknown": 1}],
                       "team-b/etl-1-gpu": ["team-b", 1.0, {"unknown": 1}]}
    snap["usage"]["team-b"][0] = 1.0
    assert derived(World.from_snapshot(snap)) == derived(world) == reference(IN_FILE_ORDER)


def test_a_release_after_the_slice_came_finishes_a_holding_of_the_devices_model() -> None:
    world = fold(HISTORIES["claim_released_after_its_slice_came"][0])
    # infer-1-gpu: allocated at seq 10, its slice at seq 12, released at seq 14, a minute apart
    assert world.finished == {"H100": [4 * 60_000]}


@settings(max_examples=60)
@given(order=st.permutations(DUMP))
def test_any_order_of_the_dump_counts_as_slices_before_claims(order: list[dict[str, Any]]) -> None:
    steps = [("upsert", o) for o in order]
    assert derived(fold(steps)) == derived(canonical(steps))


# A small cluster for random histories: every version of every object, a delete as the last.
# Every device-model table, the default one too, gives each model name one weight (A100-80GB that
# of a name a table does not name, A100 in v2 by a rule that matches nothing), so a device that
# keeps the model an earlier table gave it weighs the same under any, and none names tenants, so a
# charge made under either is the charge under the other; weights are exact in binary, so sums
# are too.
def _policy(version: str, a100_model: str) -> dict[str, Any]:
    return {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "lab"},
            "spec": {"version": version, "deviceModels": [
                {"model": "H100", "match": r"^NVIDIA H100\b", "h100Equivalent": 1.0},
                {"model": a100_model, "match": r"^NVIDIA A100\b", "h100Equivalent": 0.5 if a100_model == "A100" else 1.0},
                *([{"model": "A100", "match": "(?!)", "h100Equivalent": 0.5}] if a100_model != "A100" else [])]}}


def _taint_rule(name: str, **selector: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", **selector},
                     "taint": {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}}}


VERSIONS: dict[str, list[dict[str, Any]]] = {
    "policy": [_policy("v1", "A100"), _policy("v2", "A100-80GB")],
    "n1": [slice_("n1", [gpu("g0"), gpu("g1")]),
           _generation(slice_("n1", [gpu("g0", "A100"), gpu("g1")]), 2),
           _generation(slice_("n1", [gpu("g1")]), 3)],
    "n2": [slice_("n2", [gpu("g0", "A100"), gpu("g1", "A100")])],
    "n2-split": [slice_("n2", [gpu("g2")], name="n2-extra")],
    "taint-g0": [_taint_rule("xid", pool="n2", device="g0")],
    "taint-all": [_taint_rule("xid-anywhere")],
    "c1": [claim("c1", "team-a", allocated=[("n1", "g0")]), claim("c1", "team-a")],
    "c2": [claim("c2", "team-b", allocated=[("n1", "g1"), ("n2", "g0")]), claim("c2", "team-b")],
    "c3": [claim("c3", "team-a", allocated=[("n2", "g1"), ("n2", "g2"), ("n9", "g0")])],
}


@settings(max_examples=300)
@given(history=st.lists(st.sampled_from(sorted(VERSIONS)).flatmap(
    lambda name: st.integers(0, len(VERSIONS[name])).map(lambda v: (name, v))), max_size=16))
def test_any_history_counts_as_its_final_objects_folded_slices_first(history: list[tuple[str, int]]) -> None:
    steps: list[Step] = [("delete", VERSIONS[name][0]) if v == len(VERSIONS[name]) else ("upsert", VERSIONS[name][v])
                         for name, v in history]
    world = fold(steps)
    assert derived(world) == reference(steps)
    assert derived(World.from_snapshot(world.snapshot())) == derived(world)


# device-plugin pods: gpu-node-1 (H100) runs team-a's serve-1, gpu-node-2 (A100) its serve-2, as
# the device plugin's nvidia.com/gpu limit counts them; their model is the node's product label
DP_DUMP = [yaml.safe_load((FIXTURES / "policy-gpu-quotas.yaml").read_text()),
           *yaml.safe_load((FIXTURES / "cluster-device-plugin.yaml").read_text())["items"]]


def _dp(kinds_first: tuple[str, ...]) -> list[Step]:
    """The device-plugin dump with objects of ``kinds_first`` logged first, in that order."""
    rank = {kind: i for i, kind in enumerate(kinds_first)}
    return [("upsert", o) for o in sorted(DP_DUMP, key=lambda o: rank.get(o["kind"], len(rank)))]


def _dp_node(name: str, product: str) -> dict[str, Any]:
    relabelled = copy.deepcopy(next(o for o in DP_DUMP if o["metadata"]["name"] == name))
    relabelled["metadata"]["labels"]["nvidia.com/gpu.product"] = product
    return relabelled


DP_ROWS = {
    "nodes_before_pods": (_dp(("Policy", "Node")), {"H100": 6, "A100": 4}, 8.0),
    # was: {"unknown": 10}, 10.0 — the pods bound to nodes the world had not seen yet
    "pods_before_nodes": (_dp(("Policy", "Pod")), {"H100": 6, "A100": 4}, 8.0),
    "a_node_relabelled_for_another_product": (
        _dp(("Policy", "Node")) + [("upsert", _dp_node("gpu-node-2", "NVIDIA-H100-80GB-HBM3"))], {"H100": 10}, 10.0),
    # a node deleted leaves its pods charged as they were, as a claim keeps the model of devices
    # no slice lists any more
    "a_node_deleted_under_its_pods": (
        _dp(("Policy", "Node")) + [("delete", _dp_node("gpu-node-2", "NVIDIA-A100-SXM4-80GB"))],
        {"H100": 6, "A100": 4}, 8.0),
}


@pytest.mark.parametrize("history", sorted(DP_ROWS))
def test_device_plugin_pods_are_charged_by_their_nodes_product_whatever_the_log_order(history: str) -> None:
    steps, models, in_use_eq = DP_ROWS[history]
    world = fold(steps)
    assert (world.tenant_models, world.tenant_usage("team-a").in_use_eq) == ({"team-a": models}, in_use_eq)
    if "deleted" not in history:
        assert derived(world) == derived(canonical(steps))
