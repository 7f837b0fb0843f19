"""The one canonical JSON encoding: the bytes every digest is taken over and every JSON line is.

Sorted keys, ``,``/``:`` separators and no spaces, UTF-8 with non-ASCII text kept as it is, and no
NaN or infinity (JSON has none). Records, world events, checkpoints, policies and the JSON lines
the command line writes all use it, so a value has one byte form wherever it is hashed, stored or
compared. ``audit.records.record_bytes`` writes a decision record's encoding from the record
itself, faster; tests hold it byte-equal to this module.

The bytes are those of ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)``. orjson writes the same bytes several times faster for everything but some
floats and NaN/infinity (``null`` instead of an error). Both write a float's shortest round-trip
digits and differ only in form, between 1e-9 and 1e-4 (``0.00001`` and ``1e-6`` where json writes
``1e-05`` and ``1e-06``), so orjson's output is taken when it holds no ``null`` token and no number
in one of those forms. That rests on the orjson installed: at import it must write a probe float
of every decade either as json does or in a form the check catches (``_float_check``); one that
does not gets a stricter check (no float at all), and one that fails that too is never used.
Otherwise, and for whatever orjson refuses (integers beyond 64 bits, keys that are not strings,
lone surrogates, subclasses of ``str``/``int``/``dict``/``list``, dataclasses, datetimes), the
json encoder writes the value and raises its own errors. orjson also writes Enum members and
UUIDs, which json refuses; no caller passes them. ``tests/foundation/test_canonical_fast.py``
holds the two byte-equal. A text UTF-8 cannot hold (a lone surrogate) has no encoding: this module
also names the first such text of a value (``lone_surrogate``) and writes a JSON text holding one
in a form that can be kept (``escaped_text``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

import orjson


def _reusable_encoder() -> Any:
    """The canonical settings as one C encoder made once.

    ``json.dumps`` builds a fresh encoder (and a circular-reference table) on every call, which is
    about a third of the cost of encoding the small payloads folded per world event. The bytes are
    identical; without the table a cyclic value overflows the recursion limit instead of raising
    "Circular reference detected" — values here come from JSON and cannot be cyclic.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator: json.dumps below
        return None
    return make(None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ":", ",",
                True, False, False)  # sort_keys, skipkeys, allow_nan


_ENCODER = _reusable_encoder()
encode_string = json.encoder.encode_basestring  # a str as the canonical form writes it (non-ASCII kept)


def _json_text(obj: Any) -> str:
    if _ENCODER is None:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "".join(_ENCODER(obj, 0))


# Types orjson would write on its own that json refuses or writes differently go to ``_refuse``.
_FAST_OPTIONS = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
                 | orjson.OPT_PASSTHROUGH_DATETIME)
# How orjson's output may show a float json would write otherwise. A number is followed only by a
# delimiter; text may match too, which then only costs json's path. (Searching from each "." or
# "e-" costs less than any whole-output pass tried: deleting digits, a class-led regex.) The
# literal searches are regular expressions too: the expression engine's scan for a literal
# prefix takes about two thirds of the time of ``bytes.__contains__`` on a record's 1.9 KB
# (whose search for a short needle steps through text like a record's nearly byte by byte).
_FRACTION = re.compile(rb"\.[0-9]+[,}\]]")
_NEGATIVE_EXPONENT = re.compile(rb"e-[0-9]+[,}\]]")
_TINY_FRACTION = re.compile(rb"\.0000")  # ``0.0000…``, and other fractions starting so (json's path)
_NULL = re.compile(rb"null")


def _differing_form(out: bytes) -> bool:
    """A number orjson writes otherwise than json where the two differ: ``0.0000…`` or ``…e-6``."""
    return _TINY_FRACTION.search(out) is not None or _NEGATIVE_EXPONENT.search(out) is not None


def _any_float(out: bytes) -> bool:
    """Any float at all: a fraction or an exponent."""
    return ((b"+" in out and b"e+" in out) or _FRACTION.search(out) is not None
            or _NEGATIVE_EXPONENT.search(out) is not None)


def _float_probes() -> list[float]:
    """Two floats of every decade a double reaches (one of them with 17 significant digits), and
    a few negatives: the form of a shortest round-trip float depends only on its decade."""
    probes = [x for e in range(-324, 309) for m in (1.0, 1.2345678901234567)
              if 0.0 < (x := m * 10.0**e) < math.inf]
    return probes + [-x for x in probes[::9]] + [0.0, -0.0, 5e-324, sys.float_info.max]


def _catches_every_difference(check: Callable[[bytes], bool], probes: list[float]) -> bool:
    """Whether ``check`` flags every probe orjson writes otherwise than json (``float.__repr__``)."""
    written = orjson.dumps(probes)[1:-1].split(b",")
    expected = ",".join(map(repr, probes)).encode().split(b",")
    return all(o == e or check(b"[" + o + b"]") for o, e in zip(written, expected, strict=True))


def _choose_float_check() -> Callable[[bytes], bool] | None:
    probes = _float_probes()
    return next((c for c in (_differing_form, _any_float) if _catches_every_difference(c, probes)), None)


# None: this orjson writes floats in a form neither test catches; json writes every value.
_float_check = _choose_float_check()


def _refuse(obj: Any) -> Any:
    raise TypeError


