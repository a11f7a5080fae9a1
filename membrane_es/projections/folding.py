"""Text as the word index reads it, in every language: what FTS5's ``unicode61`` does not do.

Applied to every document and every query before FTS5 tokenizes it
(:mod:`membrane_es.projections.tokens`), so both sides see the same words:

- **Case and accents.** Compatibility decomposition (NFKD: full-width ``Ａ`` is ``A``, ``ﬁ`` is
  ``fi``), the combining accents of Latin, Greek and Cyrillic letters and the vowel points of
  Hebrew and Arabic dropped, recomposed (NFC: Japanese voiced kana and Hangul syllables stay
  whole) and Unicode case folding (``ß`` is ``ss``, final ``ς`` is ``σ``): ``Ακρόπολη`` is
  found by ``ακροπολη``, as ``Café`` is by ``cafe``. FTS5's own accent removal covers Latin
  letters only.
- **Chinese, Japanese and Korean** have no spaces between words: a run of their characters
  becomes its overlapping pairs (a lone character stays one), as Lucene's CJK analyzer
  does, so ``ラーメン`` and ``京都`` find ``京都でラーメンを食べた`` (the whole run was one
  token before).
- **Emoji and other symbols** are words of their own (FTS5 dropped ``🍜`` as punctuation).

The FTS5 tokenizer keeps letters, digits, marks and symbols together (:data:`CATEGORIES`), so
a Hindi or Arabic word with its vowel signs is one word, not a handful of fragments.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

CATEGORIES: Final = "L* N* M* Co Cn So"
"""The Unicode categories FTS5's ``unicode61`` reads as parts of words (its default is
``L* N* Co``: a combining vowel sign split a word, and a symbol was dropped). ``Cn``: characters
newer than the tokenizer's Unicode tables (most emoji) stay parts of words too."""

# Combining marks that are accents rather than letters' own parts: the combining diacritical
# blocks (Latin, Greek, Cyrillic), Hebrew points and cantillation, Arabic harakat.
_ACCENTS = re.compile(
    "[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
    "\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u064b-\u065f\u0670]+"
)
# Han (with 々 〆 and the supplementary planes), hiragana, katakana (with ー), Hangul.
_CJK_RUN = re.compile(
    "[\u3005\u3006\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\U00020000-\U0003134f]+"
)
_OTHER = re.compile(r"[^\w\s\x00-\x7f]")  # non-ASCII characters that are not parts of words


def fold(text: str) -> str:
    """``text`` as the word index reads it (see the module's description); folding it again
    changes none of its words."""
    if text.isascii():
        folded = text.lower()
    else:
        folded = unicodedata.normalize("NFKD", text)
        folded = unicodedata.normalize("NFC", _ACCENTS.sub("", folded)).casefold()
        folded = _OTHER.sub(_symbol, folded)
        folded = _CJK_RUN.sub(_pairs, folded)
    return folded


def _symbol(match: re.Match[str]) -> str:
    """A symbol (an emoji) as a word of its own; other characters as they are."""
    char = match.group()
    return f" {char} " if unicodedata.category(char) == "So" else char


def _pairs(match: re.Match[str]) -> str:
    """A run of CJK characters as its overlapping pairs, set apart by spaces."""
    run = match.group()
    if len(run) < 3:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "
