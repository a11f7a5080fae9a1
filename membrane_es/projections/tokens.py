"""The one tokenizer: SQLite FTS5's ``porter unicode61 remove_diacritics 2`` after
:func:`~membrane_es.projections.folding.fold` (case, accents, CJK pairs and emoji, in
every language), for documents and queries alike.

The text index tokenizes documents with it; every query word, entity name and descriptor is
tokenized here by the same tokenizer (a private FTS5 table whose vocabulary is read back), so a
query term is exactly what the index holds: ``"café in Zürich"`` gives ``cafe``, ``zurich``
(a regular expression of ASCII letters gave ``caf``, ``z``, ``rich``), and a word is stemmed
as the documents were. Stop words are dropped by their stems.
"""

from __future__ import annotations

import functools
import sqlite3
import threading

from membrane_es.projections.folding import CATEGORIES, fold

TOKENIZER = f"porter unicode61 remove_diacritics 2 categories '{CATEGORIES}'"
"""The FTS5 tokenizer of every index of words; a table names it as ``tokenize="…"`` (it holds
single quotes). Text goes in through :func:`fold`."""
TOKENS_REMEMBERED = 65_536  # texts whose tokens are kept (queries repeat; a few MB at most)

# Function words: the Snowball English stop list (pronouns, determiners and quantifiers,
# auxiliaries, prepositions, conjunctions), one-word entries. They say how a task is phrased,
# not what it is about; in a small store their IDF cannot tell them from content words
# ("show me *all* incidents" would otherwise match every record that says "all"). The endings
# of contractions and possessives, which the tokenizer cuts off as words of their own ("Bob's"
# is "bob", "s"; "don't" is "don", "t"), are none either: a query's "s" matched every "what's".
# (Cutting them off the documents too lowered LoCoMo's R@5: docs/benchmarks.md.)
STOP_WORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before "
    "being below between both but by can cannot could did do does doing down during each few "
    "for from further had has have having he her here hers herself him himself his how i if "
    "in into is it its itself me more most my myself no nor not of off on once only or other "
    "ought our ours ourselves out over own same she should so some such than that the their "
    "theirs them themselves then there these they this those through to too under until up "
    "very was we were what when where which while who whom why will with would you your "
    "yours yourself yourselves s t d ll m re ve".split()
)

_lock = threading.Lock()
_db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
_db.executescript(
    f"""
    CREATE VIRTUAL TABLE scratch USING fts5(body, tokenize="{TOKENIZER}");
    CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, instance);
    """
)


@functools.lru_cache(maxsize=TOKENS_REMEMBERED)
def tokens(text: str) -> tuple[str, ...]:
    """The terms the word index holds for ``text``, in order (folded, Porter-stemmed),
    repeats included."""
    if not text.strip():
        return ()
    with _lock:
        _db.execute("DELETE FROM scratch")
        _db.execute("INSERT INTO scratch(rowid, body) VALUES (1, ?)", (fold(text),))
        found = _db.execute("SELECT term FROM scratch_terms ORDER BY offset").fetchall()
    return tuple(term for (term,) in found)


def stem(term: str) -> str:
    """A term tokenized again: Porter's stemmer is not idempotent ("deployment" stems to
    "deploy", which stems to "deploi", the stem of "deploy" and "deployed"), so a query term
    also matches its stem's stem."""
    again = tokens(term)
    return again[0] if len(again) == 1 else term


STOP_TERMS = frozenset(tokens(" ".join(sorted(STOP_WORDS))))


def query_terms(text: str) -> list[str]:
    """The distinct content terms of a query, in order: its tokens without the stop words."""
    return list(dict.fromkeys(t for t in tokens(text) if t not in STOP_TERMS))
