"""Input validation: the limits of the reference gRPC boundary, applied to every entry point.

Every check raises :class:`~membrane_es.errors.ValidationError` naming the field, before
anything is written.
"""

from __future__ import annotations

import math
import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from membrane_es.errors import ValidationError
from membrane_es.schema.enums import MemoryType, RevisionStatus, Sensitivity
from membrane_es.schema.payloads import PAYLOAD_TYPES, SemanticPayload
from membrane_es.schema.records import DecayProfile, MemoryRecord, TrustContext
from membrane_es.schema.timestamps import utc

S = TypeVar("S", bound=msgspec.Struct)
Vector = npt.NDArray[np.float32]
VectorInput = Sequence[float] | Vector  # a caller's vector: a list of numbers or an array

MAX_STRING_BYTES = 100_000
MAX_TAGS = 100
MAX_TAG_BYTES = 256
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
MAX_IDS = 10_000
MAX_LIMIT = 10_000

_PAYLOAD_KINDS = tuple(t.value for t in MemoryType)
_AT_PATH = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(MemoryRecord)
# MessagePack's bytes that start a map or an array (fixmap, fixarray, array 16/32, map 16/32).
_CONTAINER_HEADERS = bytes(range(0x80, 0xA0)) + bytes(range(0xDC, 0xE0))


def check_text(field: str, value: str, *, required: bool = False) -> str:
    """A string of at most 100,000 UTF-8 bytes (and non-empty when required), storable as
    UTF-8 (no lone surrogates)."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise ValidationError(field, f"{field} is required")
    if not value.isascii():
        _check_utf8(field, value)
    if len(value) > MAX_STRING_BYTES // 4 and len(value.encode()) > MAX_STRING_BYTES:
        raise ValidationError(field, f"{field} exceeds maximum length of {MAX_STRING_BYTES}")
    return value


def _check_utf8(field: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            field, f"not valid Unicode text: lone surrogate at position {exc.start}"
        ) from None


# What the event codec (MessagePack) can hold: integers of at most 64 bits.
_MIN_INT = -(1 << 63)
_MAX_INT = (1 << 64) - 1


def check_storable(field: str, value: Any) -> None:
    """Plain data the log can store: JSON-like values (dicts with string keys, lists, text,
    64-bit integers, floats, booleans, None), msgspec Structs, datetimes and enums of them.

    Raises :class:`ValidationError` naming the path of the first value that is not.
    """
    problem = _unstorable(value, field, 0)
    if problem is not None:
        raise ValidationError(*problem)


MAX_DEPTH = 100  # deeper than protobuf's own nesting limit, so wire input never reaches it


def _unstorable(value: Any, path: str, depth: int) -> tuple[str, str] | None:
    if depth > MAX_DEPTH:
        return path, f"nested deeper than {MAX_DEPTH} levels"
    if value is None or value is msgspec.UNSET or isinstance(value, bool | float | datetime | Enum):
        return None  # UNSET: a field left out (never encoded)
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return path, f"not valid Unicode text: lone surrogate at position {exc.start}"
        return None
    if isinstance(value, int):
        if not _MIN_INT <= value <= _MAX_INT:
            return path, "integer out of range (64 bits at most)"
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"object keys must be strings, got {type(key).__name__}"
            if _unstorable(key, path, depth + 1) is not None:
                # The key itself is not text the log (or an error message) can hold.
                printable = key.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                return f"{path}.{printable}", "not valid Unicode text: a lone surrogate in a key"
            problem = _unstorable(item, f"{path}.{key}", depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            problem = _unstorable(item, f"{path}[{i}]", depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            problem = _unstorable(getattr(value, name), f"{path}.{name}", depth + 1)
            if problem is not None:
                return problem
        return None
    return path, f"must be JSON data, not {type(value).__name__}"


def check_finite(field: str, value: Any) -> None:
    """No NaN or infinity anywhere in ``value`` (JSON-like data or a Struct): JSON has no
    such numbers (they would be stored as null), and the gRPC edge refuses them too.

    Raises :class:`ValidationError` naming the path of the first one.
    """
    if _finite_by_encoding(value) or _all_finite(value, 0):
        return  # the usual case: checked once without naming every path on the way
    problem = _non_finite(value, field, 0)
    if problem is not None:
        raise ValidationError(problem, "must be a finite number (JSON has no NaN or infinity)")


# MessagePack writes every float as 0xcb and its eight IEEE 754 bytes, big-endian: a NaN or
# an infinity has all eleven exponent bits set, so its first two bytes are 7ff… or fff….
_MSGPACK = msgspec.msgpack.Encoder()
_NON_FINITE_FLOAT = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")


def _finite_by_encoding(value: Any) -> bool:
    """True when ``value`` holds no NaN or infinity, found in C: encoded as MessagePack
    (every Struct field, Mapping value and sequence item, as :func:`_all_finite` walks them),
    no float in it has its exponent bits all set. False when that cannot tell (a type that
    does not encode, or those bytes seen, in a string perhaps): the walk then decides, so
    the answer is always the walk's, only sooner."""
    try:
        encoded = _MSGPACK.encode(value)
    except (TypeError, ValueError, RecursionError, OverflowError, msgspec.MsgspecError):
        return False
    return _NON_FINITE_FLOAT.search(encoded) is None


