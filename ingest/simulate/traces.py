"""Trace-driven scenarios from the public Alibaba GPU traces (read in place, never copied).

``openb-2023`` (cluster-trace-gpu-v2023, Weng et al., "Beware of Fragmentation", USENIX ATC '23;
Alibaba Cluster Trace Program, github.com/alibaba/clusterdata): every GPU node of
``openb_node_list_gpu_node.csv`` becomes a Node and a ResourceSlice whose devices carry the
trace's own model name as ``productName`` (G2, T4, V100M32, ...); the policy's model table keeps
those names (one rule per model, no renaming) and weighs each by its published FP16 throughput
against the H100 (``TRACE_H100_EQUIVALENT``). Every pod of ``openb_pod_list_gpuspec33.csv`` (the
realistic 33 % constrained level) with ``num_gpu > 0`` arrives at its ``creation_time`` (relative to
the start of the trace's busy period, 9,964,972 s, where deletions begin), compressed in time to the
requested load (``load.py``), and runs for ``deletion_time − scheduled_time``. Its claim has one request whose ``firstAvailable`` list follows
the allowed models of ``gpu_spec`` (all inventory models when empty), ordered by ``OPENB_RANK``:
the trace gives no ranking, so the undisclosed G3/G2 are taken as the top tiers, V100M32/V100M16
next and T4/P100/A10 as "other compatible" (as the traces README suggests). Fractional GPUs
(``gpu_milli`` < 1000) are rounded up to one whole device. The trace has no tenant field, so pods
are grouped into synthetic tenants by QoS class (namespaces ``qos-ls``, ``qos-be``, ...).

``spot-2026`` (cluster-trace-v2026-spot-gpu, Duan et al., "GFS", ASPLOS '26): the node inventory
(H800, A100-SXM4-80GB, A800-SXM4-80GB, A10, GPU-series-1/2) gives the cluster shape; its job file
is not available, so the workload is a synthetic three-tenant mix whose arrival rates are scaled
to the requested load (``load.py``), with H800 first, then A100/A800, then any other model.
"""

from __future__ import annotations

import csv
import os
import random
import re
from typing import Any

from audit.policy import API_VERSION
from ingest.simulate.cluster import GPU_CLASS, NodePool, node_object, slice_object
from ingest.simulate.load import (
    DEFAULT_LOAD,
    LoadError,
    arrival_scale,
    check_arrivals,
    check_load,
    compress,
    compression_factor,
    mix_gpu_ms_per_hour,
    offered_gpu_ms,
)
from ingest.simulate.loop import Job
from ingest.simulate.scenario import Scenario, TenantMix
from ingest.simulate.trace_files import candidate_dirs, find_trace_dir

TRACES = ("openb-2023", "spot-2026")
OPENB_DIR = "cluster-trace-gpu-v2023"
SPOT_DIR = "cluster-trace-v2026-spot-gpu"
OPENB_BUSY_START_S = 9_964_972
OPENB_RANK = ("G3", "G2", "V100M32", "V100M16", "T4", "P100", "A10")
SPOT_RANK = ("H800", "A100-SXM4-80GB", "A800-SXM4-80GB", "GPU-series-1", "GPU-series-2", "A10")
# H100-equivalent weight per trace model: dense FP16 Tensor Core throughput over the H100 SXM5's
# 989.4 TFLOPS, from NVIDIA's datasheets — A100: 312; V100 (SXM2, 16 or 32 GB): 125; A10: 125; T4:
# 65 (mixed precision); Tesla P100 (SXM2): 21.2 FP16, it has no Tensor Cores. H800 and A800 are the
# export versions of the H100 and A100 with the same arithmetic throughput. The traces do not say
# what G2, G3 and GPU-series-1/2 are, so they keep 1.0 (stated, not measured).
TRACE_H100_EQUIVALENT = {
    "H800": 1.0, "A100-SXM4-80GB": 0.315, "A800-SXM4-80GB": 0.315, "V100M32": 0.126, "V100M16": 0.126,
    "A10": 0.126, "T4": 0.066, "P100": 0.021,
}
DEFAULT_START = "2026-11-02T00:00:00Z"
QOS_NAMESPACES = {"LS": "qos-ls", "BE": "qos-be", "Burstable": "qos-burstable", "Guaranteed": "qos-guaranteed"}


class TraceError(ValueError):
    """A trace cannot be read; the message names the file (and row/column when it is the data)."""


