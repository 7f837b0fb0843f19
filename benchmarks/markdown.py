"""Render ``benchmarks/results.json`` (written by ``make bench``) as the Markdown table of ``docs/performance.md``."""

from __future__ import annotations

import json
import sys
from typing import Any

SCALE_NAMES = {"cpu": "CPU", "cputime": "CPU time", "parallel": "all cores", "scan": "store scans", "memory": "memory"}


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return ""
    if unit == "index" and isinstance(value, float):
        # an index is judged against targets such as 0.95: three significant digits would show
        # 0.9497 as 0.95, a pass
        return f"{value:.4f}"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    f = results.get("factor", {})
    lines = [f"Measured by `make bench` on {m['cpus']} cores, {m['memory_gib']} GiB, Python {m['python']} "
             f"({m['platform']}), commit {results.get('commit', 'unknown')[:12]}; speed factor against the "
             f"reference machine: {', '.join(f'{SCALE_NAMES.get(k, k)} {fmt(v)}' for k, v in f.items() if v is not None)}. "
             "Targets are judged on the normalised figure (what the reference machine would have measured).",
             "", "| issue | benchmark | measured | normalised | target |", "|---|---|---:|---:|---|"]
    for r in results["rows"]:
        normalised = f"{fmt(r['normalised'], r['unit'])} {r['unit']}" if r.get("normalised") is not None else ""
        lines.append(f"| {r['issue']} | {r['name']} | {fmt(r['value'], r['unit'])} {r['unit']} | {normalised} "
                     f"| {r.get('target', '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results.json"
    with open(path) as fh:
        print(render(json.load(fh)))
