"""How the decision routes encode their answers: plain JSON, by orjson where it can.

Records and explanations are plain JSON already, and FastAPI's generic encoding walk over
thousands of device rows would cost more than the explanation. orjson takes a tenth of
``json.dumps``'s time on a page of records; a body orjson refuses (an integer beyond 64 bits in a
detail map) is encoded by ``json.dumps`` instead, as Starlette's own ``JSONResponse`` would.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi.responses import JSONResponse as StarletteJSON


def json_bytes(content: Any) -> bytes:
    try:
        return orjson.dumps(content)
    except orjson.JSONEncodeError:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


class JSONResponse(StarletteJSON):
    def render(self, content: Any) -> bytes:
        return json_bytes(content)
