"""The read side's compact structures: chunked embedding blocks, scope partitions and the
single id map — each checked against a plain reference computation."""

from __future__ import annotations

import random
import uuid

import numpy as np
import pytest

from membrane_es import Membrane
from membrane_es.aggregates.identity import record_key
from membrane_es.projections.embeddings import CHUNK_ROWS, CODE_CHUNK_ROWS, Block, EmbeddingIndex
from membrane_es.projections.partitions import ScopePartitions
from membrane_es.projections.record_table import (
    KeyRows,
    RecordTable,
    _all_canonical_uuids,
    _canonical_uuid,
)
from membrane_es.projections.relation_graph import RelationGraph
from membrane_es.projections.text_index import TextIndex
from membrane_es.projections.timecodes import micros
from membrane_es.schema.records import Relation
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.conftest import ManualTime
from tests.views_support import random_history

DIMENSIONS = 48


def _vectors(count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, DIMENSIONS), dtype=np.float32)
    normalised: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalised.astype(np.float32)


def _bits(values: np.ndarray) -> np.ndarray:
    bits: np.ndarray = np.asarray(values, dtype=np.float32).view(np.int32)
    return bits


def test_a_rows_score_never_changes_as_rows_are_added() -> None:
    """The as_of guarantee: scores read later for the rows that existed at a moment are the
    bits computed at that moment, across chunk boundaries and partial chunks."""
    count = 2 * CHUNK_ROWS + 300
    vectors = _vectors(count)
    query = _vectors(1, seed=1)[0]
    index = EmbeddingIndex()
    then: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for row in range(count):
        index.add(row, row % 3, "m", vectors[row])
        if row in (0, 5, CHUNK_ROWS - 1, CHUNK_ROWS, 1500, count - 1):
            then[row + 1] = index.similarities(query, None)
    for below, (rows, scores) in then.items():
        later_rows, later_scores = index.similarities(query, None, below=below)
        np.testing.assert_array_equal(later_rows, rows)
        np.testing.assert_array_equal(_bits(later_scores), _bits(scores))


def test_chunked_scores_are_the_dot_products() -> None:
    count = CHUNK_ROWS + 17
    vectors = _vectors(count, seed=2)
    query = _vectors(1, seed=3)[0]
    index = EmbeddingIndex()
    for row in range(count):
        index.add(row, 0, "m", vectors[row])
    rows, scores = index.similarities(query, None)
    np.testing.assert_array_equal(rows, np.arange(count))
    reference = vectors.astype(np.float64) @ query.astype(np.float64)
    np.testing.assert_allclose(scores, reference, rtol=0, atol=1e-6)


def test_scopes_and_below_choose_rows() -> None:
    vectors = _vectors(40, seed=4)
    query = _vectors(1, seed=5)[0]
    index = EmbeddingIndex()
    for row in range(40):
        index.add(row, row % 4, "m", vectors[row])
    rows, scores = index.similarities(query, [2, 0, 2], below=21)
    assert rows.tolist() == [2, 6, 10, 14, 18, 0, 4, 8, 12, 16, 20]
    full_rows, full_scores = index.similarities(query, None)
    by_row = dict(zip(full_rows.tolist(), _bits(full_scores).tolist(), strict=True))
    assert _bits(scores).tolist() == [by_row[r] for r in rows.tolist()]
    assert len(index.similarities(query, [9])[0]) == 0


def test_a_block_round_trips_through_its_rows_and_matrix() -> None:
    vectors = _vectors(CHUNK_ROWS + 5, seed=6)
    rows = np.arange(0, 3 * len(vectors), 3, dtype=np.int64)
    block = Block.of(DIMENSIONS, rows, vectors)
    np.testing.assert_array_equal(block.rows, rows)
    np.testing.assert_array_equal(block.matrix, vectors)
    assert block.count_below(None) == len(rows)
    for below in (0, 1, 3, 4, 3 * CHUNK_ROWS, 3 * CHUNK_ROWS + 1, 10**9):
        assert block.count_below(below) == int(np.searchsorted(rows, below))


