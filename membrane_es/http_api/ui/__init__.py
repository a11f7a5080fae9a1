"""The inspector: read-only pages under ``/ui`` for people who debug and audit agents —
search explained, a record's timeline, relations and provenance, metrics and integrity, at
any moment of the store's past, under the same keys, tenants and trust as the API."""

from membrane_es.http_api.ui.routes import inspector

__all__ = ["inspector"]
