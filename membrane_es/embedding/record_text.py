"""The text a record is embedded and searched by.

Two readings of one record:

- :func:`trigger_text` is the reference's text, exactly (spec/membrane.md §3.8): the short line
  the Go engine embeds. Kept for parity tests and for anyone who wants the reference behaviour.
- :func:`search_text` is what membrane_es indexes (embedding matrix and BM25 alike): the trigger
  text's words plus the structure the record carries — the parts of a fact, a skill's triggers,
  steps, tools and failure modes, a plan's operations, an episode's whole timeline, an entity's
  names — with identifiers made readable (``user_prefers`` → ``user prefers``).

Both depend only on a record's content, which never changes after creation (DESIGN §2), so the
text and its vector are computed once. Fields that do change in place (an episode's ``outcome``,
a skill's ``performance``, a plan's ``metrics``) are left out on purpose. Output is deterministic:
map keys are visited in sorted order, and nothing depends on hashing or the clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from membrane_es.schema.payloads import (
    CompetencePayload,
    EntityPayload,
    EpisodicPayload,
    Payload,
    PlanGraphPayload,
    SemanticPayload,
    WorkingPayload,
)
from membrane_es.schema.records import MemoryRecord

# Go's unicode.IsSpace: what strings.TrimSpace removes (Python's str.strip also removes
# U+001C..U+001F, which Go keeps).
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _payload_of(item: MemoryRecord | Payload | None) -> Payload | None:
    return item.payload if isinstance(item, MemoryRecord) else item


# --- the reference trigger text -----------------------------------------------------------


def trigger_text(record: MemoryRecord | Payload | None) -> str:
    """The reference's trigger text for a record (or a bare payload), character for character.

    episodic: the summary of the last timeline event with a non-empty summary, else
    ``"<first event kind> <first ref>"``, else ""; working: space-join of the non-empty context
    summary, the non-empty state and the next actions joined by spaces; semantic:
    ``trim("subject predicate objectText")``; competence: ``trim(skill_name + " " + signals)``
    over the non-empty trigger signals, or the skill name alone; plan graph: the intent, else the
    non-empty node ops joined by spaces; entity and no payload: "".
    """
    payload = _payload_of(record)
    if isinstance(payload, EpisodicPayload):
        for event in reversed(payload.timeline):
            if event.summary != "":
                return event.summary
        if payload.timeline:
            first = payload.timeline[0]
            return first.event_kind + " " + first.ref
        return ""
    if isinstance(payload, WorkingPayload):
        parts = [p for p in (payload.context_summary, str(payload.state)) if p != ""]
        if payload.next_actions:
            parts.append(" ".join(payload.next_actions))
        return " ".join(parts)
    if isinstance(payload, SemanticPayload):
        text = f"{payload.subject} {payload.predicate} {object_text(payload.object)}"
        return text.strip(_GO_SPACE)
    if isinstance(payload, CompetencePayload):
        signals = [t.signal for t in payload.triggers if t.signal != ""]
        if signals:
            return (payload.skill_name + " " + " ".join(signals)).strip(_GO_SPACE)
        return payload.skill_name
    if isinstance(payload, PlanGraphPayload):
        if payload.intent != "":
            return payload.intent
        return " ".join(node.op for node in payload.nodes if node.op != "")
    return ""


def object_text(value: Any) -> str:
    """A semantic object as the reference renders it: a string as is, None as "", anything
    else as Go's ``json.Marshal`` would write it (sorted keys, compact, ``<>&`` escaped, numbers
    as float64); a value JSON cannot hold (NaN, infinity) falls back to Go's ``fmt.Sprint``.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, bool | int | float | dict | list | tuple):
        return str(value)  # Go: a fmt.Stringer is written with its String()
    try:
        return _go_json(value)
    except ValueError:
        return _go_sprint(value)


def go_json(value: Any) -> str:
    """A JSON-like value as Go's ``json.Marshal`` writes it (sorted keys, compact, ``<>&``
    escaped, numbers as float64); :class:`ValueError` for NaN or infinity."""
    return _go_json(value)