def test_scope_partitions_follow_the_scope_column_in_steps() -> None:
    rng = np.random.default_rng(7)
    scopes = rng.integers(0, 5, size=500).astype(np.int32)
    partitions = ScopePartitions()
    for size in (0, 1, 77, 78, 300, 500):
        partitions.sync(scopes, size)
    for chosen in ([0], [3], [0, 3], [4, 1, 4], [9]):
        for below in (0, 10, 250, 500):
            expected = np.flatnonzero(np.isin(scopes[:below], chosen))
            np.testing.assert_array_equal(partitions.rows(chosen, below), expected)


@pytest.mark.parametrize("record_id", [str(uuid.uuid4()), "fact-42", str(uuid.uuid4()).upper()])
def test_key_rows_find_every_kind_of_record_id(record_id: str) -> None:
    row_of = {record_id: 7}
    keys = KeyRows(row_of)
    keys.note(record_id, 7)
    assert keys[record_key(record_id)] == 7
    assert record_key(record_id) in keys
    assert keys.get(uuid.uuid4()) is None
    with pytest.raises(KeyError):
        keys[uuid.uuid4()]


def test_incoming_edges_keep_arrival_order_and_drop_repeats() -> None:
    graph = RelationGraph()

    def relate(source: str, predicate: str, target: str) -> None:
        graph.add(source, Relation(predicate=predicate, target_id=target, weight=1.0))

    assert graph.sources("t") == []
    relate("a", "supports", "t")
    relate("a", "supports", "t")  # a repeat replaces, it does not add
    assert graph.sources("t") == [("a", "supports")]
    relate("b", "supports", "t")
    relate("a", "depends_on", "t")
    relate("b", "supports", "t")
    assert graph.sources("t") == [("a", "supports"), ("b", "supports"), ("a", "depends_on")]
    assert graph.relations("a") == [
        Relation(predicate="supports", target_id="t", weight=1.0),
        Relation(predicate="depends_on", target_id="t", weight=1.0),
    ]


TEXTS = [
    "deploy the service",
    "",  # blank documents are not indexed
    "   ",
    "service port 8080, deployed twice",
    'naïve café ﬁle — x\u2028y 😀 \\ " \t\n',
    "a\x00b after the NUL",  # JSON cannot carry a NUL: this page is bound row by row
    "unrelated cats",
]


@pytest.mark.parametrize("with_nul", [True, False])
def test_text_inserted_in_one_statement_equals_added_row_by_row(with_nul: bool) -> None:
    documents = [(row, text) for row, text in enumerate(TEXTS) if with_nul or "\x00" not in text]
    added, inserted = TextIndex(), TextIndex()
    added.add_many(documents[:3])
    added.add_many(documents[3:])
    inserted.insert_many(documents[:3])
    inserted.insert_many(documents[3:])
    inserted.note_lengths(0, len(TEXTS) - 1)
    added.index_held()  # what a write adds waits for the next read (or more writes)
    query = "SELECT rowid, body FROM docs ORDER BY rowid"
    assert inserted._db.execute(query).fetchall() == added._db.execute(query).fetchall()
    rows = np.arange(len(TEXTS) + 2)
    np.testing.assert_array_equal(inserted.lengths(rows), added.lengths(rows))
    assert inserted.corpus(len(TEXTS)) == added.corpus(len(TEXTS))
    for words in ("deploy service", "cats café", "after"):
        for got, want in zip(inserted.search(words), added.search(words), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "record_id",
    [
        str(uuid.uuid4()),
        str(uuid.uuid4()).upper(),
        "{" + str(uuid.uuid4()) + "}",
        str(uuid.uuid4()) + "\n",
        uuid.uuid4().hex,
        "urn:uuid:" + str(uuid.uuid4())[9:],
        "0" * 8 + "_" + "0" * 27,
        "٠" * 8 + "-0000-0000-0000-000000000000",
        "fact-42",
        "",
    ],
)
def test_a_canonical_uuid_is_what_a_uuid_round_trip_gives_back(record_id: str) -> None:
    try:
        round_trip = str(uuid.UUID(record_id)) == record_id
    except ValueError:
        round_trip = False
    assert _canonical_uuid(record_id) is round_trip
    # Checked all at once, as a checkpoint's ids are when it is loaded: the same answer.
    assert _all_canonical_uuids([str(uuid.uuid4()), record_id]) is round_trip
    assert _all_canonical_uuids([record_id, str(uuid.uuid4())[:35]]) is False


