"""Who is calling: API keys, their tenants and their trust ceilings.

Membrane trusts the trust context a caller declares. Here a key may also carry a ceiling:
the most sensitive level and the scopes its holder may ever read. The effective trust of a
call is the lower of what it declares and what its key allows, so a leaked low-ceiling key
cannot be used to read ``hyper`` records by declaring ``hyper``. A key may also name a
tenant: each tenant has its own store, so tenants never see each other's records.

Keys file (YAML or JSON)::

    keys:
      - key: "9f2c…"              # the bearer secret (or key_sha256: hex digest of it)
        tenant: acme               # default: the shared default tenant
        max_sensitivity: medium    # default: hyper (no ceiling)
        scopes: [project:alpha]    # default: every scope
        name: ingest-bot           # default: key:<the first 12 hex digits of its SHA-256>

A key's name is the actor of the writes it makes where the request names none (the entries
API), so ``history`` tells which key wrote what. It is never the key: the default is a
prefix of the key's SHA-256 digest, which the keys file may hold anyway (``key_sha256``).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from membrane_es.access.ceiling import DEFAULT_TENANT, Caller
from membrane_es.errors import ValidationError
from membrane_es.schema.enums import Sensitivity

__all__ = ["CURRENT_CALLER", "DEFAULT_CALLER", "DEFAULT_TENANT", "Caller", "KeyRing"]

_TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}$")
KEY_NAME_DIGITS = 12  # hex digits of the digest in a key's default name (48 bits)
BEARER = "Bearer "

DEFAULT_CALLER = Caller()

# Set by the authenticating interceptor for the handler it wraps (same thread, same call).
CURRENT_CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar(
    "membrane_caller", default=DEFAULT_CALLER
)


class _KeyEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    key: str = ""
    key_sha256: str = ""
    tenant: str = DEFAULT_TENANT
    max_sensitivity: Sensitivity = Sensitivity.HYPER
    scopes: list[str] = msgspec.field(default_factory=list)
    name: str = ""


class _KeysFile(msgspec.Struct, forbid_unknown_fields=True):
    keys: list[_KeyEntry]


class KeyRing:
    """API keys → callers. Keys are held and compared as SHA-256 digests in constant time."""

    def __init__(self, shared_key: str = "", keys: Iterable[tuple[str, Caller]] = ()) -> None:
        self._callers: list[tuple[bytes, Caller]] = []
        if shared_key:
            digest = _digest(shared_key)
            self._callers.append((digest, _named(DEFAULT_CALLER, digest)))
        for digest_hex, caller in keys:
            digest = bytes.fromhex(digest_hex)
            self._callers.append((digest, _named(caller, digest)))

    def replace(self, other: KeyRing) -> None:
        """Take ``other``'s keys in place of these, at once: a call sees either the old keys
        or the new, never a mix (one reference is swapped; readers take it once)."""
        self._callers = other._callers

    def __len__(self) -> int:
        return len(self._callers)

    @property
    def enabled(self) -> bool:
        """Authentication is on when any key is configured."""
        return bool(self._callers)

    @property
    def tenants(self) -> set[str]:
        return {caller.tenant for _, caller in self._callers}

    def caller_for(self, authorization: str | None) -> Caller | None:
        """The caller an ``authorization`` value authenticates, or ``None``.

        With no keys configured everyone is the default, unrestricted caller (as Membrane
        with an empty ``api_key``). Every configured key is compared, so the time taken does
        not reveal which one, or how much of one, matched.
        """
        callers = self._callers  # once: a reload swaps the list, never changes it
        if not callers:
            return DEFAULT_CALLER
        if authorization is None or not authorization.startswith(BEARER):
            return None
        offered = _digest(authorization[len(BEARER) :])
        found: Caller | None = None
        for digest, caller in callers:
            if hmac.compare_digest(digest, offered) and found is None:
                found = caller
        return found

    @classmethod
    def load(cls, shared_key: str, path: str | Path | None) -> KeyRing:
        """The shared key (default tenant, no ceiling) plus a keys file, if any."""
        if not path:
            return cls(shared_key)
        file = Path(path)
        try:
            raw: Any = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as error:
            raise ValidationError("api_keys_file", f"read keys file {file}: {error}") from None
        try:
            parsed = msgspec.convert(raw, _KeysFile)
        except msgspec.ValidationError as error:
            raise ValidationError("api_keys_file", f"keys file {file}: {error}") from None
        return cls(shared_key, [_entry(i, entry) for i, entry in enumerate(parsed.keys)])


def _entry(index: int, entry: _KeyEntry) -> tuple[str, Caller]:
    where = f"keys[{index}]"
    if bool(entry.key) == bool(entry.key_sha256):
        raise ValidationError(where, f"{where}: exactly one of key and key_sha256 is required")
    if entry.key_sha256 and not re.fullmatch(r"[0-9a-fA-F]{64}", entry.key_sha256):
        raise ValidationError(f"{where}.key_sha256", "key_sha256 must be 64 hex digits")
    if entry.tenant and not _TENANT_NAME.match(entry.tenant):
        raise ValidationError(
            f"{where}.tenant", "tenant must be 1-64 letters, digits, '_', '.' or '-'"
        )
    if entry.name and not _KEY_NAME.match(entry.name):
        raise ValidationError(
            f"{where}.name", "name must be 1-64 letters, digits, '_', '.', '@', ':' or '-'"
        )
    digest = entry.key_sha256.lower() or _digest(entry.key).hex()
    caller = Caller(
        tenant=entry.tenant,
        max_sensitivity=entry.max_sensitivity,
        scopes=tuple(entry.scopes),
        name=entry.name,
    )
    return digest, caller


def _named(caller: Caller, digest: bytes) -> Caller:
    """The caller with a name: its own, else ``key:`` and a prefix of its key's digest."""
    if caller.name:
        return caller
    return msgspec.structs.replace(caller, name=f"key:{digest.hex()[:KEY_NAME_DIGITS]}")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def first_value(metadata: Iterable[tuple[str, str | bytes]], name: str) -> str | None:
    """The first value of a metadata key (Membrane reads only the first ``authorization``)."""
    for key, value in metadata:
        if key == name:
            return value if isinstance(value, str) else value.decode()
    return None
