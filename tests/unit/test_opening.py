"""Opening a store: one options value for every opener, one opener by address, one check of a
store by address, and the figures an edge asks of the engine instead of reading the store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from membrane_es import EngineOptions, Membrane, StoreAddress
from membrane_es.engine import verify_store
from membrane_es.errors import (
    MembraneError,
    StoreClosedError,
    StoreNotFoundError,
    ValidationError,
)
from membrane_es.timekeeping.clock import MonotonicClock
from tests.unit.builders import semantic

MOMENT = datetime(2026, 3, 1, 12, tzinfo=UTC)


def fixed_clock() -> MonotonicClock:
    return MonotonicClock(source=lambda: MOMENT)


# --- the options value ------------------------------------------------------------------


def test_the_options_hold_the_defaults_every_opener_had() -> None:
    options = EngineOptions()
    assert options.selection_threshold == 0.7
    assert options.default_sensitivity == "low"
    assert options.embedder == "default" and options.interpreter is None
    assert options.clock is None and options.chain_key is None and options.env == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("selection_threshold", 1.5),
        ("default_sensitivity", "secret"),
        ("chain_key", b""),
        ("env", {"CIPHER_KEY": 3}),
    ],
)
def test_a_bad_option_names_its_field_when_the_value_is_made(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as raised:
        EngineOptions(**{field: value})  # type: ignore[arg-type]
    assert raised.value.field.startswith(field)


def test_keyword_arguments_are_put_over_the_options(tmp_path: Path) -> None:
    options = EngineOptions(embedder=None, default_sensitivity="high", clock=fixed_clock())
    with Membrane.in_memory(options, default_sensitivity="medium") as memory:
        record = memory.ingest_observation("service", "runs_on", "port 8080")
        assert record.sensitivity == "medium"  # the keyword won
        assert record.created_at == MOMENT  # the options' clock stayed
        assert memory.embedder is None
    with Membrane.open(tmp_path / "store", options) as memory:
        assert memory.ingest_observation("a", "b", "c").sensitivity == "high"


def test_options_are_replaced_field_by_field_and_checked_again() -> None:
    options = EngineOptions(embedder=None)
    changed = options.replace(selection_threshold=0.5)
    assert changed.selection_threshold == 0.5 and changed.embedder is None
    assert options.selection_threshold == 0.7  # a value: the original is unchanged
    with pytest.raises(ValidationError):
        options.replace(selection_threshold=-1.0)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="colour"):
        Membrane.in_memory(colour="blue")  # type: ignore[call-arg]


def test_a_store_in_memory_refuses_a_chain_key() -> None:
    with pytest.raises(ValidationError) as raised:
        Membrane.in_memory(EngineOptions(chain_key=b"k" * 32))
    assert raised.value.field == "chain_key"


# --- addresses --------------------------------------------------------------------------


def test_an_address_is_parsed_from_what_a_user_writes(tmp_path: Path) -> None:
    assert StoreAddress.parse(str(tmp_path)).path == tmp_path
    assert StoreAddress.parse(tmp_path) == StoreAddress(path=tmp_path)
    assert StoreAddress.parse(":memory:").in_memory
    url = StoreAddress.parse("postgresql://me:pw@db.example/memory#tenant_acme")
    assert url.dsn == "postgresql://me:pw@db.example/memory" and url.schema == "tenant_acme"
    assert StoreAddress.parse("postgres://db.example/memory").schema == "public"
    assert str(url) == "postgresql://me:***@db.example/memory schema tenant_acme"


def test_a_bad_address_is_refused() -> None:
    for address in ("", "  ", "a\x00b", "mysql://db/memory", "sqlite:///x.db"):
        with pytest.raises(ValidationError) as raised:
            StoreAddress.parse(address)
        assert raised.value.field == "address"
    with pytest.raises(ValidationError):
        StoreAddress(path=Path("x"), dsn="postgresql://db/x")
    with pytest.raises(ValidationError) as raised:
        StoreAddress(path=Path("x"), views_dir=Path("v"))
    assert raised.value.field == "views_dir"


def test_a_tenants_store_sits_beside_the_default_one(tmp_path: Path) -> None:
    assert StoreAddress(path=tmp_path).tenant("acme").path == tmp_path / "tenants" / "acme"
    postgres = StoreAddress(dsn="postgresql://db/x", views_dir=tmp_path / "views")
    acme = postgres.tenant("acme")
    assert acme.schema == "tenant_acme" and acme.dsn == postgres.dsn
    assert acme.views_dir == tmp_path / "tenants" / "acme" / "views"
    assert StoreAddress().tenant("acme").in_memory


# --- connect ----------------------------------------------------------------------------


def test_connect_opens_a_directory_as_lmdb(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Membrane.connect(str(store), embedder=None) as memory:
        memory.create_record(semantic())
    assert (store / "data.mdb").is_file()
    with Membrane.connect(StoreAddress(path=store), EngineOptions(embedder=None)) as memory:
        assert memory.event_count() == 1


def test_connect_without_create_finds_no_store_and_makes_none(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        Membrane.connect(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(StoreNotFoundError):
        Membrane.connect(":memory:", create=False)


@pytest.mark.parametrize("opener", [Membrane.open, Membrane.connect])
def test_a_new_store_needs_its_parent_directory_unless_asked_to_make_it(
    tmp_path: Path, opener: Callable[..., Membrane]
) -> None:
    typo = tmp_path / "memroy" / "x"
    with pytest.raises(ValidationError, match=f"no directory {tmp_path / 'memroy'}") as refused:
        opener(typo, embedder=None)
    assert refused.value.field == "path" and str(typo) in str(refused.value)
    assert not (tmp_path / "memroy").exists()  # nothing made
    with opener(typo, embedder=None, create_parents=True) as memory:
        memory.create_record(semantic())
    with opener(typo, embedder=None) as memory:
        assert memory.event_count() == 1  # an existing store opens as it is
    with opener(tmp_path / "store", embedder=None):
        pass  # a parent that exists is all a new store needs


def test_connect_read_only_refuses_writes_and_memory_cannot_be_read_only(tmp_path: Path) -> None:
    Membrane.connect(tmp_path, embedder=None).close()
    with Membrane.connect(tmp_path, read_only=True, embedder=None) as memory:
        with pytest.raises(MembraneError, match="read-only"):
            memory.create_record(semantic())
    with pytest.raises(ValidationError) as raised:
        Membrane.connect(":memory:", read_only=True)
    assert raised.value.field == "read_only"


# --- verify_store -----------------------------------------------------------------------


def test_verify_store_checks_a_store_by_its_address(tmp_path: Path) -> None:
    with Membrane.connect(tmp_path, embedder=None) as memory:
        memory.create_record(semantic())
    report = verify_store(str(tmp_path))
    assert report.ok and report.checked == 1
    assert Membrane.verify_store(tmp_path).checked == 1  # the engine's name for it
    with pytest.raises(StoreNotFoundError):
        verify_store(tmp_path / "missing")
    with pytest.raises(MembraneError, match="no hash chain"):
        verify_store(":memory:")


def test_only_an_lmdb_store_takes_a_key_store_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as raised:
        verify_store("postgresql://nowhere.invalid/x", key_store=tmp_path / "keys.sqlite")
    assert raised.value.field == "key_store"


# --- figures about a store --------------------------------------------------------------


def test_events_bytes_and_census(tmp_path: Path) -> None:
    with Membrane.connect(tmp_path, embedder=None) as memory:
        first = memory.create_record(semantic())
        written = first.updated_at
        assert isinstance(written, datetime)
        before = memory.event_count()
        second = memory.create_record(semantic("db", "runs_on", "port 5432"))
        memory.retract(second.id, "agent", "wrong port")
        assert memory.event_count() == before + 2
        assert memory.event_count(as_of=written) == before
        assert memory.stored_bytes() > 0
        census = memory.census(days=3)
        assert census.by_state == {"active": 1, "contested": 0, "hidden": 0, "retracted": 1}
        assert [count for _, count in census.per_day][-1] == 2
        assert len(census.per_day) == 3
        earlier = memory.census(as_of=written - timedelta(days=2), days=1)
        assert sum(earlier.by_state.values()) == 0
        assert memory.vector_model == ""
    with Membrane.in_memory(embedder=None) as memory:
        assert memory.stored_bytes() == 0 and memory.event_count() == 0


def test_relations_to_a_record() -> None:
    with Membrane.in_memory(embedder=None) as memory:
        target = memory.create_record(semantic())
        source = memory.create_record(
            semantic("db", relations=[{"predicate": "supports", "target_id": target.id}])
        )
        assert memory.relations_to(target.id) == [(source.id, "supports")]
        assert memory.relations_to(source.id) == []


def test_only_a_directory_store_keeps_its_views() -> None:
    assert StoreAddress.parse("./memory").keeps_views
    assert not StoreAddress.parse("postgresql://db/x").keeps_views
    assert not StoreAddress.parse(":memory:").keeps_views


def test_the_options_keep_their_own_settings() -> None:
    given = {"COMPRESSOR_TOPIC": "zlib"}
    options = EngineOptions(env=given)
    given["CIPHER_KEY"] = "later"
    assert dict(options.env or {}) == {"COMPRESSOR_TOPIC": "zlib"}
    with pytest.raises(TypeError):
        options.env["CIPHER_KEY"] = "x"  # type: ignore[index]


# --- a closed engine -------------------------------------------------------------------


@pytest.mark.parametrize("durable", [True, False])
def test_a_closed_engine_refuses_every_call_with_the_engines_error(
    tmp_path: Path, durable: bool
) -> None:
    memory = (
        Membrane.connect(str(tmp_path / "memory"), embedder=None, clock=fixed_clock())
        if durable
        else Membrane.in_memory(embedder=None, clock=fixed_clock())
    )
    kept = memory.create_record(semantic())
    memory.close()
    memory.close()  # closing again does nothing
    calls = {
        "retrieve": lambda: memory.retrieve("deploy"),
        "retrieve_by_id": lambda: memory.retrieve_by_id(kept.id),
        "create_record": lambda: memory.create_record(semantic()),
        "capture_memory": lambda: memory.capture_memory("a note"),
        "reinforce": lambda: memory.reinforce(kept.id, "agent", "it helped"),
        "__enter__": lambda: memory.__enter__(),
    }
    for name, call in calls.items():
        with pytest.raises(StoreClosedError, match=name) as refused:
            call()
        assert isinstance(refused.value, MembraneError) and refused.value.method == name
    if durable:  # nothing was lost, and the store opens again
        with Membrane.connect(str(tmp_path / "memory"), embedder=None) as again:
            assert again.retrieve_by_id(kept.id).id == kept.id


def test_open_refuses_a_path_that_is_no_place_for_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # an empty path would have meant the working directory
    (tmp_path / "afile").write_text("not a store")
    for path, field in (("", "path"), ("a\x00b", "path"), ("afile", "path")):
        with pytest.raises(ValidationError) as raised:
            Membrane.open(path, embedder=None)
        assert raised.value.field == field
    with pytest.raises(ValidationError):
        Membrane.connect("afile", embedder=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing was made
