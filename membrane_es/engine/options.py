"""What an engine is opened with, whatever its store: one value, its defaults in one place.

Every opener (:meth:`~membrane_es.engine.Membrane.connect`, ``open``, ``open_postgres``,
``in_memory``) and the engine itself take an :class:`EngineOptions`; the keyword arguments
the openers also take (``embedder=None``, ``selection_threshold=0.8``…) build one from these
defaults, so a choice made once, e.g. by a server for every tenant's store, is passed whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypedDict, Unpack

from membrane_es.commands.interpreter import Interpreter
from membrane_es.embedding.default import AUTOMATIC, EmbedderChoice
from membrane_es.errors import ValidationError
from membrane_es.projections import approximate
from membrane_es.projections.approximate import DEFAULT_MIN_VECTORS
from membrane_es.queries.selector import DEFAULT_THRESHOLD
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.predicates import PredicateVocabulary
from membrane_es.schema.validation import (
    check_chain_key,
    check_flag,
    check_settings,
    check_unit_interval,
)
from membrane_es.timekeeping.clock import MonotonicClock


@dataclass(frozen=True, kw_only=True)
class EngineOptions:
    """The choices every store is opened with (checked when the value is made: a bad one is a
    :class:`~membrane_es.errors.ValidationError` naming the field, before anything opens).

    :param clock: the engine's clock (None: a new one); tests may pass one driven by hand.
    :param embedder: embeds each new record's search text; its vector is stored in the
        record's ``Created`` event (see :mod:`membrane_es.embedding`). By default the offline
        all-MiniLM-L6-v2 when the ``embeddings`` extra is installed (announced in the
        ``membrane_es`` log), else none; None: no embedder (words and salience only).
    :param selection_threshold: the selector's confidence below which a retrieval's selection
        says ``needs_more`` (the reference's default, 0.7).
    :param interpreter: reads captures and proposes mentions and links (an LLM, rules…); see
        :class:`~membrane_es.commands.interpreter.Interpreter`. Without one, capture uses its
        fallback interpretation only.
    :param default_sensitivity: the sensitivity the ``ingest_*`` operations give records when
        the caller names none (capture always defaults to ``low``, as the reference).
    :param env: extra eventsourcing settings for the store (e.g. ``CIPHER_KEY``,
        ``COMPRESSOR_TOPIC``, ``POSTGRES_POOL_SIZE``).
    :param chain_key: key of the log's hash chain (keep it outside the store): each link is
        then a MAC nobody without the key can recompute. A store's first write fixes whether
        its chain is keyed; opening it with another key, or none, is an error. Every process
        writing one log must be given the same key.
    :param resolve_writes: resolution on write (:mod:`membrane_es.commands.resolution`): a
        semantic, entity or competence record matching an active one reinforces it instead
        of adding a duplicate, and a changed value of a single-valued predicate supersedes
        the old one. On by default; a call's ``resolve=`` overrides it. The gRPC daemon turns
        it off for Membrane's wire contract (``resolve_writes`` in its config).
    :param single_valued: predicates this store holds one value of at a time, besides the
        built-in ones (:mod:`membrane_es.schema.predicates`).
    :param many_valued: predicates that hold many values at once, besides the built-in ones.
    :param approximate_index: an approximate nearest-neighbour index over the store's
        vectors (:mod:`membrane_es.projections.approximate`), which reads over most of a large
        store search before scoring its candidates exactly. False (the default): never (reads
        scan the sign codes or every vector) — the index costs a pause to train it at the
        threshold, memory for its codes and a rebuild on a reopened store's first search, so a
        store asks for it; True: kept from ``approximate_min_vectors`` vectors on, FAISS (the
        ``ann`` extra) required; None: the same when FAISS is installed, else never.
    :param approximate_min_vectors: the number of vectors from which the index is kept.
    """

    clock: MonotonicClock | None = None
    embedder: EmbedderChoice = AUTOMATIC
    selection_threshold: float = DEFAULT_THRESHOLD
    interpreter: Interpreter | None = None
    default_sensitivity: str = Sensitivity.LOW.value
    env: Mapping[str, str] | None = field(default_factory=dict)  # None: none
    chain_key: bytes | None = None
    resolve_writes: bool = True
    single_valued: tuple[str, ...] = ()
    many_valued: tuple[str, ...] = ()
    approximate_index: bool | None = False
    approximate_min_vectors: int = DEFAULT_MIN_VECTORS

    def __post_init__(self) -> None:
        check_unit_interval("selection_threshold", self.selection_threshold)
        check_default_sensitivity(self.default_sensitivity)
        check_chain_key(self.chain_key)
        check_flag("resolve_writes", self.resolve_writes)
        check_approximate(self.approximate_index, self.approximate_min_vectors)
        vocabulary = PredicateVocabulary().declared(
            single=self.single_valued, many=self.many_valued
        )
        listed = vocabulary.listed()
        object.__setattr__(self, "single_valued", tuple(listed["single"]))
        object.__setattr__(self, "many_valued", tuple(listed["many"]))
        # a read-only copy of its own: the caller's mapping may change after the value is made,
        # and one value may open many stores
        settings = MappingProxyType(check_settings("env", self.env))
        object.__setattr__(self, "env", settings)

    def replace(self, **choices: Unpack[OptionChoices]) -> EngineOptions:
        """These options with ``choices`` in place of theirs (checked as when made)."""
        unknown = sorted(set(choices) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
        return dataclasses.replace(self, **choices)


class OptionChoices(TypedDict, total=False):
    """The fields of :class:`EngineOptions`, as the openers' keyword arguments take them."""

    clock: MonotonicClock | None
    embedder: EmbedderChoice
    selection_threshold: float
    interpreter: Interpreter | None
    default_sensitivity: str
    env: Mapping[str, str] | None
    chain_key: bytes | None
    resolve_writes: bool
    single_valued: tuple[str, ...]
    many_valued: tuple[str, ...]
    approximate_index: bool | None
    approximate_min_vectors: int


def options_of(options: EngineOptions | None, choices: OptionChoices) -> EngineOptions:
    """``options`` (the defaults when None) with the keyword arguments a caller gave over
    them: what every opener is run with."""
    if options is not None and not isinstance(options, EngineOptions):
        raise ValidationError("options", f"must be EngineOptions: {options!r}")
    base = DEFAULT_OPTIONS if options is None else options
    return base.replace(**choices) if choices else base


def check_approximate(choice: object, min_vectors: object) -> None:
    """The approximate index's switch and threshold (FAISS must be there if it is asked for)."""
    if choice is not None and not isinstance(choice, bool):
        raise ValidationError("approximate_index", f"must be true, false or null: {choice!r}")
    if isinstance(min_vectors, bool) or not isinstance(min_vectors, int) or min_vectors < 1:
        raise ValidationError(
            "approximate_min_vectors", f"must be a positive integer: {min_vectors!r}"
        )
    if choice is True and not approximate.available():
        raise ValidationError(
            "approximate_index", "needs FAISS: install the 'ann' extra (membrane-es[ann])"
        )


def approximate_from(options: EngineOptions) -> int | None:
    """From how many vectors on an engine with these options keeps an approximate index
    (None: never)."""
    if options.approximate_index is False or not approximate.available():
        return None
    return options.approximate_min_vectors


def check_default_sensitivity(value: object) -> str:
    """The configured default must be a sensitivity level (the reference refuses to start)."""
    if value not in Sensitivity.__members__.values():
        raise ValidationError("default_sensitivity", f'invalid default sensitivity "{value}"')
    return str(value)


DEFAULT_OPTIONS = EngineOptions()
