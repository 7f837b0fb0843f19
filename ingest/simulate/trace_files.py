"""Where the public Alibaba GPU traces live on this machine, and how to download them.

The trace-driven simulator (``ingest.simulate.traces``) reads three CSV files of the Alibaba
Cluster Trace Program (github.com/alibaba/clusterdata): the openb 2023 GPU node list and its
33 %-constrained pod list, and the 2026 spot-GPU node table. They are public data but not part of
this repository, so ``claimtrail traces fetch`` (``make traces``) downloads them from a pinned
upstream commit, checks every byte against the sha256 recorded here, and only then moves each file
into place; a mismatch leaves nothing behind. ``find_trace_dir`` resolves the folder in a documented
order: ``--trace-dir``, then ``CLAIMTRAIL_TRACE_DIR``, then ``$CLAIMTRAIL_DATA_DIR/traces`` (by
default ``./.claimtrail/traces``, where ``make traces`` puts them), then a ``shared/traces`` folder
beside the repository checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

# The snapshot of github.com/alibaba/clusterdata the pins below were taken from.
UPSTREAM_COMMIT = "7a6c496e4f4b6ce6150be8f881cb051bf2abff42"
UPSTREAM_URL = f"https://raw.githubusercontent.com/alibaba/clusterdata/{UPSTREAM_COMMIT}/"
TRACE_DIR_ENV = "CLAIMTRAIL_TRACE_DIR"
TRACE_URL_ENV = "CLAIMTRAIL_TRACE_URL"

CITATION = """\
These traces are published by the Alibaba Cluster Trace Program (github.com/alibaba/clusterdata)
for study and research; tell alibaba-clusterdata@list.alibaba-inc.com about any publication using them.
Cite:
  Qizhen Weng, Lingyun Yang, Yinghao Yu, Wei Wang, Xiaochuan Tang, Guodong Yang, Liping Zhang,
  "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
  USENIX ATC '23 (cluster-trace-gpu-v2023).
  Jiaang Duan et al., "GFS: A Preemptive Scheduling Framework for GPU Clusters with Predictive Spot
  Management", ASPLOS '26 (cluster-trace-v2026-spot-gpu)."""


class TraceFetchError(Exception):
    """A download could not be completed or verified; the message names the file and what went wrong."""


@dataclass(frozen=True)
class TraceFile:
    path: str       # where the simulator reads it, relative to the trace folder
    upstream: str   # its path in the upstream repository, relative to the base URL
    sha256: str
    size: int


TRACE_FILES: tuple[TraceFile, ...] = (
    TraceFile("cluster-trace-gpu-v2023/openb_node_list_gpu_node.csv",
              "cluster-trace-gpu-v2023/csv/openb_node_list_gpu_node.csv",
              "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5", 42_353),
    TraceFile("cluster-trace-gpu-v2023/openb_pod_list_gpuspec33.csv",
              "cluster-trace-gpu-v2023/csv/openb_pod_list_gpuspec33.csv",
              "eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652", 587_467),
    TraceFile("cluster-trace-v2026-spot-gpu/node_info_df.csv",
              "cluster-trace-v2026-spot-gpu/node_info_df.csv",
              "1aba161961a5a4a1a61aa581383c5e5abe3400b59f8597ba8c4eef7597bc9d18", 78_330),
)


def repo_shared_traces() -> str:
    """``shared/traces`` beside the repository checkout this package runs from."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "shared", "traces"))


def candidate_dirs(explicit: str | None = None) -> list[tuple[str, str]]:
    """The folders searched, in order, each with the setting that named it."""
    out: list[tuple[str, str]] = []
    if explicit:
        out.append(("--trace-dir", explicit))
    if os.environ.get(TRACE_DIR_ENV):
        out.append((TRACE_DIR_ENV, os.environ[TRACE_DIR_ENV]))
    data_dir = os.environ.get("CLAIMTRAIL_DATA_DIR") or ".claimtrail"
    out.append(("the data directory", os.path.join(data_dir, "traces")))
    out.append(("beside the repository", repo_shared_traces()))
    return out


def find_trace_dir(explicit: str | None = None) -> str | None:
    """The first folder of the search order that exists; an explicit setting is taken as given.

    ``None`` when nothing named explicitly and no default folder exists: the caller says what
    was searched (``candidate_dirs``) and how to get the traces."""
    for source, path in candidate_dirs(explicit):
        if source in ("--trace-dir", TRACE_DIR_ENV) or os.path.isdir(path):
            return path
    return None


def load_manifest(path: str) -> tuple[TraceFile, ...]:
    """Files to fetch from a mirror, as a JSON list of {path, upstream, sha256, size}."""
    try:
        with open(path, encoding="utf-8") as fh:
            items = json.load(fh)
        return tuple(TraceFile(str(i["path"]), str(i["upstream"]), str(i["sha256"]).lower(), int(i["size"]))
                     for i in items)
    except OSError as exc:
        raise TraceFetchError(f"--manifest {path}: cannot read: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise TraceFetchError(f"--manifest {path}: expected a JSON list of {{path, upstream, sha256, size}}: "
                              f"{type(exc).__name__}: {exc}") from None


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: str, want: TraceFile) -> None:
    import httpx

    part = target + ".part"
    digest, size = hashlib.sha256(), 0
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as resp:
            if resp.status_code != 200:
                raise TraceFetchError(f"{want.path}: {url} answered HTTP {resp.status_code}")
            with open(part, "wb") as out:
                for block in resp.iter_bytes():
                    size += len(block)
                    # stop early: a file larger than the pinned one cannot match it
                    if size > want.size:
                        raise TraceFetchError(f"{want.path}: {url} sent more than the expected "
                                              f"{want.size:,} bytes; refused, nothing written")
                    digest.update(block)
                    out.write(block)
        if digest.hexdigest() != want.sha256:
            raise TraceFetchError(f"{want.path}: sha256 mismatch for {url}: expected {want.sha256}, "
                                  f"got {digest.hexdigest()} ({size:,} bytes); refused, nothing written")
        os.replace(part, target)
    except httpx.HTTPError as exc:
        raise TraceFetchError(f"{want.path}: cannot download {url}: {exc}") from None
    finally:
        if os.path.exists(part):
            os.remove(part)


def fetch(dest: str, base_url: str = UPSTREAM_URL, files: tuple[TraceFile, ...] = TRACE_FILES,
          say: Callable[[str], None] = print) -> list[str]:
    """Download every file not already present with the right digest; returns the paths fetched.

    A file already in place is checked, not fetched again; a present file with another digest is
    replaced only by a download that verifies."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    fetched: list[str] = []
    for f in files:
        target = os.path.join(dest, f.path)
        if os.path.exists(target) and sha256_of(target) == f.sha256:
            say(f"{f.path}: present, sha256 verified")
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        _download(base + f.upstream, target, f)
        say(f"{f.path}: downloaded, {f.size:,} bytes, sha256 verified")
        fetched.append(target)
    return fetched
