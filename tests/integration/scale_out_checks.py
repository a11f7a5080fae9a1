"""What ``test_postgres_processes.py`` checks against the log and a fresh rebuild once every
writer process has reported (see ``scale_out_worker.py`` for the reports)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from membrane_es import Membrane
from membrane_es.aggregates.memory_record import RecordAggregate
from membrane_es.queries.by_id import HistoryEntry
from tests.integration import scale_out_worker as worker

Report = dict[str, Any]
# The event each acknowledged operation leaves on the records it targets.
EVENT_OF = {
    "reinforce": "Reinforced",
    "penalize": "Penalized",
    "relate": "RelationAdded",
    "supersede": "Superseded",
    "pin": "Pinned",
    "contest": "Contested",
    "retract": "Retracted",
    "merge": "MergedInto",
}
REPLACEMENTS = (RecordAggregate.Superseded, RecordAggregate.MergedInto)


def replaced_by(reader: Membrane, record_id: str) -> str:
    state = reader.application.load(record_id).state
    return state.superseded_by or state.merged_into


def check_acknowledged(reader: Membrane, reports: list[Report], head: int) -> None:
    """Every operation a writer was told succeeded is in the log with its effect: the event
    it made on each record it targeted (found by the operation's token in the rationale),
    the records it made, the replacement or the relation it wrote."""
    histories: dict[str, list[HistoryEntry]] = {}

    def history(record_id: str) -> list[HistoryEntry]:
        if record_id not in histories:
            histories[record_id] = reader.history(record_id, trust=worker.FULL)
        return histories[record_id]

    for report in reports:
        for op in report["acked"]:
            where = (report["name"], op)
            assert 0 < op["position"] <= head, where
            for target in op["targets"]:
                events = [e for e in history(target) if op["token"] in e.rationale]
                assert [e.event for e in events] == [EVENT_OF[op["op"]]], where
            for made in op["made"]:
                assert history(made)[0].event == "Created", where
            if op["op"] == "create":
                assert op["token"] in history(op["made"][0])[0].rationale, where
            elif op["op"] in ("supersede", "merge"):
                assert {replaced_by(reader, t) for t in op["targets"]} == set(op["made"]), where
            elif op["op"] == "relate":
                source, target = op["targets"]
                relations = reader.retrieve_by_id(source, trust=worker.FULL).relations
                assert ("supports", target) in {(r.predicate, r.target_id) for r in relations}


def check_races(reader: Membrane, reports: list[Report]) -> None:
    """Each round: the writers met and raced at the log; one won, the other's save was
    refused there and, retried, found the records replaced (AlreadyReplacedError naming the
    winner's record); the raced records were replaced once, by the winner."""
    for race_round, (_, targets) in enumerate(worker.RACES):
        outcomes = [report["races"][race_round] for report in reports]
        assert all(o["met"] for o in outcomes), outcomes
        winners = [o["won"] for o in outcomes if "won" in o]
        losers = [o for o in outcomes if "won" not in o]
        assert len(winners) == 1 and len(losers) == 1, outcomes
        (loser,) = losers
        assert loser["refused"] == "AlreadyReplacedError", outcomes
        assert loser["replaced_by"] == winners[0] and loser["first_refused"], outcomes
        assert {replaced_by(reader, target) for target in targets} == set(winners)


def check_counts(reports: list[Report], log_events: list[Any]) -> None:
    """The writers' counts agree with each other and with the log: every attempt was either
    acknowledged or refused; a lost race round is a refusal and at least one save the log
    refused; the log holds exactly the replacements acknowledged, each record replaced once
    at most (no forked supersede chain)."""
    for report in reports:
        assert len(report["acked"]) + sum(report["refused"].values()) == report["attempts"]
        lost = [o for o in report["races"] if "won" not in o]
        assert report["refused"].get("AlreadyReplacedError", 0) >= len(lost)
        assert report["store_refusals"] >= len(lost)
    wins = [o["won"] for report in reports for o in report["races"] if "won" in o]
    assert len(wins) == len(worker.RACES)
    replaced = Counter(e.originator_id for e in log_events if isinstance(e, REPLACEMENTS))
    assert set(replaced.values()) <= {1}
    acknowledged = sum(
        len(op["targets"])
        for report in reports
        for op in report["acked"]
        if op["op"] in ("supersede", "merge")
    )
    assert sum(replaced.values()) == acknowledged


def check_times(log_events: list[Any], skewed: Report, other: Report) -> None:
    """Times follow log order; the writer whose clock is behind wrote, interleaved with the
    other, events later than its own clock ever said (moved past the log's time)."""
    times = [e.timestamp for e in log_events]
    assert times == sorted(times) and len(set(times)) == len(times)

    def written_by(report: Report) -> list[int]:
        return [i for i, e in enumerate(log_events) if getattr(e, "actor", None) == report["name"]]

    behind, ahead = written_by(skewed), written_by(other)
    assert behind and ahead
    assert ahead[0] < behind[-1] and behind[0] < ahead[-1]  # interleaved in the log
    own_clock = datetime.fromisoformat(skewed["clock"])
    assert all(log_events[i].timestamp > own_clock for i in behind)
