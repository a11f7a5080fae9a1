"""The LangGraph store benchmark measures what it says on a small store: a row per
operation, both stores timed, the ratio theirs to ours (the full run is ``python -m
bench.integrations_langgraph_store``)."""

from __future__ import annotations

import pytest

from bench import integrations_langgraph_store as bench


def test_measure_gives_a_row_per_operation_with_both_stores_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench, "PUTS", 4)
    monkeypatch.setattr(bench, "GETS", 4)
    monkeypatch.setattr(bench, "SEARCHES", 4)

    rows = bench.measure(items=30)

    assert [row["operation"] for row in rows] == ["put", "get", "search"]
    for row in rows:
        assert row["adapter"] == "langgraph store"
        assert row["ours_p50_ms"] > 0 and row["theirs_p50_ms"] > 0
        assert row["ratio"] == pytest.approx(row["ours_p50_ms"] / row["theirs_p50_ms"], rel=1e-9)
