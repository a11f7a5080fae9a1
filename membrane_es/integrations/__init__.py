"""Adapters that give agent frameworks membrane_es as their memory, each an optional extra.

Every adapter goes through the engine's public API only (:mod:`membrane_es` and the
:class:`~membrane_es.Membrane` facade), so what it writes is ordinary memory: revisable,
trust-gated, readable as of any past moment, and searchable by every other client.
"""