def no_trace_dir_message() -> str:
    searched = ", ".join(f"{path} ({source})" for source, path in candidate_dirs())
    return (f"no trace folder found (searched {searched}); run `make traces` (or `claimtrail traces fetch`) "
            "to download them, or give --trace-dir")


def _rows(path: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    if not os.path.exists(path):
        raise TraceError(f"{path}: trace file not found (run `make traces` to download the traces, or set --trace-dir)")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
        return list(reader)


def _identity_policy(name: str, ranks: tuple[str, ...], namespaces: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION, "kind": "Policy", "metadata": {"name": name},
        "spec": {
            "version": "trace-1",
            "tenants": [{"name": ns, "namespaces": [ns], "weight": 1} for ns in namespaces],
            "fairness": {"mode": "drf", "usageHalfLife": "2h"},
            # Keep the trace's own model names: the device's productName is the model.
            "deviceModels": [{"model": m, "driver": "gpu.nvidia.com", "attribute": "productName",
                              "match": "^" + re.escape(m) + "$", "h100Equivalent": TRACE_H100_EQUIVALENT.get(m, 1.0)}
                             for m in ranks],
        },
    }


def _selector_for(models: list[str]) -> dict[str, Any]:
    if len(models) == 1:
        expr = f"device.attributes['gpu.nvidia.com'].productName == '{models[0]}'"
    else:
        expr = "device.attributes['gpu.nvidia.com'].productName in [" + ", ".join(f"'{m}'" for m in models) + "]"
    return {"cel": {"expression": expr}}


def _sub_name(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def openb_scenario(trace_dir: str, seed: int, hours: float, start: str = DEFAULT_START,
                   load: float | None = DEFAULT_LOAD) -> Scenario:
    """``load`` None replays the recorded arrival times as they are, once."""
    base = os.path.join(trace_dir, OPENB_DIR)
    nodes = _rows(os.path.join(base, "openb_node_list_gpu_node.csv"), ("sn", "gpu", "model"))
    pods = _rows(os.path.join(base, "openb_pod_list_gpuspec33.csv"),
                 ("name", "num_gpu", "gpu_spec", "qos", "creation_time", "deletion_time", "scheduled_time"))
    rng = random.Random(seed)
    sc = Scenario(name="openb-2023", cluster="openb-2023", start=start, hours=hours)
    present: set[str] = set()
    for i, row in enumerate(nodes):
        model = row["model"]
        try:
            gpus = int(row["gpu"])
        except ValueError:
            raise TraceError(f"{base}/openb_node_list_gpu_node.csv: row {i + 2}: gpu: not an integer") from None
        if gpus <= 0 or not model:
            continue
        present.add(model)
        pool = NodePool(model=model, nodes=1, gpus_per_node=gpus)
        sc.objects.append(node_object(row["sn"], pool))
        sc.objects.append(slice_object(row["sn"], pool, rng))
    inventory = [m for m in OPENB_RANK if m in present]
    from audit.timestamps import parse_time_ms

    start_ms = parse_time_ms(start)
    end_ms = start_ms + int(hours * 3_600_000)
    namespaces: set[str] = set()
    busy: list[Job] = []
    carried: list[Job] = []
    trace_end_s = OPENB_BUSY_START_S
    for i, row in enumerate(pods):
        where = f"{base}/openb_pod_list_gpuspec33.csv: row {i + 2}"
        try:
            num_gpu = int(row["num_gpu"])
            created = int(row["creation_time"])
            deleted = int(row["deletion_time"])
            scheduled = int(row["scheduled_time"]) if row["scheduled_time"] else created
        except ValueError as exc:
            raise TraceError(f"{where}: {exc}") from None
        trace_end_s = max(trace_end_s, deleted)
        if num_gpu <= 0:
            continue
        allowed = sorted({m for m in row["gpu_spec"].split("|") if m}, key=lambda m: OPENB_RANK.index(m)
                         if m in OPENB_RANK else len(OPENB_RANK)) or inventory
        ns = QOS_NAMESPACES.get(row["qos"], "qos-other")
        namespaces.add(ns)
        subs = [{"name": _sub_name(m), "deviceClassName": GPU_CLASS, "count": num_gpu, "selectors": [_selector_for([m])]}
                for m in allowed]
        spec = {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}}
        duration = max(60, deleted - scheduled) * 1000
        job = Job(row["name"], ns, start_ms + max(0, created - OPENB_BUSY_START_S) * 1000, num_gpu, duration,
                  claim_spec=spec)
        (carried if created < OPENB_BUSY_START_S else busy).append(job)
    span_ms = (trace_end_s - OPENB_BUSY_START_S) * 1000
    if load is None:
        sc.explicit_jobs = sorted((j for j in [*carried, *busy] if j.arrival_ms < end_ms),
                                  key=lambda j: (j.arrival_ms, j.namespace, j.name))
        sc.policy = _identity_policy("openb-2023", OPENB_RANK, sorted(namespaces))
        return sc
    try:
        k = compression_factor(check_load(load), sum(int(r["gpu"]) for r in nodes if r["model"]),
                               sum(j.size for j in carried), span_ms, offered_gpu_ms(busy, end_ms - start_ms))
        # each cycle of the compressed trace brings every busy-period pod again
        check_arrivals(load, len(busy) * ((end_ms - start_ms) * k / span_ms + 1))
    except LoadError as exc:
        raise TraceError(str(exc)) from None
    sc.explicit_jobs = compress(busy, carried, k, span_ms, start_ms, end_ms)
    sc.policy = _identity_policy("openb-2023", OPENB_RANK, sorted(namespaces))
    return sc


def spot_scenario(trace_dir: str, seed: int, hours: float, start: str = DEFAULT_START,
                  load: float | None = DEFAULT_LOAD) -> Scenario:
    if load is None:
        raise TraceError("--load recorded: spot-2026 has no recorded arrivals (its workload is a synthetic mix); "
                         "give a load such as 1.2")
    path = os.path.join(trace_dir, SPOT_DIR, "node_info_df.csv")
    rows = _rows(path, ("gpu_model", "gpu_capacity_num", "node_name"))
    rng = random.Random(seed)
    sc = Scenario(name="spot-2026", cluster="spot-2026", start=start, hours=hours)
    gpus_total = 0
    for i, row in enumerate(rows):
        try:
            gpus = int(row["gpu_capacity_num"])
        except ValueError:
            raise TraceError(f"{path}: row {i + 2}: gpu_capacity_num: not an integer") from None
        name = f"spot-node-{int(row['node_name']):04d}"
        pool = NodePool(model=row["gpu_model"], nodes=1, gpus_per_node=gpus)
        sc.objects.append(node_object(name, pool))
        sc.objects.append(slice_object(name, pool, rng))
        gpus_total += gpus
    tiers = [("h800", ["H800"]), ("a100-class", ["A100-SXM4-80GB", "A800-SXM4-80GB"]),
             ("other", ["GPU-series-1", "GPU-series-2", "A10"])]
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "spot-h800-first", "namespace": "default"},
                "spec": {"metadata": {"labels": {"claimtrail.io/template-version": "v1"}},
                         "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                             {"name": n, "deviceClassName": GPU_CLASS, "count": 1, "selectors": [_selector_for(ms)]}
                             for n, ms in tiers]}]}}}}
    sc.objects.append(template)
    mixes = (("org-1", 12.0, ((1, 0.5), (2, 0.2), (4, 0.2), (8, 0.1))),
             ("org-2", 9.0, ((1, 0.7), (2, 0.3))),
             ("org-3", 6.0, ((1, 0.5), (4, 0.3), (8, 0.2))))
    median_min, sigma = 60.0, 0.9
    # Rates relative to each other as above; --load scales them all (see load.py).
    try:
        asked = mix_gpu_ms_per_hour([(rate, sizes, median_min, sigma) for _, rate, sizes in mixes],
                                    int(hours * 3_600_000))
        scale = arrival_scale(check_load(load), gpus_total, asked)
        check_arrivals(load, sum(rate for _, rate, _ in mixes) * scale * hours)
    except LoadError as exc:
        raise TraceError(str(exc)) from None
    for ns, rate, sizes in mixes:
        sc.tenants.append(TenantMix(ns, rate * scale, (), (("spot-h800-first", 1.0),), sizes, median_min, sigma, 0.0))
    sc.policy = _identity_policy("spot-2026", SPOT_RANK, [t.namespace for t in sc.tenants])
    return sc


def trace_scenario(name: str, trace_dir: str | None, seed: int, hours: float, start: str = "",
                   load: float | None = DEFAULT_LOAD) -> Scenario:
    trace_dir = find_trace_dir(trace_dir)
    if trace_dir is None:
        raise TraceError(no_trace_dir_message())
    if name == "openb-2023":
        return openb_scenario(trace_dir, seed, hours, start or DEFAULT_START, load)
    if name == "spot-2026":
        return spot_scenario(trace_dir, seed, hours, start or DEFAULT_START, load)
    raise TraceError(f"unknown trace {name!r} (one of {', '.join(TRACES)})")
