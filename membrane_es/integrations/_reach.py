"""What an adapter's caller may write: the reach of its trust context, checked before a write.

A read is gated by the engine itself; a write is not (the engine stores what it is given). An
adapter that wrote above its caller's ceiling, or outside its scopes, would store memory the
caller could never read back: such a write is refused up front, naming the field, and nothing
is written.
"""

from __future__ import annotations

from membrane_es import Sensitivity, TrustContext, ValidationError


def checked_trust(trust: object) -> TrustContext:
    """``trust`` once it is a :class:`~membrane_es.TrustContext`."""
    if not isinstance(trust, TrustContext):
        raise ValidationError("trust", f"must be a TrustContext, not {type(trust).__name__}")
    return trust


def checked_sensitivity(trust: TrustContext, sensitivity: object) -> Sensitivity:
    """A sensitivity level the caller may read back (at most its ceiling)."""
    if not isinstance(sensitivity, str) or sensitivity not in Sensitivity.__members__.values():
        levels = ", ".join(level.value for level in Sensitivity)
        raise ValidationError("sensitivity", f"must be one of {levels}, not {sensitivity!r}")
    level, ceiling = Sensitivity(sensitivity), Sensitivity(trust.max_sensitivity)
    if level.level > ceiling.level:
        raise ValidationError(
            "sensitivity", f"{level.value} is above the trust ceiling ({ceiling.value})"
        )
    return level


def checked_scope(trust: TrustContext, scope: object, field: str = "scope") -> str:
    """A scope the caller may read back: any when its trust names no scopes, else one of them
    (or none: unscoped records are visible to every caller)."""
    if not isinstance(scope, str):
        raise ValidationError(field, f"must be a string, not {type(scope).__name__}")
    if scope and trust.scopes and scope not in trust.scopes:
        raise ValidationError(field, f"{scope!r} is outside the trust context's scopes")
    return scope
