"""Fallback never violates a hard constraint or a quota; no device is handed out twice."""

from audit.dra.quantity import Quantity
from audit.dra.semver import Semver
from audit.world import World
from tests.simulate.runs import cluster_day


def _attr(dev, name):
    v = dev.attributes[name]
    return next(iter(v.values()))


# What each subrequest of the scenario's templates demands, written independently of CEL.
HARD_CONSTRAINTS = {
    "gpu/h100": lambda d: _attr(d, "productName").startswith("NVIDIA H100")
    and Semver.parse(_attr(d, "driverVersion")) > Semver.parse("550.0.0"),
    "gpu/a100": lambda d: _attr(d, "productName").startswith("NVIDIA A100"),
    "gpu/compatible": lambda d: Quantity.parse(d.capacity["memory"]["value"]).cmp(Quantity.parse("40Gi")) >= 0
    and _attr(d, "architecture") in ("Hopper", "Ampere", "Ada Lovelace"),
}


def _claim_usage(world):
    """Devices per (tenant, model) recounted from the claims themselves."""
    usage = {}
    for key, claim in world.objects.get("ResourceClaim", {}).items():
        alloc = (claim.get("status") or {}).get("allocation")
        if not alloc or key.startswith("kube-system/"):
            continue
        tenant = world.policy.tenant_for(claim["metadata"]["namespace"])
        for r in alloc["devices"]["results"]:
            model = world.devices[f"{r['driver']}/{r['pool']}/{r['device']}"].model
            usage[(tenant, model)] = usage.get((tenant, model), 0) + 1
    return usage


def test_allocations_respect_selectors_quota_and_exclusivity():
    result = cluster_day(5, 5.0)
    by_seq = {}
    for r in result.records:
        if r.outcome == "allocated" and r.track == "dra":
            by_seq.setdefault(r.seq, []).append(r)
    world = World(result.world.cluster)
    checked = fallbacks = 0
    for ev in result.events:
        world.apply(ev)
        for r in by_seq.pop(world.seq, []):
            for dref in r.devices:
                dev = world.devices[dref.device]
                assert HARD_CONSTRAINTS[dref.request](dev), (r.decision_id, dref)
                assert dref.model == dev.model
            checked += 1
            fallbacks += r.fallback
        if ev.object_kind == "ResourceClaim" and ev.type == "upsert" and (ev.payload.get("status") or {}).get("allocation"):
            holders = {}
            for key, devs in world.claim_devices.items():
                for d in devs:
                    assert d not in holders, f"{d} held by {holders.get(d)} and {key}"
                    holders[d] = key
            for (tenant, model), n in _claim_usage(world).items():
                q = world.policy.quota(tenant, model)
                if q is not None and q.limit is not None:
                    assert n <= q.limit, (tenant, model, n, q)
    assert checked > 500 and fallbacks > 100
    assert not by_seq


def test_h100_quota_is_reached_but_never_exceeded():
    result = cluster_day(5, 5.0)
    assert any(b.code == "quota_exhausted" for r in result.records for b in r.blockers)


def test_a_device_plugin_pod_held_back_by_quota_is_recorded_as_such():
    """GPUs free on a node it may use, quota closed: ``deferred`` on ``quota``, never "no free GPUs"."""
    records = [r for r in cluster_day(5, 5.0).records if r.track == "device-plugin" and r.outcome != "allocated"]
    quota = [r for r in records if r.tiers[0].reasons.get("quota_exhausted")]
    assert quota, "the day has device-plugin pods held back by quota"
    assert {(r.outcome, r.retry_class) for r in quota} == {("deferred", "quota")}
    assert all(r.blockers[0].code == "quota_exhausted" for r in quota)
    assert all(r.outcome == "unschedulable" for r in records if r not in quota)
