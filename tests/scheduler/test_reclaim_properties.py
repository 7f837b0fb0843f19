"""Property: whatever runs where, a reclaim never takes a victim tenant below its nominal quota,
never evicts a pod younger than minRuntime, never lets the preemptor exceed its own nominal,
takes its victims from one node, and the preemptor is placed once they are gone."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.scheduler.engine import decide
from tests.scheduler.test_reclaim import MINUTE, OTHER_NODES, _run
from tests.scheduler.worlds import cluster, hold, submit

MIN_RUNTIME_MIN = 15


@st.composite
def layouts(draw: st.DrawFn) -> list[tuple[str, str, int, int]]:
    """(node, namespace, GPUs, minutes running) per running pod, at most 8 GPUs per node."""
    out = []
    for node in ("h100-000", "h100-001"):
        left = 8
        while left > 0 and draw(st.integers(0, 5)) > 0:
            gpus = draw(st.integers(1, left))
            out.append((node, draw(st.sampled_from(["beta", "gamma"])), gpus, draw(st.integers(5, 90))))
            left -= gpus
        if draw(st.integers(0, 3)) == 0 and left:  # or the rest taken by another scheduler
            out.append((node, "ops", left, 60))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(), nominal=st.tuples(st.integers(2, 8), st.integers(0, 6), st.integers(0, 6)),
       size=st.integers(1, 4))
def test_a_reclaim_keeps_nominal_quotas_and_min_runtime(layout, nominal, size):
    tenants = [{"name": name, "namespaces": [name], "weight": 1, "quotas": {"H100": {"nominal": n}}}
               for name, n in zip(("alpha", "beta", "gamma"), nominal, strict=True)]
    sim = cluster(tenants=tenants, preemption={"enabled": True, "minRuntime": f"{MIN_RUNTIME_MIN}m"})
    for node in OTHER_NODES:
        hold(sim, node, list(range(8)))
    first = {"h100-000": 0, "h100-001": 0}
    for i, (node, ns, gpus, age) in enumerate(layout):
        devices = list(range(first[node], first[node] + gpus))
        first[node] += gpus
        if ns == "ops":
            hold(sim, node, devices)
        else:
            _run(sim, ns, f"p{i}", node, devices, age)
    world = sim.world
    used = {t: world.model_in_use(t, "H100") for t in ("alpha", "beta", "gamma")}
    key = submit(sim, "want", namespace="alpha", size=size)
    d = decide(world, key, 1, sim.now)
    if not d.preempts:
        return
    victims = [b.detail for b in d.record.blockers if b.code == "reclaim_victim"]
    assert used["alpha"] + size <= nominal[0]
    assert len({v["node"] for v in victims}) == 1
    for v in victims:
        assert v["runtime_ms"] >= MIN_RUNTIME_MIN * MINUTE and v["tenant"] != "alpha"
    for i, tenant in ((1, "beta"), (2, "gamma")):
        taken = sum(v["count"] for v in victims if v["tenant"] == tenant)
        assert taken == 0 or (used[tenant] > nominal[i] and used[tenant] - taken >= nominal[i])
    sim.schedule_pass()
    assert [r.outcome for r in sim.records] == ["preempted", "allocated"]
    assert sim.records[-1].node == victims[0]["node"]
