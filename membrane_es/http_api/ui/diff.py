"""What changed between two versions of a record, field by field: the inspector draws the
diff the change feed carries (:mod:`membrane_es.queries.field_diff`)."""

from __future__ import annotations

from membrane_es.engine import field_diff

COMPARED = field_diff.COMPARED
DIGITS = field_diff.DIGITS
Change = field_diff.Change
changes = field_diff.changes
flatten = field_diff.flatten
record_fields = field_diff.record_fields

__all__ = ["COMPARED", "DIGITS", "Change", "changes", "flatten", "record_fields"]
