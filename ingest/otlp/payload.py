"""Decoding OTLP/HTTP request bodies: gzip, binary protobuf and the OTLP JSON encoding.

OTLP JSON is protobuf JSON with two differences the spec spells out: trace and span ids are hex
strings (not base64), and receivers must ignore unknown fields. Decompressed size is bounded so
a small gzip body cannot expand without limit.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MAX_BODY_BYTES = 64 * 1024 * 1024

_ID_KEYS = {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}

M = TypeVar("M", bound=Message)


class PayloadError(ValueError):
    """The body cannot be decoded; answered with 400 and quarantined."""


class UnsupportedMediaType(PayloadError):
    """The content type is neither OTLP protobuf nor OTLP JSON; answered with 415."""


class UnsupportedEncoding(UnsupportedMediaType):
    """The content coding is neither gzip nor none; answered with 415, which HTTP (RFC 9110,
    15.5.16) gives a Content-Encoding the server cannot decode as well as a Content-Type."""


class BodyTooLarge(PayloadError):
    """The body, or what it decompresses to, exceeds the size limit; answered with 413, which the
    OTLP/HTTP spec asks for either way (a sender must not retry it)."""


def media_type(content_type: str) -> str:
    base = content_type.split(";", 1)[0].strip().lower()
    if base in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if base == JSON:
        return JSON
    raise UnsupportedMediaType(f"Content-Type: {content_type!r} is not {PROTOBUF} or {JSON}")


def decompress(body: bytes, content_encoding: str, limit: int = MAX_BODY_BYTES) -> bytes:
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        if len(body) > limit:
            raise BodyTooLarge(f"body: {len(body)} bytes exceeds the {limit}-byte limit")
        return body
    if encoding != "gzip":
        raise UnsupportedEncoding(f"Content-Encoding: {content_encoding!r} is not supported (use gzip or none)")
    # a gzip body may hold several members one after another (RFC 1952 2.2), each read in turn;
    # bytes after the last that are not a member make the body invalid rather than being ignored
    out = bytearray()
    rest = body
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise PayloadError(f"body: invalid gzip data ({exc})") from None
        if len(out) > limit:
            raise BodyTooLarge(f"body: decompresses to more than the {limit}-byte limit")
        if not inflater.eof:
            raise PayloadError("body: truncated gzip data")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def parse(body: bytes, media: str, message_type: type[M]) -> M:
    message = message_type()
    if media == PROTOBUF:
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise PayloadError(f"{message_type.__name__}: invalid protobuf ({exc})") from None
        return message
    try:
        data = json.loads(body)
    except ValueError as exc:  # bad JSON or UTF-8, and a number past int's digit limit (4300)
        raise PayloadError(f"{message_type.__name__}: invalid JSON ({exc})") from None
    except RecursionError:
        raise PayloadError(f"{message_type.__name__}: JSON nests too deeply") from None
    if not isinstance(data, dict):
        raise PayloadError(f"{message_type.__name__}: expected a JSON object, got {type(data).__name__}")
    try:
        json_format.ParseDict(_ids_to_base64(data, message_type.__name__), message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise PayloadError(f"{message_type.__name__}: {exc}") from None
    except RecursionError:
        raise PayloadError(f"{message_type.__name__}: JSON nests too deeply") from None
    return message


def serialize(message: Message, media: str) -> bytes:
    if media == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode()


def _ids_to_base64(value: Any, path: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            child = f"{path}.{key}"
            out[key] = _hex_to_base64(item, child) if key in _ID_KEYS else _ids_to_base64(item, child)
        return out
    if isinstance(value, list):
        return [_ids_to_base64(item, f"{path}[{i}]") for i, item in enumerate(value)]
    return value


def _hex_to_base64(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise PayloadError(f"{path}: expected a hex string, got {type(value).__name__}")
    try:
        raw = binascii.unhexlify(value)
    except (binascii.Error, ValueError):
        raise PayloadError(f"{path}: {value!r} is not a hex id") from None
    return base64.b64encode(raw).decode()
