"""What a record says, on one line, as a language model should read it.

A context line shows who said what, in the words and names a person used:

- a conversation turn as ``speaker: words`` — captured as ``{"speaker", "text"}``,
  ``{"role", "content"}`` (and the other keys of :data:`SPEAKER_KEYS` / :data:`WORDS_KEYS`),
  a list of such messages or ``{"messages": [...]}``, or the same as a JSON string; several
  messages in one capture read ``first words / assistant: next words``;
- a fact as ``Dana city: Faro`` — its subject (and a string object) named: an entity id reads
  as the words the record itself used for it, else as the entity's canonical name when the
  caller may read that entity, else as the id;
- a tool call by the tool's own name, with its arguments and result: ``search_flights(to:
  Tokyo) → cheapest: JAL 800 USD``;
- other structured content as ``key: value; key: value`` with keys and values as given — not
  made "readable" (``search_flights`` stays ``search_flights``);
- any other record by its reference text (:func:`~membrane_es.embedding.record_text.trigger_text`),
  else its search text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from membrane_es.embedding.record_text import entity_names, search_text, trigger_text
from membrane_es.schema.payloads import EpisodicPayload, SemanticPayload
from membrane_es.schema.records import MemoryRecord

# Keys of captured content whose value says who spoke, and whose value is the words.
SPEAKER_KEYS = ("speaker", "role", "author", "user", "from", "name")
WORDS_KEYS = ("text", "content", "message", "utterance", "body")
MESSAGE_LISTS = ("messages", "turns", "conversation")
FACT_KEYS = ("subject", "predicate", "object")
_SPACES = re.compile(r"\s+")
NEXT_MESSAGE = " / "  # between the messages of one capture

Namer = Callable[[str], str | None]
"""An entity id -> the entity's name (None: not an entity the caller may read)."""


def no_names(_: str) -> str | None:
    return None


def one_line(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def captured_content(record: MemoryRecord) -> Any:
    """The raw content a captured episode was made from (None for any other record); a JSON
    object or list given as a string is read as what it encodes."""
    payload = record.payload
    if not isinstance(payload, EpisodicPayload) or payload.environment is None:
        return None
    context = payload.environment.context
    content = context.get("capture_content") if isinstance(context, dict) else None
    if isinstance(content, str) and content.lstrip()[:1] in ("{", "["):
        try:
            decoded = json.loads(content)
        except ValueError:
            return content
        return decoded if isinstance(decoded, dict | list) else content
    return content


def said(record: MemoryRecord, name: Namer = no_names) -> tuple[str, str]:
    """``(who, words)`` of a record: who said it (empty when nobody is named) and its words
    on one line (empty for a record with none, such as an erased one)."""
    content = captured_content(record)
    if content is not None:
        who, words = _said_in(content, name)
        if words:
            return who, words
    payload = record.payload
    if isinstance(payload, SemanticPayload):
        return "", fact_words(record, name)
    if isinstance(payload, EpisodicPayload) and payload.tool_graph:
        calls = [_call(node.tool, node.args, node.result) for node in payload.tool_graph]
        return "", one_line("; ".join(call for call in calls if call))
    return "", one_line(trigger_text(record) or search_text(record))


def speaker_of(record: MemoryRecord) -> str:
    """Who said it: the speaker (role, author…) of captured content, else empty."""
    return said(record)[0]


def words_of(record: MemoryRecord) -> str:
    """The words of a record on one line (see the module's description)."""
    return said(record)[1]


def _said_in(content: Any, name: Namer) -> tuple[str, str]:
    if isinstance(content, str):
        return "", one_line(content)
    if isinstance(content, dict):
        for key in MESSAGE_LISTS:
            if isinstance(content.get(key), list) and content[key]:
                return _said_in(content[key], name)
        message = _message(content)
        if message is not None:
            return message
        if all(key in content for key in FACT_KEYS):
            return "", _fact(
                str(content["subject"]), str(content["predicate"]), content["object"], name
            )
        return "", one_line(plain(content))
    if isinstance(content, list):
        messages = [_message(item) if isinstance(item, dict) else None for item in content]
        if messages and all(message is not None for message in messages):
            first, *rest = [m for m in messages if m is not None]
            words = NEXT_MESSAGE.join(
                [first[1], *(f"{who}: {words}" if who else words for who, words in rest)]
            )
            return first[0], words
        return "", one_line(plain(content))
    return "", one_line(plain(content))


def _message(content: dict[str, Any]) -> tuple[str, str] | None:
    """``(speaker, words)`` of a message-shaped object, else None."""
    words = next(
        (one_line(v) for k in WORDS_KEYS if isinstance(v := content.get(k), str) and v.strip()),
        "",
    )
    if not words:
        return None
    who = next(
        (one_line(v) for k in SPEAKER_KEYS if isinstance(v := content.get(k), str) and v.strip()),
        "",
    )
    return who, words


def fact_words(record: MemoryRecord, name: Namer = no_names) -> str:
    """A fact as ``subject predicate: object``, entity ids named (see the module)."""
    payload = record.payload
    if not isinstance(payload, SemanticPayload):
        return ""
    own = entity_names(record)

    def named(value: str) -> str | None:
        return own.get(value) or name(value)

    return _fact(payload.subject, payload.predicate, payload.object, named)


def fact_object(record: MemoryRecord, name: Namer = no_names) -> str:
    """A fact's object in words (an entity id named), else ""."""
    payload = record.payload
    if not isinstance(payload, SemanticPayload):
        return ""
    own = entity_names(record)
    return _value(payload.object, lambda value: own.get(value) or name(value))


def _fact(subject: str, predicate: str, obj: Any, name: Namer) -> str:
    head = " ".join(part for part in (name(subject) or subject, predicate) if part)
    value = _value(obj, name)
    return one_line(f"{head}: {value}" if value else head)


def _value(obj: Any, name: Namer) -> str:
    if isinstance(obj, str):
        return name(obj) or obj
    return plain(obj)


def _call(tool: str, args: dict[str, Any], result: Any) -> str:
    call = f"{tool}({plain(args)})" if tool else plain(args)
    outcome = plain(result)
    return f"{call} → {outcome}" if outcome else call


def plain(value: Any) -> str:
    """A JSON-like value as words: ``key: value`` pairs joined by ``; ``, list items by
    ``, ``, nested objects in parentheses; keys and strings exactly as given."""
    return "".join(_plain(value, top=True))


def _plain(value: Any, top: bool = False) -> Iterator[str]:
    if value is None:
        return
    if isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, float):
        yield repr(value) if math.isfinite(value) and value != int(value) else _integral(value)
    elif isinstance(value, int | str):
        yield str(value)
    elif isinstance(value, dict):
        parts = [f"{key}: {''.join(_plain(item))}" for key, item in value.items()]
        text = "; ".join(parts)
        yield text if top else f"({text})"
    elif isinstance(value, list | tuple):
        yield ", ".join("".join(_plain(item)) for item in value)
    else:
        yield str(value)


def _integral(value: float) -> str:
    return str(int(value)) if math.isfinite(value) else str(value)
