"""``claimtrail traces``: download the public Alibaba GPU traces, or say where they are found.

``traces fetch`` (what ``make traces`` runs) downloads the files the trace-driven simulator reads
from the pinned upstream commit (or a mirror: ``--base-url`` / ``CLAIMTRAIL_TRACE_URL``, with its
own ``--manifest``), verifies each by sha256 before it is moved into place, and prints the citation
the traces' publishers ask for. ``traces where`` prints the folder ``simulate --trace`` would read
and the search order.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from audit.errors import UserError


def register(sub: Any) -> None:
    p = sub.add_parser("traces", help="download the public Alibaba GPU traces (make traces), or locate them")
    tsub = p.add_subparsers(dest="traces_command", metavar="ACTION", required=True)
    f = tsub.add_parser("fetch", help="download and verify the traces the simulator reads")
    f.add_argument("--dir", default=None, metavar="DIR",
                   help="where to put them (default CLAIMTRAIL_TRACE_DIR, else $CLAIMTRAIL_DATA_DIR/traces, "
                        "else .claimtrail/traces)")
    f.add_argument("--base-url", default=None, metavar="URL",
                   help="mirror to download from (default CLAIMTRAIL_TRACE_URL, else the pinned upstream commit)")
    f.add_argument("--manifest", default=None, metavar="FILE.json",
                   help="files and sha256 digests to fetch from a mirror (default: the pinned upstream files)")
    f.set_defaults(func=run_fetch)
    w = tsub.add_parser("where", help="the trace folder simulate --trace would read, and the search order")
    w.add_argument("--trace-dir", default=None, metavar="DIR")
    w.set_defaults(func=run_where)


def _default_dest() -> str:
    from ingest.simulate.trace_files import TRACE_DIR_ENV

    if os.environ.get(TRACE_DIR_ENV):
        return os.environ[TRACE_DIR_ENV]
    return os.path.join(os.environ.get("CLAIMTRAIL_DATA_DIR") or ".claimtrail", "traces")


def run_fetch(args: argparse.Namespace) -> int:
    from ingest.simulate.trace_files import (
        CITATION,
        TRACE_FILES,
        TRACE_URL_ENV,
        UPSTREAM_URL,
        TraceFetchError,
        fetch,
        load_manifest,
    )

    dest = args.dir or _default_dest()
    base = args.base_url or os.environ.get(TRACE_URL_ENV) or UPSTREAM_URL
    if not base.startswith(("http://", "https://")):
        raise UserError(f"--base-url {base!r}: expected an http(s):// URL")
    try:
        files = load_manifest(args.manifest) if args.manifest else TRACE_FILES
        print(f"fetching {len(files)} trace file(s) from {base} into {dest}")
        fetch(dest, base, files)
    except TraceFetchError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"--dir {dest}: {exc.strerror}") from None
    print(f"\ntraces ready in {dest} (simulate --trace openb-2023|spot-2026 finds them there"
          f"{'' if os.path.abspath(dest) == os.path.abspath(_default_dest()) else ' with --trace-dir'})\n")
    print(CITATION)
    return 0


def run_where(args: argparse.Namespace) -> int:
    from ingest.simulate.trace_files import candidate_dirs, find_trace_dir

    found = find_trace_dir(args.trace_dir)
    for source, path in candidate_dirs(args.trace_dir):
        mark = "->" if path == found else "  "
        state = "found" if os.path.isdir(path) else "absent"
        print(f"{mark} {path}  ({source}, {state})")
    if found is None:
        raise UserError("no trace folder found; run `make traces` (or `claimtrail traces fetch`)", exit_code=1)
    return 0
