"""Bounded open stores: idle tenants' engines are closed (least recently used first) and
opened again on demand; a held engine is never closed; no write is lost; a tenant never has
two engines open at once, however requests for it and evictions interleave."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from membrane_es import Membrane
from membrane_es.access.keys import DEFAULT_TENANT
from membrane_es.serving.tenants import StoreBounds, Tenants


class Opener:
    """Opens LMDB stores and records how many engines each tenant has open at once."""

    def __init__(self, close_delay: float = 0.0) -> None:
        self.close_delay = close_delay
        self.lock = threading.Lock()
        self.most_at_once = 0
        self.live: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.opens: Counter[str] = Counter()

    def __call__(self, tenant: str, path: Path | None) -> Membrane:
        assert path is not None
        engine = Membrane.open(path, embedder=None, sync=False)
        with self.lock:
            self.live[tenant] += 1
            self.opens[tenant] += 1
            self.most[tenant] = max(self.most[tenant], self.live[tenant])
            self.most_at_once = max(self.most_at_once, sum(self.live.values()))
        close = engine.close

        def closed(**how: int) -> None:
            already = engine._closed
            time.sleep(self.close_delay)  # a slow checkpoint
            close(**how)
            if not already:
                with self.lock:
                    self.live[tenant] -= 1

        engine.close = closed  # type: ignore[method-assign]
        return engine


def _tenants(tmp_path: Path, opener: Opener, **bounds: int) -> Tenants:
    (tmp_path / "tenants").mkdir(exist_ok=True)
    return Tenants(str(tmp_path), opener, bounds=StoreBounds(**bounds))


def _write(tenants: Tenants, tenant: str, ref: str) -> None:
    with tenants.lease(tenant) as engine:
        engine.ingest_event("note", ref, summary=f"{tenant} {ref}")


def _events(tenants: Tenants, tenant: str) -> int:
    with tenants.lease(tenant, write=False) as engine:
        return engine.event_count()


def test_idle_stores_beyond_the_bound_are_closed_least_recently_used_first(
    tmp_path: Path,
) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=3)
    try:
        for name in ("a", "b", "c", "d", "e"):
            _write(tenants, name, "r1")
        assert tenants.settle()
        # one place kept free for the next new tenant: the two most recent stay
        assert tenants.open_tenants() == ["d", "e"]
        assert tenants.evicted == 3
        _write(tenants, "a", "r2")  # reopened; the least recent of the rest goes
        assert tenants.settle()
        assert tenants.open_tenants() == ["e", "a"]
        assert opener.opens["a"] == 2
        assert _events(tenants, "a") == 2  # the write before the eviction is still there
    finally:
        tenants.close()
    assert sum(opener.live.values()) == 0


def test_a_held_store_stays_open_past_the_bound_and_closes_when_let_go(tmp_path: Path) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=1)
    try:
        with tenants.lease("held") as engine:
            for name in ("x", "y", "z"):
                _write(tenants, name, "r1")
            engine.ingest_event("note", "still-open", summary="written while others came")
            assert tenants.settle()
            assert "held" in tenants.open_tenants()
        assert tenants.settle()
        assert tenants.open_tenants() == ["held"]  # the others, idle, made way for it
        _write(tenants, "w", "r1")
        assert tenants.settle()
        assert tenants.open_tenants() == ["w"]  # now idle and least recent: closed
        assert _events(tenants, "held") == 1
    finally:
        tenants.close()


def test_slow_closes_hold_back_new_opens_so_the_bound_holds(tmp_path: Path) -> None:
    opener = Opener(close_delay=0.2)
    tenants = _tenants(tmp_path, opener, max_open=2)
    try:
        for name in ("a", "b", "c", "d", "e", "f"):
            _write(tenants, name, "r1")
        assert tenants.settle()
        assert opener.most_at_once <= 2  # closing engines count until they are closed
        assert [_events(tenants, name) for name in ("a", "f")] == [1, 1]
    finally:
        tenants.close()


def test_a_store_evicted_a_few_events_past_its_checkpoint_replays_them_when_reopened(
    tmp_path: Path,
) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=1)
    views = tmp_path / "tenants" / "few" / "views" / "current"
    try:
        _write(tenants, "few", "r1")
        _write(tenants, "other", "r1")  # makes "few" go
        assert tenants.settle() and tenants.open_tenants() == ["other"]
        assert not views.exists()  # one event to replay: not worth a checkpoint
        assert _events(tenants, "few") == 1  # reopened: the write replayed from the log
        assert opener.opens["few"] == 2
    finally:
        tenants.close()
    assert views.exists()  # a daemon that stops checkpoints every store it has open


def test_the_default_tenant_is_never_closed(tmp_path: Path) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=1)
    try:
        _write(tenants, DEFAULT_TENANT, "r1")
        for name in ("p", "q"):
            _write(tenants, name, "r1")
        assert tenants.settle()
        assert DEFAULT_TENANT in tenants.open_tenants()
        assert opener.opens[DEFAULT_TENANT] == 1
    finally:
        tenants.close()


def test_a_memory_budget_closes_idle_stores_while_over_it(tmp_path: Path) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, memory_budget=1)  # one byte: always over
    try:
        for name in ("m", "n", "o"):
            _write(tenants, name, "r1")
        assert tenants.settle()
        assert tenants.open_tenants() == []
        assert [_events(tenants, name) for name in ("m", "n", "o")] == [1, 1, 1]
    finally:
        tenants.close()


def test_a_read_of_a_tenant_without_a_store_creates_none_and_holds_nothing(
    tmp_path: Path,
) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=1)
    try:
        assert _events(tenants, "nobody") == 0
        assert not (tmp_path / "tenants" / "nobody").exists()
        assert tenants.open_tenants() == []
    finally:
        tenants.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_concurrent_requests_and_evictions_lose_nothing_and_never_double_open(
    tmp_path: Path, seed: int
) -> None:
    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=2)
    names = [f"t{i}" for i in range(6)]
    written: Counter[str] = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client(worker: int) -> None:
        chooser = random.Random(seed * 100 + worker)
        try:
            for step in range(12):
                name = chooser.choice(names)
                if chooser.random() < 0.6:
                    _write(tenants, name, f"w{worker}-{step}")
                    with lock:
                        written[name] += 1
                else:
                    _events(tenants, name)
        except BaseException as error:  # reported below, on the test's thread
            errors.append(error)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, errors
        assert tenants.settle()
        assert len(tenants.open_tenants()) <= 2
        assert max(opener.most.values()) == 1  # never two engines for one tenant
        assert tenants.evicted > 0
        for name in names:
            assert _events(tenants, name) == written[name]
    finally:
        tenants.close()
    assert sum(opener.live.values()) == 0


def test_the_bounds_come_from_the_file_the_environment_and_flags() -> None:
    from membrane_es.grpc_server.config import ConfigError, DaemonConfig, apply_overrides

    assert DaemonConfig().max_open_stores == 100
    assert DaemonConfig().memory_budget_mb == 0
    filed = DaemonConfig(max_open_stores=30)
    assert apply_overrides(filed, environ={}).max_open_stores == 30
    environ = {"MEMBRANE_MAX_OPEN_STORES": "7", "MEMBRANE_MEMORY_BUDGET_MB": "512"}
    from_env = apply_overrides(filed, environ=environ)
    assert (from_env.max_open_stores, from_env.memory_budget_mb) == (7, 512)
    assert apply_overrides(filed, environ=environ, max_open_stores=3).max_open_stores == 3
    with pytest.raises(ConfigError, match="MEMBRANE_MAX_OPEN_STORES"):
        apply_overrides(filed, environ={"MEMBRANE_MAX_OPEN_STORES": "lots"})
    with pytest.raises(ConfigError, match="max_open_stores"):
        DaemonConfig(max_open_stores=-1).validate()


class GatedOpener(Opener):
    """Opens (and closes) the tenants in ``gated`` only once ``gate`` is set: an open or a
    close that takes as long as the test wants."""

    def __init__(self, gated: set[str]) -> None:
        super().__init__()
        self.gated = gated
        self.gate = threading.Event()
        self.waiting = threading.Event()  # a gated open or close has begun

    def __call__(self, tenant: str, path: Path | None) -> Membrane:
        if tenant in self.gated:
            self.waiting.set()
            assert self.gate.wait(30)
        engine = super().__call__(tenant, path)
        if tenant in self.gated:
            close = engine.close

            def gated_close(**how: int) -> None:
                self.waiting.set()
                assert self.gate.wait(30)
                close(**how)

            engine.close = gated_close  # type: ignore[method-assign]
        return engine


def _in_thread(work: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_a_request_to_an_open_tenant_never_waits_for_another_tenants_open(
    tmp_path: Path,
) -> None:
    opener = GatedOpener({"cold"})
    tenants = _tenants(tmp_path, opener, max_open=3)
    try:
        _write(tenants, "hot", "r1")
        opening = _in_thread(lambda: _write(tenants, "cold", "r1"))
        assert opener.waiting.wait(30)  # the cold tenant's open has begun and is stuck
        hot = _in_thread(lambda: _write(tenants, "hot", "r2"))
        hot.join(30)
        finished_while_cold_opened = not hot.is_alive()
        opener.gate.set()
        opening.join(30)
        assert finished_while_cold_opened
        assert [_events(tenants, name) for name in ("hot", "cold")] == [2, 1]
    finally:
        opener.gate.set()
        tenants.close()


def test_a_request_to_an_open_tenant_never_waits_for_another_tenants_close(
    tmp_path: Path,
) -> None:
    opener = GatedOpener({"leaving"})
    opener.gate.set()
    tenants = _tenants(tmp_path, opener, max_open=2)
    try:
        _write(tenants, "leaving", "r1")
        opener.gate.clear()
        opener.waiting.clear()
        _write(tenants, "hot", "r1")  # "leaving", least recent, is sent to be closed
        assert opener.waiting.wait(30)  # and its close is stuck
        hot = _in_thread(lambda: _write(tenants, "hot", "r2"))
        hot.join(30)
        finished_while_closing = not hot.is_alive()
        opener.gate.set()
        assert finished_while_closing
        assert tenants.settle()
        assert [_events(tenants, name) for name in ("hot", "leaving")] == [2, 1]
    finally:
        opener.gate.set()
        tenants.close()


def test_freed_memory_is_given_back_at_most_once_an_interval_unless_over_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membrane_es.serving import tenants as tenants_module

    trims: list[float] = []
    monkeypatch.setattr(tenants_module, "give_back_freed_memory", lambda: trims.append(1))
    monkeypatch.setattr(tenants_module, "TRIM_INTERVAL_SECONDS", 3600.0)
    tenants = _tenants(tmp_path, Opener(), max_open=2)
    try:
        for name in ("a", "b", "c", "d", "e"):
            _write(tenants, name, "r1")
        assert tenants.settle()
        assert tenants.evicted == 4
        assert len(trims) == 1  # the first close's; the others within the interval
    finally:
        tenants.close()
    trims.clear()
    (tmp_path / "over").mkdir()
    over = _tenants(tmp_path / "over", Opener(), memory_budget=1)  # always over it
    try:
        for name in ("a", "b", "c"):
            _write(over, name, "r1")
        assert over.settle()
        assert len(trims) == over.evicted == 3  # over budget: every close gives back
    finally:
        over.close()


def test_a_store_evicted_more_events_past_its_checkpoint_is_saved_for_its_next_open(
    tmp_path: Path,
) -> None:
    from membrane_es.serving.tenants import EVICTION_REPLAY_ALLOWANCE

    opener = Opener()
    tenants = _tenants(tmp_path, opener, max_open=1)
    views = tmp_path / "tenants" / "many" / "views" / "current"
    try:
        with tenants.lease("many") as engine:
            for n in range(EVICTION_REPLAY_ALLOWANCE + 1):
                engine.ingest_event("note", f"r{n}", summary=f"note {n}")
        _write(tenants, "other", "r1")  # makes "many" go
        assert tenants.settle() and tenants.open_tenants() == ["other"]
        assert views.exists()  # saved by the close: its next open replays nothing
        assert _events(tenants, "many") == EVICTION_REPLAY_ALLOWANCE + 1
    finally:
        tenants.close()


def test_closing_runs_a_few_places_ahead_so_new_tenants_do_not_wait_for_each_close(
    tmp_path: Path,
) -> None:
    from membrane_es.serving.tenants import closing_ahead

    assert [closing_ahead(n) for n in (1, 2, 8, 15, 16, 24, 50, 100, 10_000)] == [
        1, 1, 1, 1, 2, 3, 4, 4, 4,
    ]  # fmt: skip
    opener = GatedOpener({"g0", "g1"})
    opener.gate.set()
    tenants = _tenants(tmp_path, opener, max_open=16)  # two places kept free
    try:
        for name in ["g0", "g1", *(f"t{n}" for n in range(12))]:
            _write(tenants, name, "r1")
        assert tenants.settle() and tenants.evicted == 0  # 14 open: none closed yet
        opener.gate.clear()
        opener.waiting.clear()
        _write(tenants, "n1", "r1")  # "g0" is sent to be closed, and its close is stuck
        assert opener.waiting.wait(30)
        second = _in_thread(lambda: _write(tenants, "n2", "r1"))
        second.join(30)
        opened_while_closing = not second.is_alive()  # a free place: no wait ("g1" goes)
        third = _in_thread(lambda: _write(tenants, "n3", "r1"))
        third.join(0.5)
        waited_at_the_bound = third.is_alive()  # 14 open and 2 closing: it waits
        opener.gate.set()
        third.join(30)
        assert opened_while_closing and waited_at_the_bound and not third.is_alive()
        assert tenants.settle()
        assert opener.most_at_once <= 16
        assert [_events(tenants, name) for name in ("g0", "g1", "n3")] == [1, 1, 1]
    finally:
        opener.gate.set()
        tenants.close()


class MemoryOpener:
    """Opens in-memory stores (fast, for tests that open many; a closed one's events are
    gone) and counts opens per tenant."""

    def __init__(self) -> None:
        self.opens: Counter[str] = Counter()

    def __call__(self, tenant: str, path: Path | None) -> Membrane:
        self.opens[tenant] += 1
        return Membrane.in_memory(embedder=None)


def test_a_busy_tenant_stays_open_while_tenants_served_once_pass_through(tmp_path: Path) -> None:
    from membrane_es.serving.tenants import USES_HALVED_PER_PLACE

    opener = MemoryOpener()
    tenants = _tenants(tmp_path, opener, max_open=4)  # three kept open, one place free
    try:
        for n in range(3):
            _write(tenants, "busy", f"r{n}")
        # a sweep: each tenant once, far more of them than places, none of them "busy"
        for n in range(12):
            _write(tenants, f"once{n}", "r1")
        assert tenants.settle()
        assert "busy" in tenants.open_tenants()  # least recently used, but most used
        assert opener.opens["busy"] == 1
        assert tenants.evicted == 12 + 1 - 3
        # its uses count only lately: with no more of them, it goes in time
        for n in range(12, 12 + 2 * USES_HALVED_PER_PLACE * 4):
            _write(tenants, f"once{n}", "r1")
        assert tenants.settle()
        assert "busy" not in tenants.open_tenants()
        _write(tenants, "busy", "r3")  # (an in-memory store: what it held went with it)
        assert opener.opens["busy"] == 2
    finally:
        tenants.close()
