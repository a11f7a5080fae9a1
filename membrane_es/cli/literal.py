"""Text shown as it is: what a store holds (or a user typed) may carry characters a terminal
acts on rather than shows; :func:`literal` writes them as escapes."""

from __future__ import annotations

import re

# Characters a terminal acts on rather than shows: C0 and C1 controls but newline and tab
# (ESC starts an ANSI sequence; CR overwrites the line), and the bidi controls that reorder
# what follows them; and lone surrogates, which no terminal encoding can write.
_UNSHOWN = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def literal(value: object) -> str:
    """``value`` as text a terminal shows as it is: each control character written as its
    escape (``\\x1b``, ``\\u202e``)."""
    return _UNSHOWN.sub(_escaped, str(value))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
