"""What changed between two versions of a record, field by field: the inspector draws the
diff the change feed carries (:mod:`membrane_es.queries.field_diff`), and one diff across a
supersede (the content the new record replaced)."""

from __future__ import annotations

import msgspec

from membrane_es.engine import field_diff
from membrane_es.schema.records import MemoryRecord

COMPARED = field_diff.COMPARED
DIGITS = field_diff.DIGITS
Change = field_diff.Change
changes = field_diff.changes
flatten = field_diff.flatten
record_fields = field_diff.record_fields

# What a supersede replaces: the content. Relations, provenance and salience belong to each
# record's own story (its timeline shows them), and the revision links say which replaced which.
ACROSS = ("payload", "tags", "scope", "confidence", "sensitivity")


def across(old: MemoryRecord, new: MemoryRecord) -> list[field_diff.Change]:
    """What a revision changed from one record to the one that replaced it: a supersede's
    old and new content in one diff (``staging`` → ``production``)."""

    def content(record: MemoryRecord) -> dict[str, str]:
        raw = msgspec.to_builtins(record)
        return flatten({name: raw[name] for name in ACROSS if name in raw})

    return [
        change
        for change in changes(content(old), content(new))
        if not change.path.startswith("payload.revision.")
    ]


__all__ = ["COMPARED", "DIGITS", "Change", "across", "changes", "flatten", "record_fields"]
