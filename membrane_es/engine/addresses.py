"""Where a store is, as one value: an LMDB directory, a PostgreSQL database and schema, or
this process's memory — parsed from the text a user writes (a path, ``postgresql://…``,
``:memory:``), so every server and command opens stores the same way
(:meth:`~membrane_es.engine.Membrane.connect`, :func:`~membrane_es.engine.verify_store`).

A new backend is a new kind of address here (its text, its tenants' places) and a branch in
each of those two functions.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from membrane_es.errors import ValidationError
from membrane_es.schema.validation import check_path, check_text
from membrane_es.stores.postgres.database import DEFAULT_SCHEMA, check_schema, tenant_schema

# The address of a store kept in this process only.
IN_MEMORY = ":memory:"
# What a PostgreSQL address starts with (libpq's URL schemes).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# A URL's scheme (RFC 3986): what no directory path starts with.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# The file LMDB keeps a store's data in (beside lock.mdb): its presence is what makes a
# directory a store.
LMDB_DATA_FILE = "data.mdb"
# Where the stores of tenants other than the default sit, beside the default's files.
TENANTS_DIR = "tenants"


@dataclass(frozen=True)
class StoreAddress:
    """Where a store is: ``path``, an LMDB directory; or ``dsn``, a PostgreSQL database (a
    libpq URL), with the ``schema`` the store lives in and, optionally, ``views_dir``, where
    this process checkpoints its read views (a PostgreSQL store's views live in each process
    that opens it); or neither: a store in this process's memory."""

    path: Path | None = None
    dsn: str | None = None
    schema: str = DEFAULT_SCHEMA
    views_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.path is not None and self.dsn is not None:
            raise ValidationError("address", "a store is a directory or a database, not both")
        if self.views_dir is not None and self.dsn is None:
            raise ValidationError(
                "views_dir", "only a PostgreSQL store keeps its read views apart from its log"
            )
        if self.dsn is not None:
            check_schema(self.schema)

    @classmethod
    def parse(cls, address: str | os.PathLike[str] | StoreAddress) -> StoreAddress:
        """The address a user wrote: ``postgresql://user@host/db`` (``#schema`` after it for
        a store in another schema, e.g. a tenant's), ``:memory:``, or a directory (LMDB)."""
        if isinstance(address, StoreAddress):
            return address
        if isinstance(address, str):
            check_text("address", address, required=True)
            if address == IN_MEMORY:
                return cls()
            if address.startswith(POSTGRES_SCHEMES):
                dsn, _, schema = address.partition("#")
                return cls(dsn=dsn, schema=schema or DEFAULT_SCHEMA)
            scheme = _SCHEME.match(address)
            if scheme:  # not a directory named "mysql:": an address of a store not kept here
                raise ValidationError(
                    "address",
                    f"unknown scheme {scheme.group(1)!r}: a store is a directory, "
                    f"{IN_MEMORY} or postgresql://…",
                )
        return cls(path=check_path("address", address))

    @property
    def in_memory(self) -> bool:
        return self.path is None and self.dsn is None

    @property
    def keeps_views(self) -> bool:
        """Whether the store keeps its read views itself (an LMDB directory holds them), so
        views rebuilt by one process are the ones every later open starts from; a PostgreSQL
        store's live in each process that opens it."""
        return self.path is not None

    def tenant(self, name: str) -> StoreAddress:
        """The address of tenant ``name``'s store beside this one (the default tenant's): a
        directory ``tenants/<name>`` in this one (LMDB); the schema ``tenant_<name>`` of the
        same database, its views in ``tenants/<name>/views`` beside these (PostgreSQL); a
        store of its own (memory)."""
        check_text("tenant", name, required=True)
        if self.path is not None:
            return replace(self, path=self.path / TENANTS_DIR / name)
        if self.dsn is not None:
            views = self.views_dir
            return replace(
                self,
                schema=tenant_schema(name),
                views_dir=None if views is None else views.parent / TENANTS_DIR / name / "views",
            )
        return self

    def __str__(self) -> str:
        if self.path is not None:
            return str(self.path)
        if self.dsn is not None:
            return f"{_without_password(self.dsn)} schema {self.schema}"
        return IN_MEMORY


def holds_store(directory: Path) -> bool:
    """Whether ``directory`` is an LMDB store (its data file is there)."""
    return (directory / LMDB_DATA_FILE).is_file()


def _without_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
