"""How many tokens a text costs a model that reads it: the embedder's tokenizer when it has one,
else a documented estimate.

A context packed for a language model is measured in tokens. No tokenizer here is the reading
model's own (that model is not known), so the count is the embedder's: all-MiniLM-L6-v2's
word pieces (BERT's uncased WordPiece vocabulary, 30,522 pieces) when the default model is
installed — close to what GPT-style byte-pair tokenizers count for English prose — and
otherwise :class:`ApproximateCount`. Special tokens ([CLS], [SEP]) are not counted: they are
the embedder's framing, not text a reader receives. Nothing is truncated: a long text counts
every piece.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

_WORDS_AND_MARKS = re.compile(r"\w+|[^\w\s]")
CHARACTERS_PER_TOKEN = 4
COUNTS_REMEMBERED = 65_536  # texts whose count is kept (a few MB at most)


class TokenCounter(Protocol):
    """Counts tokens of texts; ``name`` says what is counted (shown beside a budget)."""

    @property
    def name(self) -> str: ...

    def count(self, texts: Sequence[str]) -> list[int]:
        """The tokens of each text, in order."""
        ...


class ApproximateCount:
    """The estimate used without a tokenizer: a text's words and punctuation marks, but at
    least one token per four characters (long or rare words split into several pieces in
    every subword vocabulary). On LoCoMo's turns it counts 7 % more than MiniLM's word pieces
    (34.2 against 32.0 a turn), so a budget it fills holds a little less, rarely more."""

    name = f"approximate (words and marks, at least 1 per {CHARACTERS_PER_TOKEN} characters)"

    def count(self, texts: Sequence[str]) -> list[int]:
        return [
            max(len(_WORDS_AND_MARKS.findall(text)), math.ceil(len(text) / CHARACTERS_PER_TOKEN))
            for text in texts
        ]


class WordPieceCount:
    """A Hugging Face ``tokenizers`` tokenizer read from a model's ``tokenizer.json``, without
    truncation or special tokens. Counts are remembered by text: a context is packed from
    the same lines query after query, and tokenizing costs a fraction of a millisecond a
    line."""

    def __init__(self, tokenizer_file: Path, model: str) -> None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._known: dict[str, int] = {}
        self._lock = threading.Lock()
        self.name = f"word pieces of {model}"

    def count(self, texts: Sequence[str]) -> list[int]:
        known = self._known
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        # One text at a time: encode_batch's thread pool costs more than it saves on the
        # few dozen short lines a packing asks for.
        counted = {
            text: len(self._tokenizer.encode(text, add_special_tokens=False).ids)
            for text in missing
        }
        with self._lock:
            if len(known) + len(counted) > COUNTS_REMEMBERED:
                known.clear()
            known.update(counted)
        return [counted[text] if text in counted else known[text] for text in texts]


class CallableCount:
    """A count given as a function (a library tokenizer already loaded with its model)."""

    def __init__(self, count: Callable[[Sequence[str]], list[int]], name: str) -> None:
        self._count = count
        self.name = name

    def count(self, texts: Sequence[str]) -> list[int]:
        return self._count(texts) if texts else []


APPROXIMATE = ApproximateCount()


@functools.lru_cache(maxsize=8)
def word_pieces(tokenizer_file: Path, model: str) -> WordPieceCount:
    """The counter of a ``tokenizer.json``, read once (reading it takes a tenth of a second)."""
    return WordPieceCount(tokenizer_file, model)


def counter_for(embedder: Any) -> TokenCounter:
    """The token counter of ``embedder`` (its ``token_counter()``), or the estimate when it has
    none or there is no embedder."""
    make = getattr(embedder, "token_counter", None)
    if callable(make):
        counter: TokenCounter | None = make()
        if counter is not None:
            return counter
    return APPROXIMATE
