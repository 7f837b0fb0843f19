"""The seeded simulator: a discrete-event loop that writes the world event log and decisions.

Everything random comes from one ``random.Random(seed)``; simulated time only. The loop turns a
``Scenario`` into world events (policy activation, classes, nodes, slices, claims, pods), then
processes timed actions — arrivals (Poisson plus bursts), finishes, health flaps (a
``DeviceTaintRule`` with ``gpu.nvidia.com/unhealthy`` added, later removed), node loss and
repair, driver upgrades (a new slice generation), policy changes — and after each instant runs a
scheduling pass: pending pods are attempted in the fairness order (``audit.scheduler.queue``),
each attempt is ``decide`` then ``bind``; with probability ``bindInterference`` an event that
invalidates the proposal (taint, slice generation bump, a foreign claim on the device, node loss)
is injected between the two, exactly where a real cluster races. The loop itself — passes,
attempts, retries, finishes, failures — is the core's ``audit.scheduler.loop.ClusterLoop``, the
one counterfactual replay runs too; this module adds the workload and the disruptions.

Queueing is per tenant and first-in-first-out inside a tenant (like Kueue's StrictFIFO per
queue): when a tenant's head pod cannot be placed the tenant waits until capacity changes
(release, recovery, repair, policy change), so an unschedulable pod costs one record per change,
not one per instant. Failed binds back off (policy base/cap) and retry; terminal failures end
the pod (phase Failed).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.events import EventType, WorldEvent
from audit.policy import default_policy, parse_policy, policy_document
from audit.records import DecisionRecord
from audit.replay.checkpoints import collector_paused
from audit.scheduler.engine import Decision
from audit.scheduler.loop import ClusterLoop
from audit.timestamps import format_time_ms, parse_time_ms
from audit.world import World
from ingest.simulate.cluster import (
    DRIVER,
    GPU_PRODUCT_LABEL,
    build_nodes,
    device_class,
    gpu_product_label,
    slice_object,
    slice_uuids,
)
from ingest.simulate.scenario import Scenario

HOUR = 3_600_000
UNHEALTHY_TAINT = "gpu.nvidia.com/unhealthy"
# how long the job controller takes to re-create a preempted pod
RECREATE_AFTER_MS = 1_000


@dataclass
class Job:
    """One generated (or trace) pod: when it arrives, what it asks for and for how long it runs."""

    name: str
    namespace: str
    arrival_ms: int
    size: int
    duration_ms: int
    template: str = ""
    device_plugin: bool = False
    claim_spec: dict[str, Any] | None = None  # explicit claim spec (trace mode) instead of a template
    node_model: str = ""  # a device-plugin pod's GPU model, pinned with a nodeSelector ("" for any)


@dataclass
class SimulationResult:
    records: list[DecisionRecord]
    events: list[WorldEvent]
    world: World
    jobs: int
    finished: int
    failed: int
    end_ms: int
    start_ms: int
    preempted: int = 0  # running pods evicted by reclaim (each re-created by its job)


class Simulator(ClusterLoop):
    def __init__(self, scenario: Scenario, seed: int = 1, hours: float | None = None,
                 keep_events: bool = True, on_events: Callable[[list[WorldEvent]], None] | None = None,
                 on_record: Callable[[DecisionRecord], None] | None = None,
                 progress: Callable[[float, int], None] | None = None) -> None:
        self.sc = scenario
        self.rng = random.Random(seed)
        # the models device-plugin pods pin come from their own stream, so a scenario that names
        # none draws exactly the same jobs as before they existed
        self.dp_rng = random.Random(f"{seed}/device-plugin models")
        self.hours = scenario.hours if hours is None else hours
        self.start_ms = parse_time_ms(scenario.start)
        super().__init__(World(scenario.cluster), self.start_ms)
        self.end_ms = self.start_ms + int(self.hours * HOUR)
        self.keep_events = keep_events
        self.on_events = on_events
        self.on_record = on_record
        self.progress = progress
        self.events: list[WorldEvent] = []
        self.records: list[DecisionRecord] = []
        self.jobs: dict[str, Job] = {}  # pod key -> its job, while the pod exists
        self.templates = scenario.templates()
        self.node_pools: dict[str, Any] = {}
        self.lost: set[str] = set()
        self.finished = 0
        self.failed = 0
        self.preempted = 0
        self._uid = 0
        self._n_flap = 0
        self._specs: dict[tuple[str, int], dict[str, Any]] = {}  # (template, size) -> claim spec

    # ---- emitting world events ------------------------------------------------------------------

    def apply(self, ev: WorldEvent) -> None:
        self.apply_event(ev)

    def apply_event(self, ev: WorldEvent) -> None:
        """Fold an event into the world and hand it to the event log and listeners."""
        self.world.apply(ev)
        if self.keep_events:
            self.events.append(ev)
        if self.on_events is not None:
            self.on_events([ev])

    def _uid_next(self) -> str:
        self._uid += 1
        # the 128 bits as 32 hex digits, grouped 8-4-4-4-12 (one conversion instead of five)
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    # ---- setup --------------------------------------------------------------------------------------

    def setup(self, jobs: list[Job]) -> None:
        policy_doc = self.sc.policy or policy_document(default_policy())
        self.emit("Policy", "", policy_doc["metadata"]["name"], policy_doc)
        if not any(o.get("kind") == "DeviceClass" for o in self.sc.objects):
            self.emit("DeviceClass", "", device_class()["metadata"]["name"], device_class())
        for obj in self.sc.objects:
            kind = obj["kind"]
            if kind == "ResourceClaimTemplate":
                continue  # templates are instantiated by the claim controller, not seen by the allocator
            self.emit(kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], obj)
        for node, sl in build_nodes(self.sc.pools, self.rng):
            name = node["metadata"]["name"]
            self.emit("Node", "", name, node)
            if sl is not None:
                self.emit("ResourceSlice", "", sl["metadata"]["name"], sl)
        for pool in self.sc.pools:
            for i in range(pool.nodes):
                self.node_pools[f"{pool.node_prefix()}-{i:03d}"] = pool
        self.schedule_in_order((job.arrival_ms, "arrive", job) for job in jobs)
        for at, doc in self.sc.policy_changes:
            self.schedule(self.start_ms + at, "policy", doc)
        self._schedule_disruptions()

    def _schedule_disruptions(self) -> None:
        d = self.sc.disruptions
        dra_nodes = sorted(n for n, p in self.node_pools.items() if not p.device_plugin)
        if not dra_nodes:
            return
        for rate, kind in ((d.health_flaps_per_hour, "flap"), (d.node_losses_per_day / 24, "lose"),
                           (d.driver_upgrades_per_day / 24, "upgrade")):
            if rate <= 0:
                continue
            t = self.start_ms
            while True:
                t += int(self.rng.expovariate(rate / HOUR))
                if t >= self.end_ms:
                    break
                self.schedule(t, kind, self.rng.choice(dra_nodes))

    # ---- generating jobs ----------------------------------------------------------------------------

    def generate_jobs(self) -> list[Job]:
        jobs: list[Job] = list(self.sc.explicit_jobs)
        n = 0
        has_dp = any(p.device_plugin for p in self.sc.pools)
        for t in self.sc.tenants:
            arrivals: list[int] = []
            if t.arrivals_per_hour > 0:
                at = self.start_ms
                while True:
                    at += int(self.rng.expovariate(t.arrivals_per_hour / HOUR))
                    if at >= self.end_ms:
                        break
                    arrivals.append(at)
            for b in t.bursts:
                for i in range(b.jobs):
                    arrivals.append(self.start_ms + b.at_ms + (b.over_ms * i) // max(1, b.jobs))
            for at in sorted(arrivals):
                n += 1
                size = _weighted(self.rng, t.sizes)
                dur = t.duration_median_min * 60_000 * math.exp(t.duration_sigma * self.rng.gauss(0.0, 1.0))
                template = _weighted(self.rng, t.templates)
                dp = has_dp and self.rng.random() < t.device_plugin_fraction
                pinned = _weighted(self.dp_rng, t.device_plugin_models) if dp and t.device_plugin_models else ""
                jobs.append(Job(f"job-{n:06d}", t.namespace, at, size, max(60_000, int(dur)), template, dp,
                                node_model=pinned))
        jobs.sort(key=lambda j: (j.arrival_ms, j.namespace, j.name))
        return jobs

    # ---- the loop -----------------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        # Every record, event and world object the loop makes stays alive until the end and none
        # forms a reference cycle (reference counting frees the rest), so a cyclic collection
        # during the run only walks live objects again: 5-7 % of the loop's time at 1,000 nodes.
        # Collection resumes afterwards, with the run's objects in the oldest generation.
        with collector_paused():
            return self._run()

    def _run(self) -> SimulationResult:
        jobs = self.generate_jobs()
        self.setup(jobs)
        self._last_progress = 0
        self.run_until(self.end_ms)
        if self.progress is not None:
            self.progress(1.0, len(self.records))
        return SimulationResult(self.records, self.events, self.world, len(jobs), self.finished, self.failed,
                                self.end_ms, self.start_ms, self.preempted)

    def after_pass(self) -> None:
        if self.progress is not None and len(self.records) - self._last_progress >= 500:
            self._last_progress = len(self.records)
            self.progress((self.now - self.start_ms) / max(1, self.end_ms - self.start_ms), len(self.records))

    def on_action(self, kind: str, data: Any) -> None:
        getattr(self, f"_on_{kind}")(data)

    def before_bind(self, key: str, attempt: int, decision: Decision) -> None:
        if self.sc.disruptions.bind_interference > 0 and self.rng.random() < self.sc.disruptions.bind_interference:
            self._interfere(decision)

    def duration_ms(self, key: str) -> int | None:
        return self.jobs[key].duration_ms

    def record(self, rec: DecisionRecord) -> None:
        self.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)

    def on_finished(self, key: str) -> None:
        self.finished += 1

    def on_failed(self, key: str) -> None:
        self.failed += 1

    def on_preempted(self, key: str) -> None:
        """The job controller re-creates a preempted pod as ``<job>-p<n>`` one second later (an
        arrival of its own instant, as counterfactual replay sees it in the log); its job runs
        again from the start for its whole duration (nothing is checkpointed)."""
        self.preempted += 1
        job = self.jobs[key]
        base, _, n = job.name.rpartition("-p")
        name = f"{base}-p{int(n) + 1}" if base and n.isdigit() else f"{job.name}-p1"
        at = self.now + RECREATE_AFTER_MS
        self.schedule(at, "arrive", dataclasses.replace(job, name=name, arrival_ms=at))

    def remove(self, key: str) -> None:
        super().remove(key)
        del self.jobs[key]

    # ---- actions ------------------------------------------------------------------------------------

    def _on_arrive(self, job: Job) -> None:
        self.submit(job)

    def submit(self, job: Job) -> str:
        """Create the job's claim and pod at the current time; returns the pod key."""
        key = f"{job.namespace}/{job.name}"
        pod: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": job.name, "namespace": job.namespace, "uid": self._uid_next(),
                         "creationTimestamp": format_time_ms(self.now)},
            "spec": {"containers": [{"name": "main", "image": "trainer"}]},
        }
        if job.device_plugin:
            pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(job.size)}}
            if job.node_model:
                pod["spec"]["nodeSelector"] = {GPU_PRODUCT_LABEL: gpu_product_label(job.node_model)}
        else:
            claim_name = f"{job.name}-gpu"
            claim = self._claim(job, claim_name)
            self.emit("ResourceClaim", job.namespace, claim_name, claim)
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": job.template or "inline"}]
            pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}]}
        self.emit("Pod", job.namespace, job.name, pod)
        self.jobs[key] = job
        self.manage(key, job.device_plugin, self.now)
        return key

    def _claim(self, job: Job, claim_name: str) -> dict[str, Any]:
        labels: dict[str, str] = {}
        if job.claim_spec is not None:
            spec = job.claim_spec
        else:
            tmpl = self.templates[job.template]
            inner = tmpl["spec"]
            labels = dict((inner.get("metadata") or {}).get("labels") or {})
            # Claims of one template and size share one spec object: a payload is never changed
            # once it is in an event (the rule the world's caches rely on too), so building the
            # same nested spec again for every job would only cost time and memory.
            spec = self._specs.get((job.template, job.size))
            if spec is None:
                spec = self._specs[(job.template, job.size)] = _with_count(inner["spec"], job.size)
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": claim_name, "namespace": job.namespace, "uid": self._uid_next(),
                             "labels": labels,
                             "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"}},
                "spec": spec}

    def _on_policy(self, doc: dict[str, Any]) -> None:
        parse_policy(doc)
        self.emit("Policy", "", doc["metadata"]["name"], doc)
        self.wake(everything=True)

    def _on_flap(self, node: str) -> None:
        if node in self.lost:
            return
        pool = self.node_pools[node]
        dev = f"gpu-{self.rng.randrange(pool.gpus_per_node)}"
        self._n_flap += 1
        name = f"flap-{node}-{dev}-{self._n_flap}"
        self.taint_device(name, node, dev, "xid-79")
        self.schedule(self.now + self.sc.disruptions.flap_ms, "recover", name)

    def taint_device(self, rule: str, node: str, device: str, value: str) -> None:
        """A DeviceTaintRule marking one device ``gpu.nvidia.com/unhealthy`` (NoSchedule)."""
        self.emit("DeviceTaintRule", "", rule, {
            "apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": rule},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": node, "device": device},
                     "taint": {"key": UNHEALTHY_TAINT, "value": value, "effect": "NoSchedule"}}})

    def _on_recover(self, rule: str) -> None:
        if self.world.get("DeviceTaintRule", "", rule) is not None:
            self.emit("DeviceTaintRule", "", rule, None, EventType.DELETE.value)
            self.wake()

    def _on_lose(self, node: str) -> None:
        self.lose_node(node)

    def lose_node(self, node: str) -> None:
        """The node disappears with its slice; pods running there fail; it is repaired later."""
        if node in self.lost or node not in self.world.nodes:
            return
        self.lost.add(node)
        self.emit("Node", "", node, None, EventType.DELETE.value)
        sl_name = f"{node}-{DRIVER}"
        old = self.world.get("ResourceSlice", "", sl_name)
        if old is not None:
            self.emit("ResourceSlice", "", sl_name, None, EventType.DELETE.value)
        self.fail_running_on(node)
        self.schedule(self.now + self.sc.disruptions.node_repair_ms, "repair", (node, old))

    def _on_repair(self, data: tuple[str, dict[str, Any] | None]) -> None:
        node, old = data
        self.lost.discard(node)
        pool = self.node_pools[node]
        from ingest.simulate.cluster import node_object

        self.emit("Node", "", node, node_object(node, pool))
        if old is not None:
            gen = int(old["spec"]["pool"]["generation"]) + 1
            sl = slice_object(node, pool, self.rng, gen, _driver_version(old), slice_uuids(old))
            self.emit("ResourceSlice", "", sl["metadata"]["name"], sl)
        self.wake()

    def _on_upgrade(self, node: str) -> None:
        self.bump_slice(node, upgrade=True)

    def bump_slice(self, node: str, upgrade: bool) -> None:
        """Republish the node's slice with the next generation (a driver upgrade bumps the version)."""
        sl_name = f"{node}-{DRIVER}"
        old = self.world.get("ResourceSlice", "", sl_name)
        if old is None:
            return
        pool = self.node_pools[node]
        version = _driver_version(old)
        if upgrade:
            major, minor, patch = (int(x) for x in version.split("."))
            version = f"{major}.{minor + 1}.{patch}"
        gen = int(old["spec"]["pool"]["generation"]) + 1
        sl = slice_object(node, pool, self.rng, gen, version, slice_uuids(old))
        self.emit("ResourceSlice", "", sl_name, sl)
        self.wake()

    def _interfere(self, d: Decision) -> None:
        """Something changes between filter and bind, as races do in a real cluster."""
        p = d.proposal
        assert p is not None
        if p.dp_gpus:
            return
        kind = self.rng.choice(("unhealthy", "stale_slice", "binding_conflict", "node_lost"))
        device = p.device_ids[0]
        driver, pool, dev = device.split("/", 2)
        if kind == "unhealthy":
            self._n_flap += 1
            name = f"flap-{pool}-{dev}-{self._n_flap}"
            self.taint_device(name, pool, dev, "xid-48")
            self.schedule(self.now + self.sc.disruptions.flap_ms, "recover", name)
        elif kind == "stale_slice":
            self.bump_slice(p.node, upgrade=False)
        elif kind == "binding_conflict":
            name = f"foreign-{self._uid}"
            ns = "kube-system"
            claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": name, "namespace": ns, "uid": self._uid_next()},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
                     "status": {"allocation": {"devices": {"results": [
                         {"request": "gpu", "driver": driver, "pool": pool, "device": dev}], "config": []},
                         "nodeSelector": None}}}
            self.emit("ResourceClaim", ns, name, claim)
            self.schedule(self.now + 10 * 60_000, "release_foreign", (ns, name))
        else:
            self.lose_node(p.node)

    def _on_release_foreign(self, data: tuple[str, str]) -> None:
        ns, name = data
        self.emit("ResourceClaim", ns, name, None, EventType.DELETE.value)
        self.wake()


def _weighted(rng: random.Random, choices: tuple[tuple[Any, float], ...]) -> Any:
    total = sum(w for _, w in choices)
    x = rng.random() * total
    for value, w in choices:
        x -= w
        if x < 0:
            return value
    return choices[-1][0]


def _with_count(spec: dict[str, Any], size: int) -> dict[str, Any]:
    devices = spec.get("devices") or {}
    requests = []
    for r in devices.get("requests") or []:
        if r.get("firstAvailable"):
            r = {**r, "firstAvailable": [{**s, "count": size} for s in r["firstAvailable"]]}
        elif r.get("exactly"):
            r = {**r, "exactly": {**r["exactly"], "count": size}}
        requests.append(r)
    return {**spec, "devices": {**devices, "requests": requests}}


def _driver_version(slice_obj: dict[str, Any]) -> str:
    devices = slice_obj["spec"].get("devices") or []
    if not devices:
        return "580.105.8"
    return str(devices[0]["attributes"]["driverVersion"]["version"])


def simulate(scenario: Scenario, seed: int = 1, hours: float | None = None, **kwargs: Any) -> SimulationResult:
    return Simulator(scenario, seed, hours, **kwargs).run()