def go_sprint(value: Any) -> str:
    """A JSON-like value as Go's ``fmt.Sprint`` writes it (``map[k:v]``, ``[a b]``, ``<nil>``)."""
    return _go_sprint(value)


def _go_json(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_json_number(value)
    if isinstance(value, str):
        return _go_json_string(value)
    if isinstance(value, dict):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{_go_json_string(k)}:{_go_json(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    # Anything else plays the part of a Go fmt.Stringer: its string form, JSON-quoted.
    return _go_json_string(str(value))


def _go_json_number(value: float) -> str:
    """A number as Go's encoding/json writes a float64 (every JSON number in Go is one)."""
    try:
        number = float(value)
    except OverflowError:  # an int beyond float64: Go could not have held it; keep its digits
        return str(value)
    if not math.isfinite(number):
        raise ValueError("JSON has no NaN or infinity")
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = _exponent_form(number)
        # Go's encoder shortens a one-digit negative exponent: 1e-07 → 1e-7.
        if len(text) >= 4 and text[-4] == "e" and text[-3] == "-" and text[-2] == "0":
            text = text[:-2] + text[-1]
        return text
    return _fixed_form(number)


def _digits(number: float) -> tuple[str, str, int]:
    """Sign, shortest round-trip digits and point position p, so that |number| = 0.DIGITS × 10^p.

    Python's ``repr`` and Go's ``strconv`` both choose the shortest digits that read back exactly.
    """
    sign, digit_tuple, exponent = Decimal(repr(number)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite: callers rule out NaN and infinities
    digits = "".join(map(str, digit_tuple))
    return ("-" if sign else ""), digits, len(digits) + exponent


def _fixed_form(number: float) -> str:
    """strconv.FormatFloat(f, 'f', -1, 64)."""
    sign, digits, point = _digits(number)
    if digits == "0":
        return sign + "0"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _exponent_form(number: float) -> str:
    """strconv.FormatFloat(f, 'e', -1, 64): d.ddde±XX with at least two exponent digits."""
    sign, digits, point = _digits(number)
    exponent = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_JSON_SPECIAL = re.compile('["\\\\\x00-\x1f<>&\u2028\u2029\ud800-\udfff]')


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _JSON_ESCAPES:
        return _JSON_ESCAPES[char]
    if "\ud800" <= char <= "\udfff":  # a lone surrogate is invalid UTF-8 to Go: U+FFFD
        return "\ufffd"
    return f"\\u{ord(char):04x}"


def _go_json_string(text: str) -> str:
    """A JSON string as Go writes it: HTML-safe (``<``, ``>``, ``&``, U+2028, U+2029 escaped)."""
    return '"' + _JSON_SPECIAL.sub(_json_escape, text) + '"'


def _go_sprint(value: Any) -> str:
    """Go's ``fmt.Sprint`` (%v) of a decoded JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        _, _, point = _digits(value)
        exponent = point - 1
        if value != 0 and (exponent < -4 or exponent >= 21):
            return _exponent_form(value)
        return _fixed_form(value)
    if isinstance(value, dict):
        items = sorted((str(k), v) for k, v in value.items())
        return "map[" + " ".join(f"{k}:{_go_sprint(v)}" for k, v in items) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(_go_sprint(v) for v in value) + "]"
    if isinstance(value, int):
        try:
            return _go_sprint(float(value))
        except OverflowError:
            return str(value)
    return str(value)


# --- the search text ----------------------------------------------------------------------

_WHITESPACE = re.compile(r"\s+")


def readable(text: str) -> str:
    """An identifier made readable: underscores become spaces, runs of whitespace one space."""
    text = text.replace("_", " ")
    if text.isascii() and text.isprintable() and "  " not in text:
        # The usual case, and a quick one: printable ASCII has no whitespace but the space,
        # and no two spaces in a row means no run to shorten.
        return text.strip()
    return _WHITESPACE.sub(" ", text).strip()


def _leaves(value: Any) -> Iterator[str]:
    """The scalar leaves of a JSON-like value, depth first, maps in sorted key order; a map
    contributes its keys too (``{"region": "eu"}`` reads "region eu")."""
    if value is None:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        yield _go_json_number(value) if math.isfinite(value) else str(value)
    elif isinstance(value, dict):
        for key, item in sorted((str(k), v) for k, v in value.items()):
            yield key
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield str(value)


def content_text(value: Any) -> str:
    """The words of captured content, for the record's summary and search text: a string as
    it is; an object's entries in their order — a value that is prose (it has a space)
    stands on its own, any other value is labelled with its key (``speaker: Caroline``), as a
    bare value means little without it — nested objects and lists likewise; parts joined as
    sentences. Not JSON: punctuation and quoting are no words to search or embed by."""
    if isinstance(value, str):
        return value
    return _join(_content_parts(value, ""))


def _content_parts(value: Any, key: str) -> Iterator[str]:
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _content_parts(item, readable(str(name)))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _content_parts(item, key)
    elif value is not None:
        text = next(_leaves(value), "")
        if text.strip():
            yield text if (" " in text.strip() or not key) else f"{key}: {text}"


def _strings(value: Any) -> Iterator[str]:
    """The string leaves only (a plan step's parameters: names and paths, not flags and counts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for _, item in sorted((str(k), v) for k, v in value.items()):
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _join(parts: Iterable[str]) -> str:
    """Readable, non-blank parts, each kept once (first spelling wins), joined as sentences."""
    seen: set[str] = set()
    text = ""
    for part in parts:
        sentence = readable(part)
        key = sentence.casefold()
        if not sentence or key in seen:
            continue
        seen.add(key)
        if text:
            text += " " if text.endswith((".", "!", "?", ":", ";")) else ". "
        text += sentence
    return text


def _episodic_parts(payload: EpisodicPayload) -> Iterator[str]:
    summaries = [event.summary for event in payload.timeline if event.summary.strip()]
    said = "" if summaries else trigger_text(payload)
    yield said
    yield from summaries
    yield " ".join(dict.fromkeys(e.event_kind for e in payload.timeline if e.event_kind.strip()))
    # What each event was about, when its ref is written in words ("incident#903",
    # "deploy#v2.8.1"): an episode filed under an incident is about that incident even when
    # its summary never says so. Generated identifiers (UUIDs) carry no words and are left out.
    refs = (e.ref for e in payload.timeline if _worded(e.ref) and e.ref not in said)
    yield " ".join(dict.fromkeys(refs))
    yield " ".join(dict.fromkeys(node.tool for node in payload.tool_graph if node.tool.strip()))


_GENERATED_ID = re.compile(
    r"^(entity-|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)"
)


def _worded(ref: str) -> bool:
    """Whether a ref is written in words, not a generated id."""
    ref = ref.strip().lower()
    return bool(ref) and not _GENERATED_ID.match(ref)


def _working_parts(payload: WorkingPayload) -> Iterator[str]:
    yield payload.context_summary
    yield str(payload.state)
    yield from payload.next_actions
    yield from payload.open_questions
    yield payload.thread_id


def _semantic_parts(payload: SemanticPayload, named: dict[str, str]) -> Iterator[str]:
    subject = named.get(payload.subject, payload.subject)
    obj = named.get(payload.object, payload.object) if isinstance(payload.object, str) else None
    leaves = [obj] if obj is not None else list(_leaves(payload.object))
    yield " ".join((subject, payload.predicate, *leaves))


def subject_name(record: MemoryRecord) -> str:
    """A semantic record's subject as a person reads it: an entity id capture put in place of
    the subject's words read as those words; "" for another type of record."""
    payload = record.payload
    if not isinstance(payload, SemanticPayload):
        return ""
    return _entity_names(record).get(payload.subject, payload.subject)


def fact_in_words(record: MemoryRecord) -> str:
    """A semantic record's fact as a person reads it: ``Rex is_a dog``, an entity id capture
    put in place of the subject's (or object's) words shown as those words; "" for another
    type of record."""
    payload = record.payload
    if not isinstance(payload, SemanticPayload):
        return ""
    named = _entity_names(record)
    subject = named.get(payload.subject, payload.subject)
    if isinstance(payload.object, str):
        obj = named.get(payload.object, payload.object)
    else:
        obj = " ".join(_leaves(payload.object)) or go_json(payload.object)
    return " ".join(part for part in (subject, payload.predicate, obj) if part)


def entity_names(record: MemoryRecord | Payload | None) -> dict[str, str]:
    """Entity id -> the words the record itself used for that entity (see
    :func:`_entity_names`)."""
    return _entity_names(record)


def _entity_names(record: MemoryRecord | Payload | None) -> dict[str, str]:
    """Entity id -> the words the record itself used for that entity (its mentions' surfaces).

    Capture rewrites a fact's subject (and a string object) to the id of the entity it
    resolved the words to, and keeps the words as a mention carrying that id. Reading the id
    back as those words keeps the fact's subject in its search text and vector: "ci pipeline
    uses build system Bazel", not "<uuid> uses build system Bazel". Only the record's own
    content is read, so the text stays fixed at creation.
    """
    if not isinstance(record, MemoryRecord) or record.interpretation is None:
        return {}
    names: dict[str, str] = {}
    for mention in record.interpretation.mentions:
        if mention.canonical_entity_id and mention.surface.strip():
            names.setdefault(mention.canonical_entity_id, mention.surface.strip())
    return names


def _competence_parts(payload: CompetencePayload) -> Iterator[str]:
    yield payload.skill_name
    yield from (trigger.signal for trigger in payload.triggers)
    for step in payload.recipe:
        yield " ".join((step.step, step.tool))
        yield step.validation
    yield " ".join(payload.required_tools)
    yield from payload.failure_modes
    yield from payload.fallbacks


def _plan_parts(payload: PlanGraphPayload) -> Iterator[str]:
    yield payload.intent
    for node in payload.nodes:
        yield " ".join((node.op, *_strings(node.params)))


def _entity_parts(payload: EntityPayload) -> Iterator[str]:
    yield payload.canonical_name
    yield from (alias.value for alias in payload.aliases)
    # the reference's EntityTypes: primary type first, blanks dropped, case-insensitive dedup
    types: dict[str, str] = {}
    for entity_type in (payload.primary_type, *payload.types):
        types.setdefault(entity_type.strip().casefold(), entity_type.strip())
    types.pop("", None)
    yield " ".join(types.values())
    yield payload.summary


def search_text(record: MemoryRecord | Payload | None) -> str:
    """The text membrane_es embeds and indexes for a record (or a bare payload): richer than the
    reference's trigger text, built from the structure each memory type carries, plus the tags.

    episodic: every timeline summary (or the trigger text when none has one), the event kinds,
    the tools of the tool graph; working: context summary, state, next actions, open questions,
    thread id; semantic: subject, predicate and the object's words (a subject or object capture
    rewrote to an entity id reads as the words of the record's own mention of that entity);
    competence: skill name, trigger signals, recipe steps with their tools and validations,
    required tools, failure modes, fallbacks; plan graph: intent, each node's op with its string
    parameters; entity: canonical name, aliases, types, summary. Identifiers read as words
    (underscores become spaces), a part repeated verbatim is kept once, and parts are joined
    as sentences.
    """
    payload = _payload_of(record)
    parts: Iterable[str]
    if isinstance(payload, EpisodicPayload):
        parts = _episodic_parts(payload)
    elif isinstance(payload, WorkingPayload):
        parts = _working_parts(payload)
    elif isinstance(payload, SemanticPayload):
        parts = _semantic_parts(payload, _entity_names(record))
    elif isinstance(payload, CompetencePayload):
        parts = _competence_parts(payload)
    elif isinstance(payload, PlanGraphPayload):
        parts = _plan_parts(payload)
    elif isinstance(payload, EntityPayload):
        parts = _entity_parts(payload)
    else:
        parts = ()
    tags = record.tags if isinstance(record, MemoryRecord) else []
    return _join([*parts, " ".join(tags)])