def test_a_loaded_table_finds_records_by_key_whatever_their_ids() -> None:
    canonical = [str(uuid.uuid4()) for _ in range(3)]
    for ids in (canonical, [*canonical, "fact-42", str(uuid.uuid4()).upper()]):
        table = RecordTable()
        table.set_ids(list(ids))
        for row, record_id in enumerate(ids):
            assert table.row_of_key[record_key(record_id)] == row


def test_noting_lengths_refreshes_the_corpus_statistics() -> None:
    index = TextIndex()
    index.add_many([(0, "deploy the service")])
    before = index.corpus(10)
    index.insert_many([(1, "deploy daily"), (2, "cats")])
    index.note_lengths(1, 2)
    assert index.corpus(10) == (before[0] + 2, before[1] + 3)


@pytest.mark.parametrize("seed", range(3))
def test_a_past_state_computed_for_some_rows_equals_the_whole_one(seed: int) -> None:
    """The state columns as of a moment, computed lazily for the rows a read asks about
    (with and without a full copy before the moment), equal the dense computation."""
    rng = random.Random(seed)
    time = ManualTime()
    with Membrane.in_memory(clock=MonotonicClock(source=time)) as memory:
        table = memory.views.table
        table.timeline.min_interval = table.timeline.interval = 16  # full copies now and then
        moments = []
        for _ in range(6):
            random_history(memory, rng, 25)
            moments.append(micros(time.current))
            time.advance(minutes=rng.randint(1, 90))
        for at in moments:
            dense = table.state_at(at)
            past = table.past_state(at)
            assert past.size == dense.size
            every = np.arange(dense.size)
            picks = [
                every,
                every[::3],
                np.array(rng.sample(range(dense.size), min(5, dense.size)), dtype=np.int64),
                every[:0],
            ]
            for rows in picks:
                for name, column in dense.columns.items():
                    np.testing.assert_array_equal(past.columns[name][rows], column[rows])
            for name, column in dense.columns.items():
                np.testing.assert_array_equal(past.columns[name][0 : dense.size], column)


def test_a_checkpoint_takes_the_sign_codes_of_used_rows_only() -> None:
    rng = np.random.default_rng(5)
    index = EmbeddingIndex()
    sizes = {0: CODE_CHUNK_ROWS + 5, 1: 7}  # one block over a code chunk, one in a sliver
    entries = [
        (row, scope, "m", rng.standard_normal(8).astype("<f4").tobytes())
        for scope, size in sizes.items()
        for row in range(scope * 100_000, scope * 100_000 + size)
    ]
    index.add_many(entries)
    assert index.coded
    saved = index.block_codes()
    for scope, block in index.blocks.items():
        assert block.code_chunks is not None
        every_chunk = np.concatenate(block.code_chunks, axis=1)
        np.testing.assert_array_equal(saved[scope], every_chunk[:, : sizes[scope]])
        assert saved[scope].base is None  # its own copy, not a view of every chunk's columns


def test_text_held_by_single_writes_is_read_as_if_indexed_and_erased_before_indexing() -> None:
    one_by_one, together = TextIndex(), TextIndex()
    for row, text in enumerate(TEXTS):
        one_by_one.add_many([(row, text)])  # held: fewer than HELD_DOCUMENTS
    together.add_many(list(enumerate(TEXTS)))
    together.index_held()
    rows = np.arange(len(TEXTS) + 2)
    np.testing.assert_array_equal(one_by_one.lengths(rows), together.lengths(rows))
    assert one_by_one.corpus(len(TEXTS)) == together.corpus(len(TEXTS))
    for got, want in zip(one_by_one.search("deploy"), together.search("deploy"), strict=True):
        np.testing.assert_array_equal(got, want)
    erased = TextIndex()
    erased.add_many([(0, "the secret plan"), (1, "an open plan")])
    erased.delete([0])  # still held: it never reaches SQLite
    assert [row for row, _ in erased._db.execute("SELECT rowid, body FROM docs")] == [1]
    assert erased.search("secret")[0].tolist() == []
    assert erased.search("plan")[0].tolist() == [1]


def test_text_index_indexes_what_it_holds_once_enough_is_held() -> None:
    from membrane_es.projections.text_index import HELD_DOCUMENTS

    index = TextIndex()
    for row in range(HELD_DOCUMENTS):
        index.add_many([(row, f"note {row}")])
    (count,) = index._db.execute("SELECT count(*) FROM docs").fetchone()
    assert count == HELD_DOCUMENTS
