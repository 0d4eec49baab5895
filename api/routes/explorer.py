"""The plan explorer (the service's own page) and the OpenAPI docs, served from the package.

Everything the browser loads ships with the service: the explorer's HTML, script and styles
(``api/explorer/``), and Swagger UI's and ReDoc's bundles (from the ``fastapi-offline``
package), so ``/``, ``/docs`` and ``/redoc`` render on a cluster with no internet. The page
calls the public API only; deep links (``/plans/{id}``, ``/validations/{id}``,
``/calibrations/{id}``) serve the same page, which reads the id from its address.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

PAGE = Path(__file__).resolve().parents[1] / "explorer"
VENDOR = Path(fastapi_offline.__file__).parent / "static"

router = APIRouter(include_in_schema=False)

# The pages load nothing from another origin: what the bundles would fetch from the internet
# (ReDoc's logo from its CDN) is refused by the browser, so they render the same offline.
CSP = ("default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
       "script-src 'self' 'unsafe-inline'; worker-src 'self' blob:; connect-src 'self'; "
       "font-src 'self' data:")


def _page() -> FileResponse:
    # The page is small and changes with the service: browsers revalidate it every time.
    return FileResponse(PAGE / "index.html", media_type="text/html",
                        headers={"Cache-Control": "no-cache", "Content-Security-Policy": CSP})


@router.get("/")
def explorer() -> FileResponse:
    return _page()


@router.get("/plans/{plan_id}")
def explorer_plan(plan_id: str) -> FileResponse:
    return _page()


@router.get("/validations/{validation_id}")
def explorer_validation(validation_id: str) -> FileResponse:
    return _page()


@router.get("/calibrations/{calibration_id}")
def explorer_calibration(calibration_id: str) -> FileResponse:
    return _page()


def install(app: FastAPI) -> None:
    """The page, its assets, and /docs and /redoc with local Swagger UI and ReDoc."""
    app.mount("/ui", StaticFiles(directory=PAGE), name="explorer-assets")
    app.mount("/ui-vendor", StaticFiles(directory=VENDOR), name="docs-assets")
    title = app.title

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        page = get_swagger_ui_html(openapi_url="/openapi.json", title=f"{title} - docs",
                                   swagger_js_url="/ui-vendor/swagger-ui-bundle.js",
                                   swagger_css_url="/ui-vendor/swagger-ui.css",
                                   swagger_favicon_url="/ui-vendor/favicon.png")
        page.headers["Content-Security-Policy"] = CSP
        return page

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        page = get_redoc_html(openapi_url="/openapi.json", title=f"{title} - ReDoc",
                              redoc_js_url="/ui-vendor/redoc.standalone.js",
                              redoc_favicon_url="/ui-vendor/favicon.png",
                              with_google_fonts=False)
        page.headers["Content-Security-Policy"] = CSP
        return page

    app.include_router(router)
