"""Keep one watched resource in sync: list, then watch from the list's resourceVersion.

The reflector survives what API servers do to long watches: a stream that ends (server
timeout), a connection that drops mid-stream (resume from the last resourceVersion seen), a
``410 Gone`` either as an HTTP status or as an ``ERROR`` event inside the stream ("too old
resource version": relist), and bookmarks (advance the resourceVersion without an object).
It only reports what it saw — a full ``Snapshot`` after each (re)list and each ``Change`` from
the watch — and leaves gap-free, duplicate-free logging to ``eventlog``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from ingest.kube.resources import WatchedResource

log = logging.getLogger(__name__)


@dataclass
class Snapshot:
    """Everything a (re)list returned for one resource in one scope (namespace or all)."""

    kind: str
    scope: str  # namespace, or "" for cluster-scoped kinds and all-namespace lists
    objects: list[dict[str, Any]]
    resource_version: str


@dataclass
class Change:
    kind: str
    type: str  # ADDED | MODIFIED | DELETED, as the watch stream says
    object: dict[str, Any]


class ResourceExpired(Exception):
    """The resourceVersion we hold is gone from the server's history (HTTP 410): relist."""


class WatchStreamError(Exception):
    """An ERROR event other than 410 inside a watch stream."""


@dataclass
class Backoff:
    """Exponential reconnect delay with jitter, reset after a healthy watch."""

    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.base * (2**self.attempts))
        self.attempts += 1
        # full jitter keeps a fleet of watchers from reconnecting in lockstep after an outage
        return delay / 2 + self.rng.random() * delay / 2

    def reset(self) -> None:
        self.attempts = 0


CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 120.0
WATCH_READ_GRACE = 30.0

# backoff attempts a kind the API server does not serve starts from: asking again is only worth
# it every few seconds (the cap)
UNSERVED_ATTEMPTS = 6

# Errors that mean "the connection or the server had a problem": reconnect with backoff.
_TRANSIENT = (urllib3.exceptions.HTTPError, OSError, WatchStreamError, json.JSONDecodeError)


class Reflector:
    def __init__(
        self,
        api_client: client.ApiClient,
        resource: WatchedResource,
        emit: Callable[[Snapshot | Change], None],
        *,
        namespace: str | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self.resource = resource
        self.scope = namespace if (namespace and resource.namespaced) else ""
        self._list = resource.list_function(api_client, namespace)
        self._emit = emit
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.backoff = backoff or Backoff()
        self.resource_version: str | None = None
        self.relists = 0
        self.reconnects = 0
        self.served = True
        self._response: Any = None

    # -- the loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self.resource_version is None:
                    self.resource_version = self._relist()
                self._watch(stop)
                self.backoff.reset()
            except ResourceExpired:
                log.info("resourceVersion expired, relisting", extra={"kind": self.resource.kind})
                self.resource_version = None
            except ApiException as exc:
                if exc.status == 410:
                    self.resource_version = None
                    continue
                if exc.status == 404:
                    # the cluster does not serve this kind (e.g. DeviceTaintRule in an older
                    # version), or not yet on every API server (a rolling control-plane
                    # upgrade): say so once, let the watcher go on without it, and keep asking
                    # at the slowest reconnect pace so it is watched once it is served
                    if self.served:
                        log.warning("resource not served by the API server", extra={"kind": self.resource.kind})
                    self.served = False
                    self.backoff.attempts = max(self.backoff.attempts, UNSERVED_ATTEMPTS)
                    self._pause(stop, "HTTP 404")
                    continue
                if exc.status in (401, 403):
                    # RBAC or credentials: keep retrying (they may be fixed) but say so loudly
                    log.warning("not allowed to list/watch", extra={"kind": self.resource.kind, "status": exc.status})
                self._pause(stop, f"HTTP {exc.status}")
            except _TRANSIENT as exc:
                self._pause(stop, type(exc).__name__)

    def stop(self) -> None:
        """Unblock a watch that is waiting for bytes (called from another thread)."""
        resp = self._response
        if resp is not None:
            # best effort on a socket we are abandoning anyway
            with contextlib.suppress(Exception):
                resp.shutdown()

    def _pause(self, stop: threading.Event, why: str) -> None:
        self.reconnects += 1
        delay = self.backoff.next_delay()
        log.info("watch interrupted, reconnecting", extra={"kind": self.resource.kind, "why": why, "delay_s": delay})
        stop.wait(delay)

    # -- list ---------------------------------------------------------------------------------
    def _relist(self) -> str:
        objects: list[dict[str, Any]] = []
        token: str | None = None
        version = ""
        while True:
            kwargs: dict[str, Any] = {
                "limit": self.page_size, "_preload_content": False, "_request_timeout": (CONNECT_TIMEOUT, LIST_TIMEOUT),
            }
            if token:
                kwargs["_continue"] = token
            try:
                page = json.loads(self._list(**kwargs).data)
            except ApiException as exc:
                if exc.status == 410 and token:
                    # the continue token expired between pages: start the list again
                    objects, token, version = [], None, ""
                    continue
                raise
            meta = page.get("metadata") or {}
            version = version or meta.get("resourceVersion", "")
            item_kind = str(page.get("kind", "")).removesuffix("List") or self.resource.kind
            for item in page.get("items") or []:
                # list items omit kind/apiVersion on the wire; restore them so payloads look
                # the same whether they came from a list or a watch
                item.setdefault("kind", item_kind)
                item.setdefault("apiVersion", page.get("apiVersion", ""))
                objects.append(item)
            token = meta.get("continue") or None
            if not token:
                break
        self.relists += 1
        if not self.served:
            log.info("resource served by the API server again", extra={"kind": self.resource.kind})
            self.served = True
        self._emit(Snapshot(self.resource.kind, self.scope, objects, version))
        return version

    # -- watch --------------------------------------------------------------------------------
    def _watch(self, stop: threading.Event) -> None:
        resp = self._list(
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_timeout_seconds,
            _preload_content=False,
            # the server ends the watch after timeout_seconds; a read that waits much longer
            # means a silent network partition: give up and reconnect
            _request_timeout=(CONNECT_TIMEOUT, self.watch_timeout_seconds + WATCH_READ_GRACE),
        )
        self._response = resp
        try:
            for line in iter_resp_lines(resp):
                if stop.is_set():
                    return
                if line.strip():
                    self._handle(json.loads(line))
        finally:
            self._response = None
            resp.release_conn()

    def _handle(self, event: dict[str, Any]) -> None:
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(obj.get("message", ""))
            raise WatchStreamError(f"{obj.get('code')}: {obj.get('message', '')}")
        version = (obj.get("metadata") or {}).get("resourceVersion", "")
        if etype == "BOOKMARK":
            if version:
                self.resource_version = version
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise WatchStreamError(f"unknown watch event type {etype!r}")
        self._emit(Change(self.resource.kind, etype, obj))
        if version:
            self.resource_version = version
