"""Worlds for engine tests, built the way the simulator builds them from a scenario file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from audit.policy import parse_policy, policy_document
from ingest.simulate.loop import Job, Simulator
from ingest.simulate.scenario import load_scenario_text

ALL_DEVICES = list(range(8))
H100_NODES = ("h100-000", "h100-001")
MINUTE = 60_000
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "scenarios")


def scenario(name: str = "small-cluster.yaml", **policy_spec: Any) -> Any:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), name)
    if policy_spec:
        doc = policy_document(parse_policy(sc.policy))
        doc["spec"].update(policy_spec)
        sc.policy = doc
    return sc


def cluster(name: str = "small-cluster.yaml", seed: int = 7, **policy_spec: Any) -> Simulator:
    """A simulator whose world holds the scenario's policy, classes, nodes and slices (no jobs yet)."""
    sim = Simulator(scenario(name, **policy_spec), seed=seed)
    sim.setup([])
    return sim


def submit(sim: Simulator, name: str, namespace: str = "alpha", size: int = 1, template: str = "h100-first",
           device_plugin: bool = False) -> str:
    return sim.submit(Job(name, namespace, sim.now, size, 3_600_000, template, device_plugin))


def hold(sim: Simulator, node: str, devices: list[int], name: str = "", namespace: str = "ops") -> str:
    """Allocate devices ``gpu-<i>`` of ``node`` to a claim of ``namespace`` (by default outside
    every tenant: another scheduler's)."""
    name = name or f"held-{node}-{'-'.join(map(str, devices))}"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                           "count": len(devices)}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{i}"} for i in devices],
                 "config": []}, "nodeSelector": None}}}
    sim.emit("ResourceClaim", namespace, name, claim)
    return name


def h100_history(history_min: list[int], running_age_min: float | None, fallback: dict[str, Any] | None = None,
                 **policy_spec: Any) -> Simulator:
    """The small cluster after finished H100 holdings of the given lengths in minutes (one device
    each, by claims of another scheduler), then every H100 held again for ``running_age_min``
    minutes by one claim per device, ``run-<node>-<i>`` (None: the H100 are left free): what an
    adaptive hold estimates a release from."""
    sim = cluster(**({"fallback": fallback} if fallback else {}), **policy_spec)
    for i, length in enumerate(sorted(history_min)):
        node, dev = H100_NODES[i % 2], (i // 2) % 8
        name = hold(sim, node, [dev], name=f"past-{i}")
        sim.now += length * MINUTE
        sim.emit("ResourceClaim", "ops", name, None, "delete")
        sim.now -= length * MINUTE
    sim.now += max(history_min, default=0) * MINUTE
    if running_age_min is not None:
        for node in H100_NODES:
            for dev in ALL_DEVICES:
                hold(sim, node, [dev], name=f"run-{node}-{dev}")
        sim.now += round(running_age_min * MINUTE)
    return sim


def decide_and_bind(sim: Simulator, key: str, attempt: int = 1) -> Any:
    from audit.scheduler.engine import bind, decide

    d = bind(sim.world, decide(sim.world, key, attempt, sim.now), sim.now)
    for ev in d.events:
        sim.apply_event(ev)
    return d


def occupied(held: dict[str, Any], taints: Any = (), **policy_spec: Any) -> Simulator:
    """The small cluster with devices ``gpu-<i>`` held per node and (node, i) devices tainted unhealthy."""
    sim = cluster(**policy_spec)
    for node, devs in sorted(held.items()):
        if devs:
            hold(sim, node, sorted(devs))
    for i, (node, dev) in enumerate(taints):
        sim.taint_device(f"t-{i}", node, f"gpu-{dev}", "xid")
    return sim


def world_view(world: Any) -> Any:
    """The world's objects as the cluster view ``audit.explain`` reads (as the API rebuilds it)."""
    from audit.explain import ClusterView

    return ClusterView.from_objects({**obj, "kind": kind} for kind, by_key in sorted(world.objects.items())
                                    if kind != "Policy" for _, obj in sorted(by_key.items()))


# Kinds in the order a watcher logs a cluster: what the devices are before what holds them (a
# claim folded before its devices' slice holds devices of no model).
DUMP_KINDS = ("Policy", "DeviceClass", "DeviceTaintRule", "Node", "ResourceSlice", "ResourceClaim", "Pod")


def dump_events(policy: Path, dump: Path, cluster_name: str = "lab") -> list[Any]:
    """The events a watcher logs of a cluster dump (``kubectl get … -o yaml``, a ``List``) under a
    policy file: its objects upserted kind by kind (``DUMP_KINDS``, file order within a kind), the
    policy first, at one moment."""
    from audit.events import WorldEvent

    objects = [yaml.safe_load(policy.read_text()), *yaml.safe_load(dump.read_text())["items"]]
    return [WorldEvent(cluster_name, seq, "2026-05-01T07:10:00.000Z", "upsert", o["kind"],
                       o["metadata"].get("namespace", ""), o["metadata"]["name"], o)
            for seq, o in enumerate(sorted(objects, key=lambda o: DUMP_KINDS.index(o["kind"])))]


def dump_world(policy: Path, dump: Path, cluster_name: str = "lab") -> Any:
    """The decision engine's world of ``dump_events``."""
    from audit.world import World

    world = World(cluster_name)
    for event in dump_events(policy, dump, cluster_name):
        world.apply(event)
    return world
