"""Trace-driven scenarios read the real Alibaba traces and keep their model names.

The traces are public data outside the repository: the ``trace_dir`` fixture finds them or skips
naming ``make traces``."""

import collections

import pytest

from ingest.simulate.loop import simulate
from ingest.simulate.traces import TraceError, openb_scenario, spot_scenario, trace_scenario


def _gpus(sc):
    return collections.Counter(
        d["attributes"]["productName"]["string"] for o in sc.objects if o["kind"] == "ResourceSlice"
        for d in o["spec"]["devices"])


def test_openb_inventory_and_allowed_models(trace_dir):
    sc = openb_scenario(trace_dir, seed=1, hours=1)
    assert sum(1 for o in sc.objects if o["kind"] == "Node") == 1213
    assert _gpus(sc) == {"G2": 4392, "T4": 842, "G3": 312, "P100": 265, "V100M32": 204, "V100M16": 195, "A10": 2}
    by_name = {j.name: j for j in sc.explicit_jobs}
    subs = {j.name: [s["name"] for s in j.claim_spec["devices"]["requests"][0]["firstAvailable"]]
            for j in sc.explicit_jobs}
    # a pod without gpu_spec may use every model, best first; the 33 long-running pods arrive at the start
    assert subs["openb-pod-0000"] == ["g3", "g2", "v100m32", "v100m16", "t4", "p100", "a10"]
    assert by_name["openb-pod-0000"].arrival_ms == by_name["openb-pod-0001"].arrival_ms == sc_start(sc)
    assert {tuple(s) for s in subs.values()} >= {("v100m32", "v100m16"), ("t4",)}
    assert {j.namespace for j in sc.explicit_jobs} <= {"qos-ls", "qos-be", "qos-burstable", "qos-guaranteed"}


def test_openb_day_runs_with_trace_model_names(trace_dir):
    result = simulate(openb_scenario(trace_dir, seed=1, hours=1, load=0.2), seed=1, keep_events=False)
    allocated = [r for r in result.records if r.outcome == "allocated"]
    assert len(allocated) > 100
    assert {r.allocated_model for r in allocated} <= {"G3", "G2", "V100M32", "V100M16", "T4", "P100", "A10"}
    assert all(r.preference[0] == r.preferred_model for r in allocated)


def test_spot_inventory_shape(trace_dir):
    sc = spot_scenario(trace_dir, seed=1, hours=1)
    assert sum(_gpus(sc).values()) == 10412
    assert _gpus(sc)["H800"] == 1752 and _gpus(sc)["A100-SXM4-80GB"] == 3456


def test_missing_trace_dir_is_named(tmp_path):
    with pytest.raises(TraceError, match="openb_node_list_gpu_node.csv: trace file not found"):
        openb_scenario(str(tmp_path), seed=1, hours=1)


def test_no_trace_folder_names_the_search_and_make_traces(tmp_path, monkeypatch):
    # nothing explicit and no default folder: the message lists what was searched
    monkeypatch.delenv("CLAIMTRAIL_TRACE_DIR", raising=False)
    monkeypatch.setenv("CLAIMTRAIL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("ingest.simulate.trace_files.repo_shared_traces", lambda: str(tmp_path / "shared" / "traces"))
    with pytest.raises(TraceError) as err:
        trace_scenario("openb-2023", None, seed=1, hours=1)
    assert str(err.value) == (
        f"no trace folder found (searched {tmp_path}/data/traces (the data directory), "
        f"{tmp_path}/shared/traces (beside the repository)); run `make traces` (or `claimtrail traces fetch`) "
        "to download them, or give --trace-dir")


def sc_start(sc):
    from audit.timestamps import parse_time_ms

    return parse_time_ms(sc.start)


@pytest.mark.parametrize(("model", "weight"), [
    ("H800", 1.0), ("A100-SXM4-80GB", 0.315), ("V100M32", 0.126), ("A10", 0.126), ("T4", 0.066), ("P100", 0.021),
    ("G2", 1.0),  # undisclosed by the trace
])
def test_trace_models_weigh_their_published_fp16_throughput(model, weight):
    from audit.policy import parse_policy
    from ingest.simulate.traces import OPENB_RANK, SPOT_RANK, _identity_policy

    policy = parse_policy(_identity_policy("t", tuple(dict.fromkeys(OPENB_RANK + SPOT_RANK)), ["qos-ls"]))
    assert policy.h100_equivalent(model) == weight
    assert policy.model_of("gpu.nvidia.com", {"productName": {"string": model}}) == model