def _all_finite(value: Any, depth: int) -> bool:
    """Whether :func:`_non_finite` would find nothing (the same walk, no paths built)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > MAX_DEPTH:
        return True
    depth += 1
    if isinstance(value, Mapping):
        for item in value.values():
            if not _all_finite(item, depth):
                return False
    elif isinstance(value, list | tuple):
        for item in value:
            if not _all_finite(item, depth):
                return False
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            if not _all_finite(getattr(value, name), depth):
                return False
    return True


def _non_finite(value: Any, path: str, depth: int) -> str | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if depth > MAX_DEPTH:  # too deep to store: check_storable names it
        return None
    if isinstance(value, Mapping):
        items: Iterable[tuple[str, Any]] = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, msgspec.Struct):
        items = ((f"{path}.{k}", getattr(value, k)) for k in value.__struct_fields__)
    else:
        return None
    for where, item in items:
        found = _non_finite(item, where, depth + 1)
        if found is not None:
            return found
    return None


# Kept as they are when a Struct is checked, so that a datetime or bytes where text belongs
# is refused rather than turned into text.
_NOT_TURNED_INTO_TEXT = (
    datetime,
    date,
    time,
    timedelta,
    bytes,
    bytearray,
    memoryview,
    uuid.UUID,
    Decimal,
)


def check_struct(field: str, value: Any, kind: type[S], shape: type[Any] | None = None) -> S:
    """A Struct made in Python, checked against its declared types and constraints (its
    constructor checks none of them), and storable; returns a private copy.

    ``shape``: check against this Struct's fields instead (same names, with the constraints
    ``kind`` does not declare); the value given is then returned as it is.
    """
    if not isinstance(value, kind):
        raise ValidationError(field, f"must be a {kind.__name__}, not {type(value).__name__}")
    try:
        plain = msgspec.to_builtins(value, builtin_types=_NOT_TURNED_INTO_TEXT)
    except (TypeError, ValueError, OverflowError) as exc:
        check_storable(field, value)  # names the offending value's path
        raise ValidationError(field, str(exc)) from None
    try:
        checked = msgspec.convert(plain, shape or kind, strict=True)
    except msgspec.ValidationError as exc:
        raise _as_validation_error(exc, field) from None
    except UnicodeEncodeError:
        raise _unencodable(plain, field) from None
    check_storable(field, checked)  # lone surrogates
    return value if shape is not None else checked


def check_tags(field: str, tags: Iterable[str]) -> list[str]:
    """At most 100 distinct tags of at most 256 bytes each."""
    if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
        raise ValidationError(field, f"must be a list of strings, not {type(tags).__name__}")
    tags = list(tags)
    if len(tags) > MAX_TAGS:
        raise ValidationError(field, f"too many tags: {len(tags)} (max {MAX_TAGS})")
    seen: set[str] = set()
    for i, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise ValidationError(f"{field}[{i}]", "tag must be a string")
        check_text(f"{field}[{i}]", tag)
        if len(tag.encode()) > MAX_TAG_BYTES:
            raise ValidationError(f"{field}[{i}]", f"tag exceeds maximum length of {MAX_TAG_BYTES}")
        if tag in seen:
            raise ValidationError(f"{field}[{i}]", f"duplicate tag {tag!r}")
        seen.add(tag)
    return tags


def check_amount(field: str, value: float) -> float:
    """A non-negative, finite number (penalty amounts, thresholds)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"{field} must be a number")
    if not math.isfinite(value) or value < 0:
        raise ValidationError(field, f"{field} must be non-negative and finite")
    return float(value)


