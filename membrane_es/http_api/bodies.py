"""Request bodies decoded strictly, with errors that name the field.

Litestar converts a body to its type with msgspec's *lax* rules, so ``"conversation_id":
"17"`` would pass as 17, where Arbiter (Go, int64) refuses it. And its errors for an empty
body or text msgspec cannot decode say nothing useful (``data: 'data'``, "Input data was
truncated"). :class:`StrictBody` is a DTO that takes the body over: JSON decoded straight into
the struct, types as declared, every refusal a :class:`ValidationError` naming the field (or
``body`` for the body as a whole), which the app answers with 400. The OpenAPI document keeps
the struct's schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec
from litestar.dto import AbstractDTO
from litestar.typing import FieldDefinition

from membrane_es.errors import ValidationError

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator
    from litestar.dto.data_structures import DTOFieldDefinition
    from litestar.openapi.spec import Reference, Schema
    from litestar.types.serialization import LitestarEncodableType

T = TypeVar("T")

BODY = "body"
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_body(raw: bytes, kind: type[T]) -> T:
    """The body as ``kind``, decoded with strict types; anything else is a
    :class:`ValidationError` naming the field at fault (``body``: the body as a whole)."""
    if not raw.strip():
        raise ValidationError(BODY, "a JSON object is required; the body is empty")
    try:
        decoded = msgspec.json.decode(raw, type=kind, strict=True)
    except msgspec.ValidationError as error:
        raise _field_error(str(error)) from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise _malformed(raw) from None
    _refuse_unknown_fields(msgspec.json.decode(raw), kind)
    return decoded


def _refuse_unknown_fields(value: Any, kind: type[Any]) -> None:
    """A field the body's type does not have is a mistake (a misspelt name would otherwise
    be dropped in silence, and the write made without it): refused, naming the first."""
    if not isinstance(value, dict) or not msgspec.structs.fields(kind):
        return
    known = {field.encode_name for field in msgspec.structs.fields(kind)}
    unknown = sorted(name for name in value if name not in known)
    if unknown:
        raise ValidationError(
            unknown[0], f"unknown field; the fields are {', '.join(sorted(known))}"
        )


def _field_error(message: str) -> ValidationError:
    """msgspec's "Expected `int | null`, got `str` - at `$.conversation_id`" as an error on
    ``conversation_id``."""
    missing = _MISSING.match(message)
    if missing:
        return ValidationError(missing["field"], "required")
    at = _AT.search(message)
    if at is None:
        return ValidationError(BODY, message)
    field = at["path"].removeprefix(".") or BODY
    return ValidationError(field, message[: at.start()])


def _malformed(raw: bytes) -> ValidationError:
    """Why msgspec could not read the body. It reports a lone UTF-16 surrogate escape as
    truncated input, with no field: Python's reader accepts one, so a body it reads is
    searched for the string that holds it."""
    try:
        value = json.loads(raw)
    except UnicodeDecodeError:
        return ValidationError(BODY, "not UTF-8 text")
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        return ValidationError(BODY, f"not valid JSON: {error.msg} ({where})")
    field = _surrogate_at(value, "")
    if field is None:  # what Python reads and JSON does not allow: NaN, Infinity
        return ValidationError(BODY, "not valid JSON")
    return ValidationError(field or BODY, "not text: holds a lone UTF-16 surrogate escape")


def _surrogate_at(value: Any, path: str) -> str | None:
    """The path (``title``, ``tags[2]``) of the first string holding a surrogate."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if _SURROGATE.search(key):
                return path or BODY
            items.append((f"{path}.{key}" if path else key, item))
    elif isinstance(value, list):
        items = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    for item_path, item in items:
        found = _surrogate_at(item, item_path)
        if found is not None:
            return found
    return None


class StrictBody(AbstractDTO[T], Generic[T]):
    """A request body decoded by :func:`decode_body` (``dto=StrictBody[NewEntry]``).

    Litestar hands a DTO the raw bytes of a non-empty body; an empty one never reaches it, so
    a handler that needs a body declares ``data`` optional and calls :func:`require`."""

    def decode_bytes(self, value: bytes) -> Any:
        return decode_body(value, self.model_type)

    def decode_builtins(self, value: dict[str, Any]) -> Any:
        try:
            decoded = msgspec.convert(value, self.model_type, strict=True)
        except msgspec.ValidationError as error:
            raise _field_error(str(error)) from None
        _refuse_unknown_fields(value, self.model_type)
        return decoded

    def data_to_encodable_type(self, data: Any) -> LitestarEncodableType:
        return data  # never used: these DTOs read bodies only (return_dto=None)

    @classmethod
    def create_for_field_definition(
        cls, field_definition: FieldDefinition, handler_id: str, backend_cls: Any = None
    ) -> None:
        pass  # no transfer model: the body decodes into the struct itself

    @classmethod
    def create_openapi_schema(
        cls, field_definition: FieldDefinition, handler_id: str, schema_creator: SchemaCreator
    ) -> Reference | Schema:
        return schema_creator.for_field_definition(FieldDefinition.from_annotation(cls.model_type))

    @classmethod
    def generate_field_definitions(
        cls, model_type: type[Any]
    ) -> Generator[DTOFieldDefinition, None, None]:
        yield from ()  # unused: no transfer model

    @classmethod
    def detect_nested_field(cls, field_definition: FieldDefinition) -> bool:
        return False


def require(data: T | None) -> T:
    """The body a route needs (400 naming ``body`` when it was empty)."""
    if data is None:
        raise ValidationError(BODY, "a JSON object is required; the body is empty")
    return data
