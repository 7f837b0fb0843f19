"""``/docs`` is served with every asset from the API itself, so it renders without internet access."""

from __future__ import annotations

import re

from tests.api.conftest import Server


def test_docs_page_names_only_assets_the_server_serves(server: Server) -> None:
    page = server.get("/docs", None)
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert sorted(urls) == ["/docs/assets/favicon.png", "/docs/assets/swagger-ui-bundle.js",
                            "/docs/assets/swagger-ui.css", "/openapi.json"]
    for url in urls:
        assert server.get(url, None).status_code == 200, url
    # Swagger UI 5 reads the OpenAPI 3.1 document FastAPI writes (4.x shows "unsupported version")
    bundle = server.get("/docs/assets/swagger-ui-bundle.js", None).text
    assert re.search(r'"5\.\d+\.\d+"', bundle)
    assert server.get("/openapi.json", None).json()["openapi"].startswith("3.1")


def test_redoc_is_not_offered_since_it_would_load_from_a_cdn(server: Server) -> None:
    assert server.get("/redoc", None).status_code == 404
