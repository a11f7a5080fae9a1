"""The write-side domain: the ``MemoryRecord`` aggregate and its events."""

from membrane_es.aggregates.identity import new_record_id, record_key
from membrane_es.aggregates.memory_record import MemoryRecord, RecordState

__all__ = ["MemoryRecord", "RecordState", "new_record_id", "record_key"]
