"""The write-side domain: the ``RecordAggregate`` aggregate and its events."""

from membrane_es.aggregates.identity import new_record_id, record_key
from membrane_es.aggregates.memory_record import RecordAggregate, RecordState

__all__ = ["RecordAggregate", "RecordState", "new_record_id", "record_key"]