def fast_canonical_json(obj: Any, opened: Callable[[Any], Any] = _refuse) -> bytes | None:
    """orjson's encoding when it is certainly the canonical one, else None (json must write it).

    ``opened`` is handed each object orjson does not write itself (dataclasses, subclasses of the
    plain types, anything it cannot write): it returns the plain value the object stands for, or
    raises TypeError to leave the whole value to json. ``audit.records.record_bytes`` hands records over
    this way instead of building their plain form first: orjson walks their lists and dicts in C
    and calls back only for each dataclass."""
    try:
        out = orjson.dumps(obj, default=opened, option=_FAST_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError
        return None
    if out[-1:] not in (b"}", b"]", b'"'):
        return None  # a number, true, false or null alone: nothing to gain
    if _NULL.search(out) is not None or _float_check is None or _float_check(out):
        return None  # a float json writes otherwise (or a NaN written as null): json's own formatting decides
    return out


def equality_key(obj: Any) -> bytes:
    """Bytes equal exactly when the JSON values are, cheaper than ``canonical_json``: for memo keys
    only, never for digests or storage (floats may be written otherwise than canonically).

    orjson's sorted encoding, unless it holds a ``null`` token (NaN and infinity are written as
    null too) or orjson refuses the value: then the canonical encoding, which holds a ``null``
    itself or comes from json's encoder, so the two kinds of key never meet.
    """
    try:
        out = orjson.dumps(obj, default=_refuse, option=_FAST_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError
        return canonical_json(obj)
    return canonical_json(obj) if _NULL.search(out) is not None else out


def canonical_text(obj: Any) -> str:
    """The canonical encoding as text."""
    out = fast_canonical_json(obj)
    return _json_text(obj) if out is None else out.decode()


def canonical_json(obj: Any) -> bytes:
    """The canonical encoding as UTF-8 bytes: what digests are taken over."""
    out = fast_canonical_json(obj)
    return _json_text(obj).encode() if out is None else out


def digest(obj: Any) -> str:
    """sha256 of the canonical encoding, as hex."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def json_lines(items: Iterable[Any]) -> str:
    """One canonical JSON text per line (JSONL), each line ended by a newline."""
    return "".join(canonical_text(x) + "\n" for x in items)


def canonical_digest(obj: Any, stream_depth: int = 0) -> str:
    """Exactly ``digest(obj)``.

    With ``stream_depth`` > 0 the outer ``stream_depth`` levels of objects are hashed member by
    member (sorted keys, canonical separators) instead of as one encoded string: a checkpoint is
    megabytes, and joining and copying all of it before hashing costs more than the hashing.
    """
    h = hashlib.sha256()
    _hash_canonical(h, obj, stream_depth)
    return h.hexdigest()


def _hash_canonical(h: Any, obj: Any, depth: int) -> None:
    if depth <= 0 or not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        h.update(canonical_json(obj))
        return
    # json sorts a dict's items by key; with str keys that is sorted(keys), keys being unique
    sep = "{"
    for k in sorted(obj):
        h.update(f"{sep}{encode_string(k)}:".encode())
        _hash_canonical(h, obj[k], depth - 1)
        sep = ","
    h.update(b"}" if sep == "," else b"{}")


# Texts UTF-8 cannot hold ---------------------------------------------------------------------
#
# A Python string can hold a lone surrogate (from a JSON or YAML escape such as ``\ud800``, say),
# which UTF-8 cannot encode, so a value holding one has no canonical encoding. Records and world
# events holding one are kept in the store's quarantine instead of history: these name the first
# such text and write a JSON text in a form that can be kept.


def lone_surrogate(value: Any) -> tuple[str, str] | None:
    """(path, reason) of the first text under ``value`` (a dataclass, a dict, a list or tuple, or a
    string) that UTF-8 cannot hold, if any: the path joins field names, keys and indexes with dots
    (a key that cannot be held is named in the reason, under the path of its map)."""
    found = _unencodable(value, "")
    if found is None:
        return None
    path, what, text = found
    at = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    return path, f"{what}not valid UTF-8 text (lone surrogate U+{ord(text[at]):04X} at character {at})"


def escaped_text(text: str) -> str:
    """A JSON text (written with non-ASCII kept) with each lone surrogate written as its JSON
    escape (``\\ud800``): valid UTF-8 that reads back as the same value."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode()


def _unencodable(value: Any, path: str) -> tuple[str, str, str] | None:
    """(path, what, text) of the first string under ``value`` with no UTF-8 form."""
    if isinstance(value, str):
        return None if value.isascii() or utf8_encodable(value) else (path, "", value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items: Any = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    elif isinstance(value, dict):
        items = value.items()
        for key in value:
            if isinstance(key, str) and not utf8_encodable(key):
                return path, f"key {shown_text(key)}: ", key
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for name, item in items:
        found = _unencodable(item, f"{path}.{shown_text(str(name))}" if path else shown_text(str(name)))
        if found is not None:
            return found
    return None


def utf8_encodable(text: str) -> bool:
    """Whether UTF-8 can hold ``text`` (it holds no lone surrogate)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown_text(text: str) -> str:
    """``text`` for a message: what UTF-8 cannot hold written as a backslash escape."""
    return text.encode("utf-8", "backslashreplace").decode()