SENSITIVITY_LEVELS = ", ".join(level.value for level in Sensitivity)


def check_sensitivity(field: str, value: Any, *, required: bool = False) -> str:
    """Empty (unless ``required``), or one of the five sensitivity levels; a ``str`` enum
    member becomes its plain value."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    text = str.__str__(value)
    if not text:
        if required:
            raise ValidationError(field, f"{field} is required")
        return text
    if text not in Sensitivity.__members__.values():
        raise ValidationError(field, f"{field} must be one of: {SENSITIVITY_LEVELS}")
    return text


def check_unit_interval(field: str, value: float) -> float:
    """A finite number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"{field} must be a number")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValidationError(field, f"{field} must be in range [0, 1]")
    return float(value)


def check_limit(field: str, value: int, *, low: int = 0, high: int = MAX_LIMIT) -> int:
    """An integer in [low, high] (result limits, hop counts)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"{field} must be an integer")
    if not low <= value <= high:
        raise ValidationError(field, f"{field} must be between {low} and {high}")
    return value


def check_decay(field: str, decay: DecayProfile) -> DecayProfile:
    """A decay profile's bounds: a positive half-life, a non-negative maximum age, a floor
    and a reinforcement gain that are amounts."""
    if decay.half_life_seconds <= 0:
        raise ValidationError(f"{field}.half_life_seconds", "half_life_seconds must be > 0")
    if decay.max_age_seconds < 0:
        raise ValidationError(f"{field}.max_age_seconds", "max_age_seconds must be >= 0")
    check_amount(f"{field}.min_salience", decay.min_salience)
    check_amount(f"{field}.reinforcement_gain", decay.reinforcement_gain)
    return decay


def check_flag(field: str, value: bool) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"{field} must be true or false")
    return value


def check_moment(field: str, value: datetime) -> datetime:
    """A timezone-aware datetime, as UTC."""
    if not isinstance(value, datetime):
        raise ValidationError(field, f"{field} must be a datetime")
    try:
        return utc(value)
    except ValueError as exc:
        raise ValidationError(field, str(exc)) from None


def check_memory_types(field: str, values: Iterable[str] | None) -> list[MemoryType]:
    """A list of memory types (an empty list or None: every type)."""
    if values is None:
        return []
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValidationError(field, f"{field} must be a list of memory types")
    types = []
    for i, value in enumerate(values):
        try:
            types.append(MemoryType(value))
        except ValueError:
            raise ValidationError(
                f"{field}[{i}]",
                f"{field}[{i}] must be one of: " + ", ".join(t.value for t in MemoryType),
            ) from None
    return types


def check_vector(field: str, values: Iterable[float] | Vector) -> Vector:
    """A non-empty sequence of finite numbers (an embedding), as a private float32 array.

    Checked with numpy, not value by value: a 384-dimension list costs microseconds. Booleans
    are not numbers here, and a value too large for float32 is not finite."""
    if isinstance(values, np.ndarray):
        array = values
    else:
        if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
            raise ValidationError(field, f"{field} must be a list of numbers")
        items = values if isinstance(values, list | tuple) else list(values)
        if bool in set(map(type, items)):
            raise ValidationError(field, f"{field} must be a non-empty list of finite numbers")
        try:
            array = np.asarray(items)
        except (TypeError, ValueError, OverflowError):
            raise ValidationError(
                field, f"{field} must be a non-empty list of finite numbers"
            ) from None
    if array.ndim != 1 or not array.size or array.dtype.kind not in "fiu":
        raise ValidationError(field, f"{field} must be a non-empty list of finite numbers")
    with np.errstate(over="ignore"):
        vector: Vector = np.array(array, dtype=np.float32)
    if not np.isfinite(vector).all():
        raise ValidationError(field, f"{field} must be a non-empty list of finite numbers")
    return vector


def check_path(field: str, value: str | os.PathLike[str]) -> Path:
    """A filesystem path given as text or a path object, storable as UTF-8."""
    if isinstance(value, bytes) or not isinstance(value, str | os.PathLike):
        raise ValidationError(field, f"{field} must be a path, not {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise ValidationError(field, f"{field} must be a path as text, not bytes")
    # Checked as given: Path("") is "." (the working directory), which nobody meant.
    check_text(field, text, required=True)
    if "\x00" in text:
        raise ValidationError(field, f"{field} must not contain NUL characters")
    return Path(text)


def check_chain_key(chain_key: bytes | None) -> None:
    """A chain key is non-empty bytes (or None: a plain chain)."""
    if chain_key is not None and (not isinstance(chain_key, bytes) or not chain_key):
        raise ValidationError("chain_key", "chain_key must be non-empty bytes")


def check_settings(field: str, value: Mapping[str, str] | None) -> dict[str, str]:
    """Extra eventsourcing settings: a mapping of text to text (None: none)."""
    settings = as_dict(field, value)
    for key, item in settings.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ValidationError(f"{field}.{key}", "settings must map text to text")
    return settings


def as_list(field: str, values: Iterable[Any] | None) -> list[Any]:
    """A list argument (None: empty); anything but a sequence of values is refused."""
    if values is None:
        return []
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ValidationError(field, f"{field} must be a list, not {type(values).__name__}")
    return list(values)


def as_dict(field: str, value: Mapping[str, Any] | None) -> dict[str, Any]:
    """A mapping argument (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"{field} must be an object, not {type(value).__name__}")
    return dict(value)


