"""LangGraph short-term memory on the event log: a ``BaseCheckpointSaver`` (sync and async).

Every checkpoint and every batch of pending writes is a ``working`` record of its own, in
the scope ``langgraph:<thread_id>``, created once and never changed: a thread's history is
the log itself, ``history`` and ``verify`` apply to it, and a read ``as_of`` any past moment
(:meth:`MembraneSaver.as_of`) answers with the thread as it was then. Deleting (a thread,
a run's checkpoints, a prune) retracts records: they leave every later read and stay in the
log, readable as of before the delete (``Membrane.forget`` erases a record's content).

How a checkpoint is filed:

* record id ``langgraph:checkpoint:<thread>:<ns>:<checkpoint id>:<generation>`` (each part
  percent-encoded), so a checkpoint is found by id and a thread's ids, listed without
  loading a record (``Membrane.record_ids``), give its checkpoints in order; a checkpoint
  stored again under the same id is a new generation, the old one retracted;
* its pending writes: ``langgraph:writes:<same>:<n>``, one record per ``put_writes``;
* the payload's ``context_summary`` is a readable line, what the record is searched by
  (by its words: no vector is made, whatever the store's embedder); the bytes of
  LangGraph's own serializer (``serde``) travel base64-encoded in the one free-form field
  of a working payload, ``active_constraints[0].value``, out of the text index;
* a channel's value is stored once, in the checkpoint whose ``new_versions`` name it; later
  checkpoints point at that record (``located``), as LangGraph's own savers keep one blob a
  channel version.

The caller's trust applies: records are written at ``sensitivity`` (not above the trust's
ceiling), read under the trust context, and a thread outside the trust's scopes does not
exist for this saver.
"""

from membrane_es.integrations.langgraph_checkpoint.saver import MembraneSaver

__all__ = ["MembraneSaver"]
