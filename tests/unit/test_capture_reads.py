"""The pool capture reads is ordered by the ranking's tie rule: salience, newer, then id."""

from __future__ import annotations

from membrane_es.queries.capture_reads import best_first


def test_best_first_orders_by_salience_then_newer_then_id() -> None:
    picks = [
        (0.5, 10, "b"),
        (0.9, 1, "z"),
        (0.5, 20, "c"),
        (0.5, 10, "a"),
        (0.1, 99, "y"),
    ]
    assert best_first(picks, 10) == ["z", "c", "a", "b", "y"]
    assert best_first(picks, 3) == ["z", "c", "a"]


def test_best_first_of_nothing_is_nothing() -> None:
    assert best_first([], 5) == []
    assert best_first([(0.5, 1, "a")], 0) == []
