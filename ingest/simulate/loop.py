"""The seeded simulator: a discrete-event loop that writes the world event log and decisions.

Simulated time only; every random draw comes from a ``random.Random`` seeded by the seed and a
fixed string naming its purpose (``stream``). The loop turns a ``Scenario`` into world events
(policy activation, classes, nodes, slices, claims, pods), then — arrivals (Poisson plus bursts), finishes, health flaps (a ``DeviceTaintRule`` with
``gpu.nvidia.com/unhealthy`` added, later removed), node loss and repair, driver upgrades (a new slice generation), policy changes — and after each instant runs a
scheduling pass: pending pods are attempted in the fairness order (``audit.scheduler.queue``),
each attempt is ``decide`` then ``bind``; with probability ``bindInterference`` an event that
invalidates the proposal (taint, slice generation bump, a foreign claim on the device, node loss)
is injected between the two, exactly where a real cluster races. The loop itself — passes,
attempts, retries, finishes, failures — is the core's ``audit.scheduler.loop.ClusterLoop``, the
one counterfactual replay runs too; this module adds the workload and the disruptions.

Queueing is per tenant and first-in-first-out inside a tenant (like Kueue's StrictFIFO per
queue): when a tenant's head pod cannot be placed the tenant waits until capacity changes
(release, recovery, repair, policy change), and the head is decided again only when such a change
may help it or its hold for its preferred model is due (``audit.scheduler.loop``), so an
unschedulable pod costs one record per change that could place it, not one per instant or wake.
Failed binds back off (policy base/cap) and retry; terminal failures end the pod (phase Failed).

A shorter window is the start of a longer one: the same scenario, seed and start with ``--hours 1``
give exactly the events and decision records that ``--hours 2`` gives before the first hour's end.
That is why each purpose draws from a stream of its own (``stream``) rather than all from one:
with one generator every draw depends on how many were made before it, so drawing a tenant's
arrivals up to the window's end would shift every later draw (the next tenant's arrivals, every
job's size, the node uuids, the disruptions, the pod uids) with the window's length. A tenant's
arrivals, its jobs' properties and the models its device-plugin pods pin come from streams named
after its namespace (so one tenant's mix never moves another's draws either); the node uuids, each
kind of disruption (its times, nodes and devices), the uids of the pods and claims made as the run
goes, and bind interference from one stream each. Every stream is read in simulated-time order,
and the actions of one instant run in the order they were scheduled, which a longer window keeps,
so what the first hour draws and does is the same whatever comes after it. Generated jobs are
numbered in order of arrival across the tenants (ties in the scenario's order of tenants), so
``job-000042`` is the 42nd job to arrive in any window that reaches it. The window's end changes
only where the run stops: nothing at or after it is scheduled, decided or written (a burst or a
disruption past it, a pod's finish or retry), and the run's summary (``SimulationResult``: jobs
arrived, finished, failed) counts the window it was given.
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
from ingest.simulate.scenario import Scenario, TenantMix

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


def stream(seed: int, purpose: str) -> random.Random:
    """The random stream of one purpose. A string seed is hashed whole (SHA-512, Python's
    ``random.seed`` version 2, unaffected by ``PYTHONHASHSEED``), so every purpose gets a stream
    of its own, the same on every run."""
    return random.Random(f"{seed}/{purpose}")


class Simulator(ClusterLoop):
    def __init__(self, scenario: Scenario, seed: int = 1, hours: float | None = None,
                 keep_events: bool = True, on_events: Callable[[list[WorldEvent]], None] | None = None,
                 on_record: Callable[[DecisionRecord], None] | None = None,
                 progress: Callable[[float, int], None] | None = None) -> None:
        self.sc = scenario
        self.seed = seed
        # drawn as the run goes, each in the order its instants come (see the module's docstring)
        self.uid_rng = stream(seed, "uids")
        self.interference_rng = stream(seed, "bind interference")
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
        self.job_count = 0  # generated by ``start`` to arrive within the window
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
        h = f"{self.uid_rng.getrandbits(128):032x}"
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
        for node, sl in build_nodes(self.sc.pools, stream(self.seed, "node uuids")):
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
            rng = stream(self.seed, f"disruptions/{kind}")
            t = self.start_ms
            while True:
                t += int(rng.expovariate(rate / HOUR))
                if t >= self.end_ms:
                    break
                node = rng.choice(dra_nodes)
                # a flap's device is drawn with its time and node, not when it happens: whether it
                # happens (its node may be lost then) must not move the draws after it
                if kind == "flap":
                    self.schedule(t, kind, (node, f"gpu-{rng.randrange(self.node_pools[node].gpus_per_node)}"))
                else:
                    self.schedule(t, kind, node)

    # ---- generating jobs ----------------------------------------------------------------------------

    def generate_jobs(self) -> list[Job]:
        """The scenario's explicit jobs and the tenants' jobs arriving within the window, numbered
        in order of arrival across the tenants (ties in the scenario's order of tenants)."""
        jobs: list[Job] = list(self.sc.explicit_jobs)
        has_dp = any(p.device_plugin for p in self.sc.pools)
        tenants = self.sc.tenants
        arrivals = sorted((at, i) for i, t in enumerate(tenants) for at in self._arrivals(t))
        # a tenant's jobs draw their properties in the tenant's order of arrival; the models its
        # device-plugin pods pin come from a stream of their own, so a tenant that names none
        # draws exactly the same jobs as one that does
        draws = [(stream(self.seed, f"jobs/{t.namespace}"), stream(self.seed, f"device-plugin models/{t.namespace}"))
                 for t in tenants]
        for n, (at, i) in enumerate(arrivals, 1):
            t = tenants[i]
            rng, models = draws[i]
            size = _weighted(rng, t.sizes)
            dur = t.duration_median_min * 60_000 * math.exp(t.duration_sigma * rng.gauss(0.0, 1.0))
            template = _weighted(rng, t.templates)
            dp = has_dp and rng.random() < t.device_plugin_fraction
            pinned = _weighted(models, t.device_plugin_models) if dp and t.device_plugin_models else ""
            jobs.append(Job(f"job-{n:06d}", t.namespace, at, size, max(60_000, int(dur)), template, dp,
                            node_model=pinned))
        jobs.sort(key=lambda j: (j.arrival_ms, j.namespace, j.name))
        return jobs

    def _arrivals(self, t: TenantMix) -> list[int]:
        """The tenant's arrival times within the window, Poisson then bursts (unsorted)."""
        out: list[int] = []
        if t.arrivals_per_hour > 0:
            rng = stream(self.seed, f"arrivals/{t.namespace}")
            at = self.start_ms
            while True:
                at += int(rng.expovariate(t.arrivals_per_hour / HOUR))
                if at >= self.end_ms:
                    break
                out.append(at)
        for b in t.bursts:
            for k in range(b.jobs):
                at = self.start_ms + b.at_ms + (b.over_ms * k) // max(1, b.jobs)
                if at < self.end_ms:
                    out.append(at)
        return out

    # ---- the loop -----------------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        # Every record, event and world object the loop makes stays alive until the end and none
        # forms a reference cycle (reference counting frees the rest), so a cyclic collection
        # during the run only walks live objects again: 5-7 % of the loop's time at 1,000 nodes.
        # Collection resumes afterwards, with the run's objects in the oldest generation.
        with collector_paused():
            self.start()
            self.run_until(self.end_ms)
            if self.progress is not None:
                self.progress(1.0, len(self.records))
            return self.result()

    def start(self) -> None:
        """What ``run`` does before the first instant: the jobs generated, the cluster set up.
        ``run_until`` then goes on in as many steps as a caller likes (each instant is processed
        whole, so the day is the same however it is cut) and ``result`` sums it up."""
        jobs = self.generate_jobs()
        # an explicit job past the window never arrives: it is not counted
        self.job_count = sum(1 for j in jobs if j.arrival_ms < self.end_ms)
        self.setup(jobs)
        self._last_progress = 0

    def result(self) -> SimulationResult:
        return SimulationResult(self.records, self.events, self.world, self.job_count, self.finished, self.failed,
                                self.end_ms, self.start_ms, self.preempted)

    def after_pass(self) -> None:
        if self.progress is not None and len(self.records) - self._last_progress >= 500:
            self._last_progress = len(self.records)
            self.progress((self.now - self.start_ms) / max(1, self.end_ms - self.start_ms), len(self.records))

    def on_action(self, kind: str, data: Any) -> None:
        getattr(self, f"_on_{kind}")(data)

    def before_bind(self, key: str, attempt: int, decision: Decision) -> None:
        chance = self.sc.disruptions.bind_interference
        if chance > 0 and self.interference_rng.random() < chance:
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
            shared = self._specs.get((job.template, job.size))
            if shared is None:
                shared = self._specs[(job.template, job.size)] = _with_count(inner["spec"], job.size)
            spec = shared
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": claim_name, "namespace": job.namespace, "uid": self._uid_next(),
                             "labels": labels,
                             "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"}},
                "spec": spec}

    def _on_policy(self, doc: dict[str, Any]) -> None:
        parse_policy(doc)
        self.emit("Policy", "", doc["metadata"]["name"], doc)
        self.wake(everything=True)

    def _on_flap(self, data: tuple[str, str]) -> None:
        node, dev = data
        if node in self.lost:
            return
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
            sl = slice_object(node, pool, self.uid_rng, gen, _driver_version(old), slice_uuids(old))
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
        # the devices keep their uuids: nothing is drawn
        sl = slice_object(node, pool, self.uid_rng, gen, version, slice_uuids(old))
        self.emit("ResourceSlice", "", sl_name, sl)
        self.wake()

    def _interfere(self, d: Decision) -> None:
        """Something changes between filter and bind, as races do in a real cluster."""
        p = d.proposal
        assert p is not None
        if p.dp_gpus:
            return
        kind = self.interference_rng.choice(("unhealthy", "stale_slice", "binding_conflict", "node_lost"))
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
