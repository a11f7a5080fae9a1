"""The inspector's browsing views over HTTP — the records table, a conversation, the entries,
a supersede's diff, raw JSON and export, search totals and cut-off — and how it answers what
a user types: long or odd queries, far pages, epoch and future moments, errors that keep the
reader's place, and a redacted hit that shows no score."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from membrane_es.schema.records import TrustContext
from membrane_es.schema.timestamps import rfc3339
from tests.integration.inspector.conftest import (
    ENTRY_TITLE,
    FORGOTTEN_TEXT,
    OTHER,
    OWNER,
    READER,
    SENSITIVE_TEXT,
    TURNS,
    Store,
    hits,
)

FULL = TrustContext(max_sensitivity="hyper", authenticated=True)


def _get(store: Store, key: str | None, path: str, **params: str) -> httpx.Response:
    with store.client(key) as client:
        return client.get(path, params=params)


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-record="([^"]+)"', html)


# --- the records table ---------------------------------------------------------------------


def test_the_records_table_lists_every_record_newest_first(store: Store) -> None:
    page = _get(store, OWNER, "/ui/records")
    assert page.status_code == 200
    every = store.memory.record_ids(trust=FULL, include_retracted=True)
    assert _rows(page.text) == list(reversed(every))[:50]
    assert f'<strong id="total">{len(every)}</strong>' in page.text
    oldest = _get(store, OWNER, "/ui/records", sort="oldest")
    assert _rows(oldest.text) == every[:50]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("superseded", ["first"]),
        ("erased", ["forgotten"]),
        ("retracted", []),
    ],
)
def test_the_records_table_filters_by_state(store: Store, state: str, expected: list[str]) -> None:
    page = _get(store, OWNER, "/ui/records", state=state)
    assert _rows(page.text) == [getattr(store, name) for name in expected]
    for word in FORGOTTEN_TEXT.split():
        assert word not in page.text


def test_the_records_table_filters_by_type_and_scope(store: Store) -> None:
    active = _rows(_get(store, OWNER, "/ui/records", state="active").text)
    assert store.moved in active and store.first not in active and store.forgotten not in active
    episodic = _rows(_get(store, OWNER, "/ui/records", type="episodic", sort="oldest").text)
    assert episodic == [*store.turns, store.later_turn]
    chat = _rows(_get(store, OWNER, "/ui/records", scope="chat", sort="oldest").text)
    assert chat == [*store.turns, store.later_turn]
    assert _rows(_get(store, OWNER, "/ui/records", scope="nowhere").text) == []


def test_the_records_table_shows_a_reader_what_its_key_allows(store: Store) -> None:
    page = _get(store, READER, "/ui/records").text
    rows = _rows(page)
    assert store.sensitive in rows and store.secret not in rows
    assert re.search(rf'data-record="{store.sensitive}" class="redacted"', page)
    assert SENSITIVE_TEXT not in page
    # a redacted record's state is not the reader's: it is in no state filter
    for state in ("superseded", "retracted", "erased"):
        assert store.sensitive not in _rows(_get(store, READER, "/ui/records", state=state).text)
    assert store.moved not in _rows(_get(store, OTHER, "/ui/records").text)


def test_go_to_id_opens_a_record_by_its_id_or_first_characters(store: Store) -> None:
    with store.client(OWNER) as client:
        now = str(int(datetime.now(UTC).timestamp()) + 1)  # epoch seconds, as the API takes
        whole = client.get("/ui/records", params={"id": store.moved, "as_of": now})
        assert whole.status_code == 303
        assert whole.headers["location"].startswith(f"/ui/records/{store.moved}?as_of=")
        start = client.get("/ui/records", params={"id": store.moved[:13]})
        assert start.headers["location"] == f"/ui/records/{store.moved}"
        missing = client.get("/ui/records", params={"id": "ffffffff-none"})
        assert missing.status_code == 404 and 'name="as_of"' in missing.text
    assert _get(store, READER, "/ui/records", id=store.secret).status_code == 404


def test_a_records_page_past_the_last_says_so(store: Store) -> None:
    page = _get(store, OWNER, "/ui/records", page="999")
    assert page.status_code == 200 and 'id="beyond"' in page.text
    assert "page=1" in page.text


# --- a conversation ----------------------------------------------------------------------------


def test_a_conversation_shows_its_turns_in_order_with_speakers(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.turns[1]}/conversation")
    assert page.status_code == 200
    turns = re.findall(r'<li id="turn-([^"]+)"', page.text)
    assert turns == store.turns  # the later sitting's turn is not in it
    speakers = re.findall(r'<strong class="speaker">(\w+)</strong>', page.text)
    assert speakers == [who for who, _, _ in TURNS]
    for _, text, _ in TURNS:
        assert text.replace("'", "&#39;") in page.text
    # the reply was said after the question: a link to it on the page
    assert f'href="#turn-{store.turns[0]}" class="said-after"' in page.text
    record = _get(store, OWNER, f"/ui/records/{store.turns[0]}").text
    assert f"/ui/records/{store.turns[0]}/conversation" in record
    exported = _get(store, OWNER, f"/ui/records/{store.turns[1]}/conversation", format="json")
    assert [t["speaker"] for t in exported.json()["turns"]] == ["user", "assistant", "user"]


def test_a_record_that_is_no_turn_has_no_conversation(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.moved}/conversation")
    assert page.status_code == 400 and "not a conversation turn" in page.text


# --- entries -----------------------------------------------------------------------------------


def test_the_entries_view_lists_numbers_types_and_the_tenant(store: Store) -> None:
    page = _get(store, OWNER, "/ui/entries")
    assert page.status_code == 200
    assert '<span id="tenant">a</span>' in page.text
    assert f'<tr data-entry="{store.entry}">' in page.text and ENTRY_TITLE in page.text
    assert "<td>project</td>" in page.text
    listed = store.memory.list_entries(trust=FULL, tenant="a").entries
    assert re.findall(r'<tr data-entry="(\d+)">', page.text) == [str(e.id) for e in listed]
    only = _get(store, OWNER, "/ui/entries", type="project")
    assert re.findall(r'<tr data-entry="(\d+)">', only.text) == [str(store.entry)]
    theirs = _get(store, OTHER, "/ui/entries").text
    assert ENTRY_TITLE not in theirs and '<span id="tenant">b</span>' in theirs


# --- a supersede, raw JSON, export -------------------------------------------------------------


def test_a_supersede_reads_as_one_diff_before_and_after(store: Store) -> None:
    for record_id in (store.first, store.moved):
        page = _get(store, OWNER, f"/ui/records/{record_id}").text
        assert re.search(
            r"payload\.object</code>:\s*<del>− staging</del> → <ins>\+ production</ins>", page
        ), record_id


def test_a_record_shows_its_raw_json_and_exports_it(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.moved}").text
    assert 'id="raw"' in page and "&#34;object&#34;: &#34;production&#34;" in page
    exported = _get(store, OWNER, f"/ui/records/{store.moved}", format="json")
    assert exported.headers["content-type"].startswith("application/json")
    assert exported.json()["payload"]["object"] == "production"
    redacted = _get(store, READER, f"/ui/records/{store.sensitive}", format="json").json()
    assert redacted.get("payload") is None and SENSITIVE_TEXT not in json.dumps(redacted)
    erased = _get(store, OWNER, f"/ui/records/{store.forgotten}", format="json").text
    for word in FORGOTTEN_TEXT.split():
        assert word not in erased


def test_search_and_records_export_what_they_show(store: Store) -> None:
    page = _get(store, OWNER, "/ui/", q="Orchid deploy target")
    exported = _get(store, OWNER, "/ui/", q="Orchid deploy target", format="json").json()
    assert [r["record"]["id"] for r in exported["results"]] == hits(page.text)
    assert exported["total"] == len(hits(page.text))
    table = _get(store, OWNER, "/ui/records", state="superseded", format="json").json()
    assert [r["record"]["id"] for r in table["records"]] == [store.first]


# --- search: total and cut-off ------------------------------------------------------------------


def test_search_counts_its_results_and_cuts_off_below_a_relevance(store: Store) -> None:
    found = store.memory.retrieve("Orchid deploy target", trust=FULL, limit=500, explain=True)
    page = _get(store, OWNER, "/ui/", q="Orchid deploy target")
    assert f'<strong id="total">{len(found.records)}</strong>' in page.text
    relevances = sorted(
        e.relevance for e in getattr(found, "explanations", []) if e.relevance is not None
    )
    middle = relevances[len(relevances) // 2]
    cut = _get(store, OWNER, "/ui/", q="Orchid deploy target", min=f"{middle}")
    kept = [
        e.record_id
        for e in getattr(found, "explanations", [])
        if e.relevance is not None and e.relevance >= middle
    ]
    assert hits(cut.text) == kept and 0 < len(kept) < len(found.records)
    assert _get(store, OWNER, "/ui/", min="2").status_code == 400


# --- the security of scores ----------------------------------------------------------------------


def test_a_redacted_hit_shows_no_score_to_a_reader_who_asks_questions(store: Store) -> None:
    now = str(int(datetime.now(UTC).timestamp()) + 1)  # one moment: one salience
    page = _get(store, READER, "/ui/", as_of=now)  # listed, by salience
    card = re.search(
        rf'<li class="hit redacted" data-record="{store.sensitive}">(.*?)</li>', page.text, re.S
    )
    assert card is not None
    assert "score" not in card.group(1).replace("Its score is withheld", "")
    assert "<svg" not in card.group(1) and "meaning" not in card.group(1)
    exported = _get(store, READER, "/ui/", format="json", as_of=now).json()
    (hit,) = [r for r in exported["results"] if r["record"]["id"] == store.sensitive]
    why = hit["explanation"]
    assert why["trust"] == "redacted" and why["score"] is None
    assert why["vector_score"] is None and why["vector_similarity"] is None
    # a question near it and one far from it answer alike: neither lists it
    for question in ("Orchid vault combination ninety", "Orchid weather tomorrow"):
        asked = _get(store, READER, "/ui/", q=question, format="json", as_of=now).json()
        assert store.sensitive not in [r["record"]["id"] for r in asked["results"]], question
    # a cut-off cannot be used to probe it either: it leaves every redacted hit out
    cut = _get(store, READER, "/ui/", q="Orchid vault combination ninety", min="0")
    assert store.sensitive not in hits(cut.text)


# --- defects: what a user types ----------------------------------------------------------------


def test_a_long_query_wraps_and_a_nul_is_not_echoed(store: Store) -> None:
    page = _get(store, OWNER, "/ui/", q="x" * 10_000)
    assert page.status_code == 200
    assert "overflow-wrap: anywhere" in _get(store, OWNER, "/ui/static/ui.css").text
    nul = _get(store, OWNER, "/ui/", q="Orchid\x00deploy")
    assert nul.status_code == 200 and "\x00" not in nul.text and "Orchid\ufffddeploy" in nul.text


def test_far_pages_are_answered_plainly(store: Store) -> None:
    beyond = _get(store, OWNER, "/ui/", q="Orchid", page="99999")
    assert beyond.status_code == 200 and 'id="beyond"' in beyond.text
    assert "limit" not in beyond.text.split("<main", 1)[1]
    past = _get(store, OWNER, "/ui/", q="Orchid", page="7")
    assert past.status_code == 200 and "past the last page" in past.text
    timeline = _get(store, OWNER, f"/ui/records/{store.moved}", page="40")
    assert timeline.status_code == 200 and 'id="beyond"' in timeline.text


def test_as_of_takes_epoch_seconds_and_names_a_future_moment_a_projection(store: Store) -> None:
    moment = store.before_move.replace(microsecond=0)
    epoch = _get(store, OWNER, "/ui/", q="Orchid deploy target", as_of=str(int(moment.timestamp())))
    text = _get(store, OWNER, "/ui/", q="Orchid deploy target", as_of=rfc3339(moment))
    assert epoch.status_code == 200 and hits(epoch.text) == hits(text.text)
    future = rfc3339(datetime.now(UTC) + timedelta(days=30))
    ahead = _get(store, OWNER, "/ui/metrics", as_of=future)
    assert ahead.status_code == 200 and 'id="projection"' in ahead.text
    assert 'id="projection"' not in _get(store, OWNER, "/ui/metrics").text


def test_metrics_count_erased_and_superseded_apart_from_retracted(store: Store) -> None:
    page = _get(store, OWNER, "/ui/metrics").text
    table = re.search(r"Records by state \(as text.*?</table>", page, re.S)
    assert table is not None
    rows = dict(re.findall(r'<th scope="row">(\w+)</th><td>(\d+)</td>', table.group(0)))
    assert rows.get("erased") == "1" and rows.get("superseded") == "1"
    assert "retracted" not in rows  # none was retracted otherwise


def test_diffs_spell_values_as_json_and_a_reinforce_shows_a_change(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.variant}").text
    assert "False" not in page and "True" not in page.split('id="raw"')[0]
    assert re.search(r"<code>pinned</code>:\s*<ins>\+ false</ins>", page)
    reinforced = page.split("<strong>Reinforced</strong>", 1)[1].split("</tr>", 1)[0]
    assert "no field changed" not in reinforced and "last_reinforced_at" in reinforced


def test_error_pages_keep_the_views_and_the_reader(store: Store) -> None:
    moment = rfc3339(store.before_move)
    missing = _get(store, OWNER, "/ui/records/nope", as_of=moment, level="low")
    assert missing.status_code == 404
    assert 'aria-label="Views"' in missing.text and 'name="as_of"' in missing.text
    assert f'value="{moment}"' in missing.text
    back = re.search(r'<a href="([^"]+)">Back to search</a>', missing.text)
    assert back is not None and "as_of=" in back.group(1) and "level=low" in back.group(1)
    bad = _get(store, OWNER, "/ui/", as_of="yesterday", level="low")
    assert bad.status_code == 400 and "as_of:" in bad.text and "level=low" in bad.text


def test_a_page_names_its_charset_once(store: Store) -> None:
    for path in ("/ui/", "/ui/records", "/ui/records/nope"):
        kind = _get(store, OWNER, path).headers["content-type"]
        assert kind.count("charset") == 1, kind


def test_a_capture_reference_is_not_linked_as_a_record(store: Store) -> None:
    page = _get(store, OWNER, f"/ui/records/{store.turns[0]}").text
    linked = re.search(r"<h2>Linked records</h2>(.*?)</ul>", page, re.S)
    assert linked is not None
    for ref in re.findall(r"provenance <code>([^<]+)</code>", linked.group(1)):
        assert f"/ui/records/{ref}" not in linked.group(1)
    assert "not a record" in linked.group(1)
