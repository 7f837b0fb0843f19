"""Leader election with a coordination.k8s.io/v1 Lease, so two watcher replicas never both ingest.

The algorithm follows client-go's leaderelection: read the Lease; create it if missing; take it
over only when its holder has not renewed for ``lease_duration`` *as measured by our own clock
since we last saw the record change* (never by comparing the holder's timestamps with ours, so
clock skew between nodes cannot cause two leaders); write with the Lease's resourceVersion so a
concurrent writer gets 409 Conflict and loses. The leader renews every ``retry_period`` and
steps down when it could not renew within ``renew_deadline``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from audit.dra.validate.names import DNS_SUBDOMAIN

log = logging.getLogger(__name__)

MIN_REQUEST_TIMEOUT = 0.05  # seconds; a request needs some time even past its deadline
# what a request to an API server that is down, restarting or cut off raises
_UNREACHABLE = (urllib3.exceptions.HTTPError, OSError)

LEASE_PREFIX = "claimtrail-watcher-"
MAX_NAME = 253  # a Lease's name is a DNS subdomain (RFC 1123), as most object names


def default_lease_name(cluster: str) -> str:
    """``claimtrail-watcher-<cluster>`` as a Lease can be named. A cluster name defaults to the
    kubeconfig context, which is often no DNS subdomain (EKS names contexts by their ARN,
    ``arn:aws:eks:…:cluster/prod``; GKE ``gke_project_zone_name``): such a name is lowercased,
    each run of other characters made one ``-``, and the first 12 hex digits of its sha256
    appended, so two clusters whose names differ only there never share a Lease."""
    name = LEASE_PREFIX + cluster
    if len(name) <= MAX_NAME and DNS_SUBDOMAIN.fullmatch(name):
        return name
    slug = re.sub(r"[^a-z0-9]+", "-", cluster.lower()).strip("-")
    tag = hashlib.sha256(cluster.encode()).hexdigest()[:12]
    room = MAX_NAME - len(LEASE_PREFIX) - len(tag) - 1
    return f"{LEASE_PREFIX}{slug[:room].rstrip('-')}-{tag}" if slug else f"{LEASE_PREFIX}{tag}"


def lease_name_problem(name: str) -> str:
    """Why ``name`` cannot name a Lease ('' when it can)."""
    if len(name) > MAX_NAME or not DNS_SUBDOMAIN.fullmatch(name):
        return (f"{name[:80]!r}: a Lease's name must be a lowercase RFC 1123 subdomain of at most {MAX_NAME} "
                "characters (letters, digits, '-' and '.')")
    return ""


def _without_retries(api_client: client.ApiClient) -> client.ApiClient:
    """A client of the same cluster and credentials whose requests are not retried behind our
    back: each retry would get the whole timeout again, past the renew deadline. The elector
    retries on its own, every ``retry_period``."""
    cfg = copy.deepcopy(api_client.configuration)
    cfg.retries = False
    return client.ApiClient(cfg)


def _micro_time(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


@dataclass
class _Observed:
    record: tuple[Any, ...]
    at: float  # our monotonic clock when the record last changed


class LeaseElector:
    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("lease: need lease_duration > renew_deadline > retry_period > 0")
        self.api = client.CoordinationV1Api(_without_retries(api_client))
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.monotonic, self.wall = monotonic, wall
        self._observed: _Observed | None = None
        self._attempt_deadline = 0.0
        self.is_leader = False

    # -- one step -------------------------------------------------------------------------------
    def try_acquire_or_renew(self, deadline: float | None = None) -> bool:
        """One attempt; every request of it ends by ``deadline`` (our monotonic clock), by
        ``renew_deadline`` from now without one."""
        self._attempt_deadline = deadline if deadline is not None else self.monotonic() + self.renew_deadline
        try:
            return self._try_acquire_or_renew()
        except _UNREACHABLE as exc:
            # the API server restarting, a network partition: a failed attempt like any other
            # (a leader steps down once its renew deadline passes), never a crash
            return self._lost(f"API server unreachable: {type(exc).__name__}: {exc}")

    def _try_acquire_or_renew(self) -> bool:
        now_wall = _micro_time(self.wall())
        try:
            current = self._read()
        except ApiException as exc:
            if exc.status != 404:
                return self._lost(f"read failed: HTTP {exc.status}")
            body = self._body(None, now_wall, acquire=True, transitions=0)
            try:
                self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self._timeout())
            except ApiException as exc2:
                return self._lost(f"create failed: HTTP {exc2.status}")
            return self._won()
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), spec.get("leaseTransitions"))
        if self._observed is None or self._observed.record != record:
            self._observed = _Observed(record, self.monotonic())
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if self.monotonic() < self._observed.at + duration:
                return self._lost(f"held by {holder}")
        taking_over = holder != self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (1 if taking_over and holder else 0)
        body = self._body(current, now_wall, acquire=taking_over, transitions=transitions)
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=self._timeout())
        except ApiException as exc:
            # 409: someone else wrote first; they won this round
            return self._lost(f"update failed: HTTP {exc.status}")
        return self._won()

    def release(self) -> None:
        """Give the Lease up at shutdown so the next replica does not wait for it to expire."""
        if not self.is_leader:
            return
        self._attempt_deadline = self.monotonic() + self.renew_deadline
        try:
            current = self._read()
            if (current.get("spec") or {}).get("holderIdentity") == self.identity:
                body = self._body(current, _micro_time(self.wall()), acquire=False, transitions=None)
                assert body.spec is not None
                body.spec.holder_identity = None
                body.spec.lease_duration_seconds = 1
                self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=self._timeout())
        except ApiException as exc:
            log.warning("could not release the lease", extra={"status": exc.status})
        except _UNREACHABLE as exc:
            log.warning("could not release the lease", extra={"error": f"{type(exc).__name__}: {exc}"})
        self.is_leader = False

    def _read(self) -> dict[str, Any]:
        # raw JSON: the Lease exactly as served, resourceVersion included
        resp: Any = self.api.read_namespaced_lease(
            self.name, self.namespace, _preload_content=False, _request_timeout=self._timeout()
        )
        data: dict[str, Any] = json.loads(resp.data)
        return data

    def _timeout(self) -> float:
        """What is left of this attempt: a request to an API server that accepted it and never
        answers must not keep a leader leading past its renew deadline (another replica takes
        the Lease over once it expires)."""
        return max(MIN_REQUEST_TIMEOUT, self._attempt_deadline - self.monotonic())

    def _body(self, current: dict[str, Any] | None, now: datetime, *, acquire: bool, transitions: int | None) -> client.V1Lease:
        spec = dict((current or {}).get("spec") or {})
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if current is not None:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return client.V1Lease(
            metadata=client.V1ObjectMeta(
                name=meta["name"], namespace=meta["namespace"], resource_version=meta.get("resourceVersion")
            ),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self.lease_duration),
                acquire_time=now if acquire else spec.get("acquireTime"),
                renew_time=now,
                lease_transitions=transitions if transitions is not None else spec.get("leaseTransitions"),
            ),
        )

    def _won(self) -> bool:
        if not self.is_leader:
            log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        self.is_leader = True
        return True

    def _lost(self, why: str) -> bool:
        log.debug("not leader", extra={"lease": f"{self.namespace}/{self.name}", "why": why})
        return False

    # -- the loop -------------------------------------------------------------------------------
    def run(self, stop: threading.Event, lead: Callable[[threading.Event], None]) -> bool:
        """Wait to become leader, then run ``lead(stop_leading)`` while renewing. Returns True if
        leadership was lost or the work died (the caller should exit non-zero so the process
        restarts clean)."""
        while not stop.is_set() and not self.try_acquire_or_renew():
            stop.wait(self.retry_period)
        if stop.is_set():
            return False
        stop_leading = threading.Event()
        worker = threading.Thread(target=lead, args=(stop_leading,), name="leader-work", daemon=True)
        worker.start()
        last_renew = self.monotonic()
        lost = False
        while not stop.is_set():
            stop.wait(self.retry_period)
            if not worker.is_alive():
                # the work ended on its own (a crash): hand the Lease on and report failure
                log.error("leader work stopped unexpectedly", extra={"lease": self.name})
                lost = True
                self.release()
                break
            if self.try_acquire_or_renew(deadline=last_renew + self.renew_deadline):
                last_renew = self.monotonic()
            elif self.monotonic() - last_renew > self.renew_deadline:
                log.error("leadership lost: could not renew the lease in time", extra={"lease": self.name})
                lost = True
                break
        stop_leading.set()
        worker.join(timeout=10)
        if not lost:
            self.release()
        self.is_leader = False
        return lost
