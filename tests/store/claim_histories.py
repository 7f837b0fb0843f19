"""Seeded random event logs of one cluster in which claims are allocated, shared, left and given up.

A few claim names are created, allocated, reserved for pods that come and go, deallocated,
reallocated in place (the log missing the deallocation between, so the new allocation reserves
none of the pods the old one did), deleted and created again under a new uid; pods are created
and deleted, Policy objects put in force and deleted, nodes added and removed. Every object has
a uid of its own, as the API server gives them. ``decisions_for`` gives one decision record per
pod uid the log names, for the stored decisions a resumed world is read with.
"""

from __future__ import annotations

import copy
import random
from datetime import timedelta
from typing import Any

from audit.events import WorldEvent
from audit.records import DecisionRecord
from tests.builders import decision
from tests.store.factory import BASE_TIME, iso

NAMESPACE = "team-a"
CLAIM_NAMES = ("gpu-a", "gpu-b", "gpu-c", "gpu-d")
POLICY_NAMES = ("lab", "prod")


class History:
    """The log being written: objects as they stand and the events so far."""

    def __init__(self, cluster: str, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        self.events: list[WorldEvent] = []
        self.claims: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, str] = {}  # name -> uid
        self.policies: set[str] = set()
        self.nodes: set[str] = set()
        self._uids = 0

    def uid(self, prefix: str) -> str:
        self._uids += 1
        return f"{prefix}-{self.cluster}-{self._uids}"

    def log(self, kind: str, name: str, payload: dict[str, Any] | None, namespace: str = "") -> None:
        seq = len(self.events)
        self.events.append(WorldEvent(
            cluster=self.cluster, seq=seq, time=iso(BASE_TIME + timedelta(seconds=seq)),
            type="delete" if payload is None else "upsert", object_kind=kind, namespace=namespace, name=name,
            payload={} if payload is None else copy.deepcopy(payload), resource_version=str(seq + 1)))

    # ---- one change each ---------------------------------------------------------------------------

    def add_pod(self) -> None:
        name = f"job-{len(self.events)}"
        self.pods[name] = self.uid("pod")
        self.log("Pod", name, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": NAMESPACE, "uid": self.pods[name],
            "creationTimestamp": iso(BASE_TIME)}, "spec": {}}, NAMESPACE)

    def delete_pod(self) -> None:
        if self.pods:
            name = self.rng.choice(sorted(self.pods))
            del self.pods[name]
            self.log("Pod", name, None, NAMESPACE)

    def create_claim(self) -> None:
        free = [n for n in CLAIM_NAMES if n not in self.claims]
        if free:
            name = self.rng.choice(free)
            self.claims[name] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                 "metadata": {"name": name, "namespace": NAMESPACE, "uid": self.uid("claim")},
                                 "spec": {"devices": {"requests": [{"name": "gpu"}]}}, "status": {}}
            self._log_claim(name)

    def allocate(self) -> None:
        """Allocate a claim that holds no allocation, or reallocate one in place to other pods."""
        if self.claims:
            name = self.rng.choice(sorted(self.claims))
            claim = self.claims[name]
            device = f"gpu-{self.rng.randrange(3)}"
            claim["status"] = {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": device}]}}}
            if self.pods and self.rng.random() < 0.7:
                self._reserve(claim, self.rng.choice(sorted(self.pods)))
            self._log_claim(name)

    def reserve(self) -> None:
        held = [n for n, c in sorted(self.claims.items()) if c["status"].get("allocation")]
        if held and self.pods:
            name = self.rng.choice(held)
            self._reserve(self.claims[name], self.rng.choice(sorted(self.pods)))
            self._log_claim(name)

    def unreserve(self) -> None:
        reserved = [n for n, c in sorted(self.claims.items()) if c["status"].get("reservedFor")]
        if reserved:
            name = self.rng.choice(reserved)
            refs = self.claims[name]["status"]["reservedFor"]
            refs.pop(self.rng.randrange(len(refs)))
            self._log_claim(name)

    def deallocate(self) -> None:
        held = [n for n, c in sorted(self.claims.items()) if c["status"].get("allocation")]
        if held:
            name = self.rng.choice(held)
            self.claims[name]["status"] = {}
            self._log_claim(name)

    def delete_claim(self) -> None:
        if self.claims:
            name = self.rng.choice(sorted(self.claims))
            del self.claims[name]
            self.log("ResourceClaim", name, None, NAMESPACE)

    def put_policy(self) -> None:
        name = self.rng.choice(POLICY_NAMES)
        self.policies.add(name)
        self.log("Policy", name, {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": name},
                                  "spec": {"version": f"v{len(self.events)}"}})

    def delete_policy(self) -> None:
        if self.policies:
            name = self.rng.choice(sorted(self.policies))
            self.policies.discard(name)
            self.log("Policy", name, None)

    def add_node(self) -> None:
        name = f"node-{self.rng.randrange(4)}"
        self.nodes.add(name)
        self.log("Node", name, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})

    def delete_node(self) -> None:
        if self.nodes:
            name = self.rng.choice(sorted(self.nodes))
            self.nodes.discard(name)
            self.log("Node", name, None)

    def _reserve(self, claim: dict[str, Any], pod: str) -> None:
        refs = claim["status"].setdefault("reservedFor", [])
        if all(r["name"] != pod for r in refs):
            refs.append({"resource": "pods", "name": pod, "uid": self.pods[pod]})

    def _log_claim(self, name: str) -> None:
        self.log("ResourceClaim", name, self.claims[name], NAMESPACE)


# claims change most: the reservations are what a checkpoint does not hold
CHANGES = (("add_pod", 4), ("delete_pod", 2), ("create_claim", 3), ("allocate", 3), ("reserve", 5), ("unreserve", 3),
           ("deallocate", 1), ("delete_claim", 1), ("put_policy", 1), ("delete_policy", 1), ("add_node", 1),
           ("delete_node", 1))


def random_history(cluster: str, seed: int, length: int) -> list[WorldEvent]:
    """``length`` events of ``cluster``, drawn from ``seed``."""
    history = History(cluster, random.Random(seed))
    names, weights = zip(*CHANGES, strict=True)
    while len(history.events) < length:
        getattr(history, history.rng.choices(names, weights)[0])()
    return history.events


def decisions_for(events: list[WorldEvent]) -> list[DecisionRecord]:
    """One decision record per pod uid the events name (as a pod or in a claim's reservedFor)."""
    uids: dict[str, str] = {}
    for ev in events:
        if ev.object_kind == "Pod" and ev.payload:
            uids[ev.payload["metadata"]["uid"]] = ev.name
        for ref in (ev.payload.get("status") or {}).get("reservedFor") or []:
            uids[ref["uid"]] = ref["name"]
    cluster = events[0].cluster if events else "c1"
    return [decision(cluster, f"claim-of-{uid}", tenant="team-a", namespace=NAMESPACE, pod=name, pod_uid=uid, seq=i)
            for i, (uid, name) in enumerate(sorted(uids.items()))]
