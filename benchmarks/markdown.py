"""Render ``benchmarks/results.json`` (written by ``make bench``) as the README's Markdown table."""

from __future__ import annotations

import json
import sys
from typing import Any


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [f"Measured by `make bench` on {m['cpus']} cores, {m['memory_gib']} GiB, Python {m['python']} "
             f"({m['platform']}); a shared machine, so treat single figures as ±30 %.", "",
             "| issue | benchmark | value | target |", "|---|---|---:|---|"]
    for r in results["rows"]:
        lines.append(f"| {r['issue']} | {r['name']} | {fmt(r['value'])} {r['unit']} | {r.get('target', '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results.json"
    with open(path) as fh:
        print(render(json.load(fh)))
