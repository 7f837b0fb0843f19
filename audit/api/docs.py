"""The interactive API documentation at ``/docs``, served entirely by the API process.

FastAPI's default ``/docs`` page loads Swagger UI's script and stylesheet from a public CDN, so
on a machine without internet access it is a blank page. Here the same page points at the
Swagger UI 5 files shipped inside the ``fastapi-offline`` package (5.x, which reads the OpenAPI
3.1 document FastAPI writes; 4.x cannot), mounted under ``/docs/assets``. ReDoc, which FastAPI
would also load from a CDN, is not offered.
"""

from __future__ import annotations

import importlib.resources

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
# fastapi-offline keeps the files in its package's static/ folder
SWAGGER_UI_FILES = importlib.resources.files("fastapi_offline") / "static"


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets; ``app`` must be created with ``docs_url=None``."""
    app.mount(ASSETS, StaticFiles(directory=str(SWAGGER_UI_FILES)), name="swagger-ui")
    oauth2_redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} — API documentation",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            oauth2_redirect_url=oauth2_redirect,
        )

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
