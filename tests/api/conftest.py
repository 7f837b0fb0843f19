"""A real ``claimtrail serve`` process on loopback with an embedded store in a temp directory.

One server per test module (starting chDB takes seconds). It is seeded through its own ingest
endpoint with the hand-built records of ``factory`` and with the world events of the explain
fixture dump, so decision-level "why" questions can be answered device by device.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from audit.api.auth import hash_token
from audit.events import WorldEvent
from audit.records import to_jsonl
from tests.api import factory

REPO = Path(__file__).resolve().parents[2]
DUMP = REPO / "tests" / "fixtures" / "explain" / "cluster-pending.yaml"
THRESHOLDS = REPO / "deploy" / "migration" / "thresholds.yaml"  # the canary's: candidate is DRA template v2
TOKENS = {"admin": "admin-secret", "team-a": "team-a-secret", "team-b": "team-b-secret"}


@dataclass(frozen=True)
class Server:
    base: str
    log: Path

    def get(self, path: str, who: str | None = "admin", **params: str | int) -> httpx.Response:
        return httpx.get(self.base + path, params=params, headers=auth(who), timeout=60)

    def post(self, path: str, who: str | None = "admin", **kwargs: Any) -> httpx.Response:
        return httpx.post(self.base + path, headers={**auth(who), **kwargs.pop("headers", {})}, timeout=60, **kwargs)


def auth(who: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


WORLD_POLICY = {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "lab"},
                "spec": {"version": "v7", "health": {"unhealthyTaintKeys": ["example.com/maintenance"]}}}


def world_events() -> list[WorldEvent]:
    """A policy that counts maintenance taints as unhealthy at seq 0, the fixture dump as upserts in
    file order from seq 1, then the deletion of node h100-03's slice (all before every decision)."""
    items = yaml.safe_load(DUMP.read_text())["items"]
    changes = [("upsert", WORLD_POLICY), *(("upsert", o) for o in items),
               ("delete", next(o for o in items if o["metadata"]["name"].startswith("h100-03-")))]
    out = []
    for seq, (kind, obj) in enumerate(changes):
        meta = obj.get("metadata", {})
        out.append(WorldEvent(cluster=factory.CLUSTER, seq=seq, time="2026-05-01T07:00:00.000000Z", type=kind,
                              object_kind=obj["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                              payload=obj if kind == "upsert" else {}))
    return out


def start_server(root: Path, *extra: str) -> tuple[Server, subprocess.Popen[bytes]]:
    tokens = root / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({"tokens": [
        {"token_sha256": hash_token(TOKENS["admin"]), "admin": True},
        {"token_sha256": hash_token(TOKENS["team-a"]), "tenant": "team-a"},
        {"token_sha256": hash_token(TOKENS["team-b"]), "tenant": "team-b"},
    ], "redaction": {"hash_pod_names": True}}))
    port = free_port()
    log = root / "serve.log"
    cmd = [sys.executable, "-m", "audit.cli.main", "serve", "--create", "--dsn", f"chdb://{root}/db", "--host", "127.0.0.1",
           "--port", str(port), "--tokens", str(tokens), *extra]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    return wait_ready(Server(f"http://127.0.0.1:{port}", log), proc)


def wait_ready(server: Server, proc: subprocess.Popen[bytes]) -> tuple[Server, subprocess.Popen[bytes]]:
    """The started server once /readyz answers; its log in the error when it exits or never does."""
    log = server.log
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(server.base + "/readyz", timeout=2).status_code == 200:
                return server, proc
        except httpx.HTTPError:
            pass
        time.sleep(0.05)  # a refused connection costs nothing: poll often, start sooner
    stop(proc)
    raise RuntimeError(f"serve did not get ready:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def own_server(name: str, *extra: str) -> Any:
    """A module-scoped fixture: a server of the module's own (``extra``: more ``serve`` flags), for
    a module whose tests count or change what the shared one holds."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
        srv, proc = start_server(tmp_path_factory.mktemp(name), *extra)
        try:
            yield srv
        finally:
            stop(proc)

    return server


def seed(server: Server) -> None:
    events = "".join(__import__("json").dumps(e.to_dict()) + "\n" for e in world_events()).encode()
    r = server.post("/v1/ingest/events", content=events)
    assert r.status_code == 200, r.text
    r = server.post("/v1/ingest/records", content=to_jsonl(factory.RECORDS).encode())
    assert r.status_code == 200, r.text


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
    root = tmp_path_factory.mktemp("api")
    srv, proc = start_server(root, "--max-body-mb", "1", "--replay-sync-limit", "2",
                             "--migration-thresholds", str(THRESHOLDS))
    try:
        seed(srv)
        yield srv
    finally:
        stop(proc)