def check_id(field: str, value: str) -> str:
    """A non-empty record id."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, f"{field} is required")
    return check_text(field, value)


def check_ids(field: str, ids: Iterable[str]) -> list[str]:
    """Between 1 and 10,000 record ids (merge sources)."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise ValidationError(field, f"must be a list of ids, not {type(ids).__name__}")
    ids = list(ids)
    if not ids:
        raise ValidationError(field, f"{field} must not be empty")
    if len(ids) > MAX_IDS:
        raise ValidationError(field, f"too many ids: {len(ids)} (max {MAX_IDS})")
    for i, record_id in enumerate(ids):
        check_id(f"{field}[{i}]", record_id)
    return ids


def check_trust(trust: TrustContext | None, field: str = "trust") -> TrustContext:
    """A trust context is required on every read; its sensitivity must be a known level."""
    if trust is None:
        raise ValidationError(field, "trust context is required")
    if isinstance(trust, Mapping):
        trust = _convert(trust, TrustContext, field)
    if not isinstance(trust, TrustContext):
        raise ValidationError(field, "must be a TrustContext")
    try:
        level = Sensitivity(trust.max_sensitivity)
    except ValueError:
        raise ValidationError(
            f"{field}.max_sensitivity",
            "must be one of: " + ", ".join(s.value for s in Sensitivity),
        ) from None
    if trust.max_sensitivity is not level:  # one made in Python with the level's text
        trust = msgspec.structs.replace(trust, max_sensitivity=level)
    return trust


def coerce_record(value: MemoryRecord | Mapping[str, Any], field: str = "record") -> MemoryRecord:
    """A validated private copy of a record given as a :class:`MemoryRecord` or a dict.

    Dicts may use the reference JSON form (flat payload with ``kind``) or the SDK form
    (payload wrapped under its variant name); a payload without ``kind`` takes the record's
    type. The copy means later changes to the caller's object cannot reach stored state.
    """
    if value is None:
        raise ValidationError(field, f"{field} is required")
    if isinstance(value, Mapping):
        record = _convert(_normalise_record_dict(value), MemoryRecord, field)
        raw = _encode_record(record, field)
    elif isinstance(value, MemoryRecord):
        _check_finite_scores(value, field)
        raw = _encode_record(value, field)
        record = _decode(raw, field)
    else:
        kind = type(value).__name__
        raise ValidationError(field, f"must be a MemoryRecord or a dict, not {kind}")
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ValidationError(
            f"{field}.payload", f"exceeds maximum payload size of {MAX_PAYLOAD_BYTES} bytes"
        )
    validate_record(record, field)
    check_fact_stated(record, field)
    if record.resolution is not None:  # a write's answer handed back: not part of a record
        record = msgspec.structs.replace(record, resolution=None)
    return record


