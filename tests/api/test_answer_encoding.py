"""Decision answers are encoded by orjson with the bytes Starlette's JSON response would send, and a
body orjson refuses is still answered."""

from __future__ import annotations

import dataclasses

import pytest
from starlette.responses import JSONResponse as StarletteJSON

from audit.api.routes_decisions import JSONResponse
from audit.records import record_dict
from tests.store.factory import make_record


@pytest.mark.parametrize(
    "body",
    [
        {"items": [record_dict(make_record(i)) for i in range(7)], "next": None},
        record_dict(dataclasses.replace(make_record(3), pod="träin-ünïcode-✓", message='quote " and \\ and \n')),
        {"summary": "H100 was skipped", "devices": [], "n": 0, "fallback": True, "ratio": 0.25},
    ],
    ids=["page-of-records", "non-ascii-and-escapes", "explanation"],
)
def test_answers_are_the_bytes_starlette_would_send(body: dict) -> None:
    assert JSONResponse(body).body == StarletteJSON(body).body


def test_an_integer_beyond_64_bits_is_still_encoded() -> None:
    body = {"detail": {"count": 2**70}}
    assert JSONResponse(body).body == b'{"detail":{"count":1180591620717411303424}}'
