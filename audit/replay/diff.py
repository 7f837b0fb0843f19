"""Structural differences between a recorded decision and its replay, one readable line each.

A digest mismatch alone tells an auditor nothing; the diff names the field path (dict keys by
name, list items by index), e.g. ``tiers[0].reasons.in_use: recorded 5, replayed 6`` or
``devices[0].device: recorded gpu.nvidia.com/node-3/gpu-1, replayed gpu.nvidia.com/node-3/gpu-2``.
Keys are visited in sorted order so the same pair of records always yields the same lines.
Clock-measured fields (``duration_us``) and the digests themselves are not compared.
"""

from __future__ import annotations

from typing import Any

from audit.canonical import canonical_text
from audit.records import OUTPUT_DIGEST_EXCLUDED

ABSENT = "(absent)"
IGNORED = OUTPUT_DIGEST_EXCLUDED | {"input_digest"}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value if value else '""'
    return canonical_text(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def structural_diff(recorded: Any, replayed: Any, path: str = "") -> list[str]:
    """Lines ``path: recorded X, replayed Y`` for every leaf that differs."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        out: list[str] = []
        for key in sorted(set(recorded) | set(replayed)):
            sub = _join(path, str(key))
            if key not in recorded:
                out.append(f"{sub}: recorded {ABSENT}, replayed {_text(replayed[key])}")
            elif key not in replayed:
                out.append(f"{sub}: recorded {_text(recorded[key])}, replayed {ABSENT}")
            else:
                out.extend(structural_diff(recorded[key], replayed[key], sub))
        return out
    if isinstance(recorded, list) and isinstance(replayed, list):
        out = []
        if len(recorded) != len(replayed):
            out.append(f"{path}: recorded {len(recorded)} items, replayed {len(replayed)}")
        for i in range(max(len(recorded), len(replayed))):
            sub = f"{path}[{i}]"
            if i >= len(recorded):
                out.append(f"{sub}: recorded {ABSENT}, replayed {_text(replayed[i])}")
            elif i >= len(replayed):
                out.append(f"{sub}: recorded {_text(recorded[i])}, replayed {ABSENT}")
            else:
                out.extend(structural_diff(recorded[i], replayed[i], sub))
        return out
    if recorded == replayed and type(recorded) is type(replayed):
        return []
    return [f"{path}: recorded {_text(recorded)}, replayed {_text(replayed)}"]


def record_diff(recorded: dict[str, Any], replayed: dict[str, Any]) -> list[str]:
    """The differences between two record dicts over the fields the output digest covers."""
    return structural_diff({k: v for k, v in recorded.items() if k not in IGNORED},
                           {k: v for k, v in replayed.items() if k not in IGNORED})