def check_fact_stated(record: MemoryRecord, field: str = "record") -> None:
    """A semantic record given by a caller states a fact about something: a subject and a
    predicate that are not blank (an empty fact would be stored, found and trusted as one).
    The object may be absent or empty: an entry of the entries API with a title and no
    content is such a fact (its title is the subject, its type the predicate)."""
    payload = record.payload
    if not isinstance(payload, SemanticPayload):
        return
    where = f"{field}.payload"
    if not payload.subject.strip():
        raise ValidationError(f"{where}.subject", "required: the fact's subject, not blank")
    if not payload.predicate.strip():
        raise ValidationError(f"{where}.predicate", "required: the fact's predicate, not blank")


def validate_record(record: MemoryRecord, field: str = "record") -> None:
    """The record-level rules, in the reference order, plus the checks its store enforced."""
    _check_finite_scores(record, field)
    check_finite(f"{field}.payload", record.payload)
    if record.id:
        check_text(f"{field}.id", record.id)
    if not 0.0 <= record.confidence <= 1.0:
        raise ValidationError(f"{field}.confidence", "confidence must be in range [0, 1]")
    if record.salience < 0:
        raise ValidationError(f"{field}.salience", "salience must be >= 0")
    if record.payload is None:
        raise ValidationError(f"{field}.payload", "payload is required")
    if PAYLOAD_TYPES[record.type] is not type(record.payload):
        raise ValidationError(f"{field}.payload", "payload kind must match memory type")
    check_text(f"{field}.scope", record.scope)
    check_tags(f"{field}.tags", record.tags)
    check_decay(f"{field}.lifecycle.decay", record.lifecycle.decay)
    for i, relation in enumerate(record.relations):
        where = f"{field}.relations[{i}]"
        if not relation.predicate.strip():
            raise ValidationError(f"{where}.predicate", "predicate is required")
        check_id(f"{where}.target_id", relation.target_id)
        check_unit_interval(f"{where}.weight", relation.weight)
    if isinstance(record.payload, SemanticPayload) and record.payload.revision is not None:
        status = record.payload.revision.status
        if status and status not in {s.value for s in RevisionStatus}:
            raise ValidationError(
                f"{field}.payload.revision.status",
                "status must be one of: " + ", ".join(s.value for s in RevisionStatus),
            )


def require_evidence(record: MemoryRecord, field: str = "record") -> None:
    """A semantic replacement must cite evidence or provenance (reference §4.1)."""
    payload = record.payload
    if (
        record.type is MemoryType.SEMANTIC
        and isinstance(payload, SemanticPayload)
        and not payload.evidence
        and not record.provenance.sources
    ):
        named = f"record {record.id}" if record.id else "the record"
        raise ValidationError(
            f"{field}.payload.evidence",
            f"semantic revision requires evidence: {named} has no evidence references or "
            f"provenance sources; give payload.evidence: [{EVIDENCE_SHAPE}], or "
            f"provenance.sources: [{SOURCE_SHAPE}]",
        )


