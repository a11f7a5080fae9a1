"""The HTTP entries API (Arbiter's ``/v1/memory/...``) on Litestar and uvicorn."""

from membrane_es.http_api.app import create_app
from membrane_es.http_api.server import HttpServer

__all__ = ["HttpServer", "create_app"]
