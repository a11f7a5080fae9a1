"""When two records say the same thing, and when two facts are about the same thing.

Resolution on write (:mod:`membrane_es.commands.resolution`) compares a new record with the
active ones by two keys, both computed here from content alone so that the write side and
the read views (:mod:`membrane_es.projections.fact_keys`) agree on them:

* the **sameness key**: two records of one type with equal keys *match* (a repeat);
* the **topic key** (semantic facts only): subject and predicate, the part a changed value
  keeps.

Text is normalised before it is compared: Unicode NFKC, case folded, runs of white space
made one space, trimmed, and trailing sentence punctuation (``.``, ``!``, ``?``, ``,``,
``;``, ``:``) dropped. A predicate is also read with ``_``, ``-`` and spaces alike
(``deploy_target`` = ``Deploy target``). A value that is not text is compared as compact
JSON with sorted keys. A subject or object that is an entity's id is compared by that
entity's canonical name (``name_of``), so ``Dana`` written before the entity existed and the
entity's id written after are the same subject.

What matches, by type:

* semantic: subject, predicate, object, and validity (mode and conditions);
* entity: canonical name, primary type, and the set of aliases (a record naming an alias
  the existing one lacks is not a repeat: merging it would lose the alias);
* competence: skill name, triggers, recipe, required tools, failure modes and fallbacks.

Episodic, working and plan-graph records have no key: they are never merged.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from typing import Any

import msgspec

from membrane_es.schema.enums import MemoryType
from membrane_es.schema.payloads import CompetencePayload, EntityPayload, SemanticPayload
from membrane_es.schema.records import MemoryRecord

# An entity id → its canonical name (None: not an entity's id).
NameOf = Callable[[str], "str | None"]

RESOLVED_TYPES = frozenset({MemoryType.SEMANTIC, MemoryType.ENTITY, MemoryType.COMPETENCE})

_SPACE = re.compile(r"\s+")
_PREDICATE_JOINERS = re.compile(r"[\s_\-]+")
_TRAILING = ".!?,;:"
_SEPARATOR = "\x1f"


def normal_text(value: Any) -> str:
    """``value`` as it is compared: see the module's documentation."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = msgspec.json.encode(value, order="sorted").decode()
        except (TypeError, msgspec.EncodeError):
            text = str(value)
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return text.rstrip(_TRAILING).rstrip()


def normal_predicate(predicate: str) -> str:
    """A predicate as it is compared and as vocabularies name it (``deploy_target``)."""
    return _PREDICATE_JOINERS.sub("_", normal_text(predicate)).strip("_")


def _term(value: Any, name_of: NameOf) -> str:
    if isinstance(value, str):
        name = name_of(value)
        if name is not None:
            return normal_text(name)
    return normal_text(value)


def _digest(*parts: str) -> str:
    return hashlib.blake2b(_SEPARATOR.join(parts).encode(), digest_size=16).hexdigest()


def global_validity(payload: SemanticPayload) -> bool:
    """Whether a fact holds unconditionally (only such facts replace one another)."""
    validity = payload.validity
    return validity.mode in ("", "global") and not validity.conditions


def sameness_key(record: MemoryRecord, name_of: NameOf) -> str | None:
    """The key records that match share (None: the record's type is never merged)."""
    payload = record.payload
    if isinstance(payload, SemanticPayload) and record.type is MemoryType.SEMANTIC:
        validity = payload.validity
        return _digest(
            "semantic",
            _term(payload.subject, name_of),
            normal_predicate(payload.predicate),
            _term(payload.object, name_of),
            normal_text(validity.mode or "global"),
            normal_text(validity.conditions) if validity.conditions else "",
        )
    if isinstance(payload, EntityPayload) and record.type is MemoryType.ENTITY:
        aliases = sorted({normal_text(a.value) for a in payload.aliases} - {""})
        return _digest(
            "entity",
            normal_text(payload.canonical_name),
            normal_text(payload.primary_type),
            *aliases,
        )
    if isinstance(payload, CompetencePayload) and record.type is MemoryType.COMPETENCE:
        return _digest(
            "competence",
            normal_text(payload.skill_name),
            normal_text(msgspec.to_builtins(payload.triggers)),
            normal_text(msgspec.to_builtins(payload.recipe)),
            normal_text(sorted(payload.required_tools)),
            normal_text(payload.failure_modes),
            normal_text(payload.fallbacks),
        )
    return None


def topic_key(record: MemoryRecord, name_of: NameOf) -> str | None:
    """Subject and predicate of an unconditional semantic fact (None for anything else)."""
    payload = record.payload
    if (
        not isinstance(payload, SemanticPayload)
        or record.type is not MemoryType.SEMANTIC
        or not global_validity(payload)
    ):
        return None
    return _digest("topic", _term(payload.subject, name_of), normal_predicate(payload.predicate))