def _check_finite_scores(record: MemoryRecord, field: str) -> None:
    for name in ("confidence", "salience"):
        value = getattr(record, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(f"{field}.{name}", f"{name} must be a number")
        if not math.isfinite(value):
            raise ValidationError(f"{field}.{name}", f"{name} must be finite")


def _encode_record(record: MemoryRecord, field: str) -> bytes:
    """The record as the codec stores it; what it cannot hold is named by its path."""
    try:
        raw = _record_encoder.encode(record)
    except RecursionError:
        raise ValidationError(field, f"nested deeper than {MAX_DEPTH} levels") from None
    except (TypeError, ValueError, OverflowError) as exc:
        check_storable(field, record)  # names the offending value's path
        raise ValidationError(field, str(exc)) from None
    # Counted in C first: only a record with more list and map headers than the limit (or
    # text bytes that look like them) can nest too deep for the code that reads its
    # payload back (its search text, its summary), which recurses.
    if len(raw) - len(raw.translate(None, _CONTAINER_HEADERS)) > MAX_DEPTH:
        check_storable(field, record)
    return raw


def _normalise_record_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    """Accept the SDK's dict shapes: oneof-wrapped payloads, bare-string aliases, legacy keys."""
    record = dict(value)
    payload = record.get("payload")
    if isinstance(payload, Mapping):
        payload = dict(payload)
        wrapped = [k for k in _PAYLOAD_KINDS if k in payload and isinstance(payload[k], Mapping)]
        if wrapped and "kind" not in payload:
            payload = {**payload[wrapped[0]], "kind": wrapped[0]}
        elif not payload:
            payload = None
        elif "kind" not in payload or not payload["kind"]:
            payload["kind"] = record.get("type")
        aliases = None if payload is None else payload.get("aliases") or []
        if payload is not None and payload.get("kind") == "entity" and isinstance(aliases, list):
            payload["aliases"] = [{"value": a} if isinstance(a, str) else a for a in aliases]
        record["payload"] = payload
    relations = record.get("relations")
    if isinstance(relations, list):
        record["relations"] = [
            {("predicate" if k == "kind" and "predicate" not in r else k): v for k, v in r.items()}
            if isinstance(r, Mapping)
            else r
            for r in relations
        ]
    return record


def _convert(value: Any, kind: type[Any], field: str) -> Any:
    try:
        return msgspec.convert(value, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise _as_validation_error(exc, field) from None
    except UnicodeEncodeError:
        raise _unencodable(value, field) from None


def converted(field: str, value: Any, kind: Any, *, from_attributes: bool = False) -> Any:
    """``msgspec.convert`` of input given by a caller: its errors, a lone surrogate among
    them, as a :class:`ValidationError` naming the field (and the path inside it)."""
    try:
        return msgspec.convert(value, kind, from_attributes=from_attributes)
    except msgspec.ValidationError as exc:
        raise _as_validation_error(exc, field) from None
    except UnicodeEncodeError:
        raise _unencodable(value, field) from None


def _unencodable(value: Any, field: str) -> ValidationError:
    """msgspec reads a string where it expects another type (a number, a list…) as UTF-8: a
    lone surrogate there fails before the type check does. Name where it is."""
    problem = _unstorable(value, field, 0)
    if problem is not None:
        return ValidationError(*problem)
    return ValidationError(field, "not valid Unicode text: a lone surrogate")


def _decode(raw: bytes, field: str) -> MemoryRecord:
    try:
        return _record_decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise _as_validation_error(exc, field) from None


def _as_validation_error(exc: msgspec.ValidationError, field: str) -> ValidationError:
    """msgspec says "Expected `int`, got `str` - at `$.a.b`"; name the field ``record.a.b``."""
    match = _AT_PATH.match(str(exc))
    assert match is not None
    path = match.group("path") or ""
    return ValidationError(field + path, match.group("message") + _shape_of(path))


# How an evidence reference and a provenance source are written: said beside an error in
# one, since the two lists look alike and take different fields.
EVIDENCE_SHAPE = '{"source_type": "observation", "source_id": "release-42"}'
SOURCE_SHAPE = '{"kind": "event|artifact|tool_call|observation|outcome", "ref": "release-42"}'
_SHAPES = (
    (
        re.compile(r"\.evidence(\[\d+\])?$"),
        f"; an evidence reference is {EVIDENCE_SHAPE} (timestamp optional)",
    ),
    (
        re.compile(r"\.sources(\[\d+\])?$"),
        f"; a provenance source is {SOURCE_SHAPE} (hash, created_by, timestamp optional)",
    ),
)


def _shape_of(path: str) -> str:
    """The expected shape of the part at ``path``, where it is one users write by hand."""
    return next((shape for pattern, shape in _SHAPES if pattern.search(path)), "")
