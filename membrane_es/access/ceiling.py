"""A trust ceiling: the most a caller may ever read, whatever trust it declares.

Membrane believes the trust context a caller declares. A server here may also hold a
ceiling for a caller (an API key's, or the MCP server's own configuration): the effective
trust of a read is the lower of the declared trust and the ceiling, a caller may revise only
what it could read in full, and may not write what it could not read back.
"""

from __future__ import annotations

import msgspec

from membrane_es.errors import ValidationError
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext

DEFAULT_TENANT = ""
_RANK = {level: rank for rank, level in enumerate(Sensitivity)}


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller may do: its tenant, and the most sensitive level and the scopes it may
    ever read; and its key's name."""

    tenant: str = DEFAULT_TENANT
    max_sensitivity: Sensitivity = Sensitivity.HYPER
    scopes: tuple[str, ...] = ()  # empty: every scope
    # Who the key is, never the key itself: the actor its writes are recorded with where the
    # surface has no actor of its own (the entries API). Empty: no key (no authentication).
    name: str = ""

    @property
    def unrestricted(self) -> bool:
        return self.max_sensitivity is Sensitivity.HYPER and not self.scopes

    def clamp(self, declared: TrustContext) -> TrustContext:
        """The declared trust lowered to this key's ceiling."""
        if self.unrestricted:
            return declared
        level = min(declared.max_sensitivity, self.max_sensitivity, key=_RANK.__getitem__)
        scopes = list(declared.scopes)
        if self.scopes:
            allowed = set(self.scopes)
            # no declared scopes means "all": all that the key allows. Declared scopes the
            # key does not allow are dropped; if none is left, only unscoped records remain
            # visible, which a scope list holding just "" expresses (no record has scope "").
            scopes = [s for s in scopes if s in allowed] or ([""] if scopes else list(self.scopes))
        return TrustContext(
            max_sensitivity=level,
            authenticated=declared.authenticated,
            actor_id=declared.actor_id,
            scopes=scopes,
        )

    def ceiling(self) -> TrustContext:
        """The most this key may see: what its writes and revisions are checked against."""
        return TrustContext(
            max_sensitivity=self.max_sensitivity, authenticated=True, scopes=list(self.scopes)
        )

    def may_write(self, sensitivity: str, scope: str) -> bool:
        """Whether a record at this level and scope is within the key's ceiling; a level
        that is none of the known ones is a :class:`ValidationError` (the engine would
        refuse it too, but the ceiling is asked first)."""
        if self.unrestricted:
            return True
        try:
            level = Sensitivity(sensitivity or Sensitivity.LOW)
        except ValueError:
            raise ValidationError(
                "sensitivity",
                f"{sensitivity!r} is not a sensitivity level: one of "
                + ", ".join(s.value for s in Sensitivity),
            ) from None
        if _RANK[level] > _RANK[self.max_sensitivity]:
            return False
        return not self.scopes or scope in self.scopes
