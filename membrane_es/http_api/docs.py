"""The interactive docs page (``/docs``), served whole by the app so it works offline.

Litestar's Swagger UI page loads its script, style sheet and icon from a CDN: a browser that
cannot reach it shows a blank page. The Swagger UI files ship in the ``swagger-ui-py``
package (the ``server`` extra); when it is installed the page points at copies the app
serves under ``/docs/assets/``. Without it the page falls back to the CDN, and
``/openapi.json`` works either way.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from litestar import get
from litestar.exceptions import NotFoundException
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.response import File

log = logging.getLogger("membrane_es.http")

ASSETS_PATH = "/docs/assets"
# The only files the page needs (the package also ships Swagger Editor, source maps, …).
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def assets_directory() -> Path | None:
    """Where the installed ``swagger_ui`` package keeps the Swagger UI files (found without
    importing it: its module imports what only its own handlers need), or None."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(next(iter(spec.submodule_search_locations))) / "static"
    return directory if all((directory / name).is_file() for name in ASSETS) else None


def swagger_ui(path: str) -> SwaggerRenderPlugin:
    """The docs page at ``path``, on the local assets when they are installed."""
    if assets_directory() is None:
        log.info("swagger-ui-py is not installed: the docs page loads Swagger UI from its CDN")
        return SwaggerRenderPlugin(path=path)
    return SwaggerRenderPlugin(
        path=path,
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
    )


def swagger_assets() -> list[HTTPRouteHandler]:
    """The route serving the page's files (none when the package is not installed)."""
    directory = assets_directory()
    if directory is None:
        return []

    @get(f"{ASSETS_PATH}/{{name:str}}", include_in_schema=False, sync_to_thread=False)
    def asset(name: str) -> File:
        media_type = ASSETS.get(name)
        if media_type is None:  # an allow-list: nothing else in the package is served
            raise NotFoundException(f"no docs asset {name!r}")
        return File(
            path=directory / name,
            filename=name,
            media_type=media_type,
            content_disposition_type="inline",
        )

    return [asset]  # made per app: a route handler belongs to one application
