"""A small Kubernetes API server on 127.0.0.1 for watcher tests, speaking the real wire format.

It serves the real paths (``/apis/resource.k8s.io/v1/resourceslices``,
``/api/v1/namespaces/<ns>/pods`` …), paginated lists (``limit``/``continue``), chunked watch
streams of JSON lines with ``BOOKMARK`` events, ``410 Gone`` both as an HTTP status ("too old
resource version") and as an ``ERROR`` event mid-stream, dropped connections, and
coordination.k8s.io Leases with optimistic concurrency. ResourceVersions come from one global
counter, like etcd revisions. Faults are scripted per watch connection of a kind, so a test
says exactly what the network and the server do.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class WatchScript:
    """What one watch connection does; the default is a clean stream."""

    drop_after: int | None = None  # close the socket mid-stream after this many events
    gone_after: int | None = None  # send an ERROR 410 event after this many events
    expired: bool = False  # answer the watch request itself with HTTP 410
    replay_from_start: bool = False  # resend history the client already has (duplicates)
    bookmark_every: int = 0


@dataclass
class Collection:
    kind: str
    api_version: str
    plural: str
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    namespaced: bool
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    released: int = 0  # the newest revision a list may show
    scripts: list[WatchScript] = field(default_factory=list)
    watches: int = 0
    lists: int = 0
    relist_jumps_to_end: bool = False  # a relist shows the final state (the gap hides changes)
    expire_continue: int = 0  # answer this many continue tokens with 410 Expired
    unserved: int = 0  # answer this many list/watch requests with 404 (an API server without the kind)

    def state_at(self, revision: int, namespace: str | None) -> list[dict[str, Any]]:
        alive: dict[tuple[str, str], dict[str, Any]] = {}
        for rv, etype, obj in self.history:
            if rv > revision:
                break
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if etype == "DELETED":
                alive.pop(key, None)
            else:
                alive[key] = obj
        return [o for k, o in sorted(alive.items()) if namespace is None or k[0] == namespace]


COLLECTIONS = (
    ("DeviceClass", "resource.k8s.io/v1", "deviceclasses", "/apis/resource.k8s.io/v1", False),
    ("ResourceSlice", "resource.k8s.io/v1", "resourceslices", "/apis/resource.k8s.io/v1", False),
    ("DeviceTaintRule", "resource.k8s.io/v1", "devicetaintrules", "/apis/resource.k8s.io/v1", False),
    ("ResourceClaim", "resource.k8s.io/v1", "resourceclaims", "/apis/resource.k8s.io/v1", True),
    ("Node", "v1", "nodes", "/api/v1", False),
    ("Pod", "v1", "pods", "/api/v1", True),
    ("Event", "v1", "events", "/api/v1", True),
)


class FakeApiServer:
    def __init__(self) -> None:
        self.collections = {k: Collection(k, av, pl, pre, ns) for k, av, pl, pre, ns in COLLECTIONS}
        self.revision = 0
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.idle_hold = 0.05  # how long an idle watch waits for news before ending
        self.cond = threading.Condition()
        self.requests: list[str] = []
        # called before a Lease update is checked: lets a test interleave a competing writer
        self.before_lease_update: Any = None
        self.before_lease_read: Any = None  # the same for a Lease read (e.g. to hang it)
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- content --------------------------------------------------------------------------------
    def add(self, obj: dict[str, Any], etype: str = "") -> int:
        """Append one change; ADDED/MODIFIED is inferred from whether the object exists."""
        with self.cond:
            col = self.collections[obj["kind"]]
            self.revision += 1
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.revision)
            meta.setdefault("uid", f"uid-{obj['kind'].lower()}-{meta.get('namespace', '')}-{meta['name']}")
            if not etype:
                exists = any(
                    o["metadata"]["name"] == meta["name"] and o["metadata"].get("namespace") == meta.get("namespace")
                    for o in col.state_at(self.revision, None)
                )
                etype = "MODIFIED" if exists else "ADDED"
            col.history.append((self.revision, etype, obj))
            self.cond.notify_all()
            return self.revision

    def delete(self, kind: str, name: str, namespace: str = "") -> int:
        col = self.collections[kind]
        current = next(
            o for o in col.state_at(self.revision, None)
            if o["metadata"]["name"] == name and o["metadata"].get("namespace", "") == namespace
        )
        return self.add(current, "DELETED")

    def release_all(self) -> None:
        """Make everything added so far the state the first list returns."""
        with self.cond:
            for col in self.collections.values():
                col.released = self.revision

    # -- request handling -------------------------------------------------------------------------
    def route(self, path: str) -> tuple[Collection, str | None] | None:
        for col in self.collections.values():
            if path == f"{col.prefix}/{col.plural}":
                return col, None
            m = re.fullmatch(rf"{re.escape(col.prefix)}/namespaces/([^/]+)/{col.plural}", path)
            if m and col.namespaced:
                return col, m.group(1)
        return None

    def list_page(self, col: Collection, namespace: str | None, q: dict[str, str]) -> dict[str, Any]:
        with self.cond:
            if "continue" in q and col.expire_continue > 0:
                col.expire_continue -= 1
                raise _Expired("The provided continue parameter is too old to display a consistent list result.")
            if "continue" in q:
                token = json.loads(base64.b64decode(q["continue"]))
                revision, offset = token["rv"], token["offset"]
            else:
                col.lists += 1
                if col.relist_jumps_to_end and col.lists > 1:
                    col.released = self.revision
                revision, offset = col.released, 0
            items = col.state_at(revision, namespace)
        limit = int(q.get("limit", "0") or 0) or len(items) or 1
        page = [_strip_type(o) for o in items[offset : offset + limit]]
        meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if offset + limit < len(items):
            meta["continue"] = base64.b64encode(json.dumps({"rv": revision, "offset": offset + limit}).encode()).decode()
        return {"kind": f"{col.kind}List", "apiVersion": col.api_version, "metadata": meta, "items": page}

    def watch_events(self, col: Collection, namespace: str | None, since: int, script: WatchScript):  # noqa: ANN201
        """Yield watch lines; a yielded ``None`` means: drop the connection now."""
        sent = 0
        start = 0 if script.replay_from_start else since
        idle_waited = False
        while True:
            with self.cond:
                pending = [
                    (rv, t, o) for rv, t, o in col.history
                    if rv > start and (namespace is None or o["metadata"].get("namespace") == namespace)
                ]
                if not pending and not idle_waited:
                    self.cond.wait(self.idle_hold)
                    idle_waited = True
                    continue
            if not pending:
                # the server's watch timeout: a final bookmark at the current revision, then end
                with self.cond:
                    col.released = max(col.released, self.revision)
                    rv_now = self.revision
                yield _line({"type": "BOOKMARK", "object": {"kind": col.kind, "apiVersion": col.api_version,
                                                              "metadata": {"resourceVersion": str(rv_now)}}})
                return
            for rv, etype, obj in pending:
                if script.drop_after is not None and sent == script.drop_after:
                    yield None
                    return
                if script.gone_after is not None and sent == script.gone_after:
                    yield _line({"type": "ERROR", "object": _status(410, "Expired", f"too old resource version: {rv} ({self.revision})")})
                    return
                yield _line({"type": etype, "object": obj})
                sent += 1
                start = rv
                with self.cond:
                    col.released = max(col.released, rv)
                if script.bookmark_every and sent % script.bookmark_every == 0:
                    yield _line({"type": "BOOKMARK", "object": {"kind": col.kind, "apiVersion": col.api_version,
                                                                  "metadata": {"resourceVersion": str(rv)}}})
            idle_waited = False


class _Expired(Exception):
    pass


class _QuietServer(ThreadingHTTPServer):
    """Clients hanging up (a stopped watcher, pooled connections closed) are normal here."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _strip_type(obj: dict[str, Any]) -> dict[str, Any]:
    # list items on the wire carry no kind/apiVersion
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _handler_for(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send_json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            n = int(self.headers.get("Content-Length", "0"))
            return json.loads(self.rfile.read(n) or b"{}")

        def do_GET(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            server.requests.append(f"GET {self.path}")
            lease = re.fullmatch(r"/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases/([^/]+)", url.path)
            if lease:
                hook, server.before_lease_read = server.before_lease_read, None
                if hook is not None:
                    hook()
                obj = server.leases.get((lease.group(1), lease.group(2)))
                if obj is None:
                    self._send_json(404, _status(404, "NotFound", f'leases.coordination.k8s.io "{lease.group(2)}" not found'))
                else:
                    self._send_json(200, obj)
                return
            routed = server.route(url.path)
            if routed is None:
                self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            col, namespace = routed
            with server.cond:
                unserved, col.unserved = col.unserved > 0, max(0, col.unserved - 1)
            if unserved:
                self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            if q.get("watch") in ("true", "1"):
                try:
                    self._watch(col, namespace, q)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client went away (it stopped watching)
            else:
                try:
                    self._send_json(200, server.list_page(col, namespace, q))
                except _Expired as exc:
                    self._send_json(410, _status(410, "Expired", str(exc)))

        def _watch(self, col: Collection, namespace: str | None, q: dict[str, str]) -> None:
            with server.cond:
                script = col.scripts[col.watches] if col.watches < len(col.scripts) else WatchScript()
                col.watches += 1
            since = int(q.get("resourceVersion", "0") or 0)
            if script.expired:
                self._send_json(410, _status(410, "Expired", f"too old resource version: {since} ({server.revision})"))
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in server.watch_events(col, namespace, since, script):
                if line is None:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def do_POST(self) -> None:  # noqa: N802
            m = re.fullmatch(r"/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases", urlparse(self.path).path)
            body = self._body()
            if not m:
                self._send_json(404, _status(404, "NotFound", "not found"))
                return
            key = (m.group(1), body["metadata"]["name"])
            with server.cond:
                if key in server.leases:
                    self._send_json(409, _status(409, "AlreadyExists", f'leases.coordination.k8s.io "{key[1]}" already exists'))
                    return
                server.revision += 1
                body["metadata"].update({"namespace": key[0], "resourceVersion": str(server.revision)})
                body.setdefault("kind", "Lease")
                body.setdefault("apiVersion", "coordination.k8s.io/v1")
                server.leases[key] = body
            self._send_json(201, body)

        def do_PUT(self) -> None:  # noqa: N802
            m = re.fullmatch(r"/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases/([^/]+)", urlparse(self.path).path)
            body = self._body()
            if not m:
                self._send_json(404, _status(404, "NotFound", "not found"))
                return
            key = (m.group(1), m.group(2))
            hook, server.before_lease_update = server.before_lease_update, None
            if hook is not None:
                hook()
            with server.cond:
                current = server.leases.get(key)
                if current is None:
                    self._send_json(404, _status(404, "NotFound", "not found"))
                    return
                if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                    self._send_json(409, _status(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again"))
                    return
                server.revision += 1
                body["metadata"].update({"namespace": key[0], "resourceVersion": str(server.revision)})
                body.setdefault("kind", "Lease")
                body.setdefault("apiVersion", "coordination.k8s.io/v1")
                server.leases[key] = body
            self._send_json(200, body)

    return Handler
