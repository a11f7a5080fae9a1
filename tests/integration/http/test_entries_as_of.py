"""``as_of`` against a replay oracle: random histories of creates, revisions and
invalidations; what a reader was told at each moment is what ``as_of`` says afterwards, but
for ``valid_to``, which then says when each entry's validity ended (if it has since).

Browse answers are compared whole and in order. Search answers are compared in order too:
every title holds its one word once (``"<word> notes"``, or ``"<word>"`` after a revision),
the case where the README promises BM25's order survives the statistics changing since."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from membrane_es.access.keys import Caller, KeyRing

from .conftest import Serve

# Each example is one tenant's history (ids start at 1 in a store of their own). About a
# fifth of a second each on one core: the run stays under ten seconds in CI.
EXAMPLES = 40
TENANTS = 2 * EXAMPLES  # more keys than examples, should hypothesis run a few more
KEYS = KeyRing(
    "",
    [
        (hashlib.sha256(f"oracle-{i}".encode()).hexdigest(), Caller(tenant=f"oracle{i}"))
        for i in range(TENANTS)
    ],
)
WORDS = ("orchid", "staging", "deploy", "cluster")

create = st.tuples(
    st.just("create"),
    st.sampled_from(("user", "project", "reference")),
    st.sampled_from(WORDS),
    st.sampled_from((None, 17, 18)),
)
revise = st.tuples(st.just("patch"), st.integers(0, 9), st.sampled_from(WORDS))
invalidate = st.tuples(st.just("invalidate"), st.integers(0, 9))
histories = st.lists(
    st.tuples(st.one_of(create, revise, invalidate), st.integers(1, 3)), min_size=1, max_size=10
)


def _read(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/v1/memory/entries", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["entries"]
    return entries


def test_as_of_answers_what_was_answered_then(serve: Serve) -> None:
    served = serve(keys=KEYS)
    tenant = itertools.count()

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(histories)
    def replay(history: list[tuple[tuple[Any, ...], int]]) -> None:
        client = served.client(f"oracle-{next(tenant)}")
        made: list[int] = []
        ended: dict[int, int] = {}  # entry id -> when it was invalidated
        told: list[tuple[int, list[dict[str, Any]], dict[str, list[int]], dict[str, Any]]] = []
        for op, pause in history:
            served.clock.advance(pause)
            if op[0] == "create":
                _, kind, word, conversation = op
                body = {"type": kind, "title": f"{word} notes", "conversation_id": conversation}
                made.append(client.post("/v1/memory/entries", json=body).json()["id"])
            elif made and op[0] == "patch":
                client.patch(f"/v1/memory/entries/{made[op[1] % len(made)]}", json={"title": op[2]})
            elif made:
                entry_id = made[op[1] % len(made)]
                response = client.post(f"/v1/memory/entries/{entry_id}/invalidate")
                if response.status_code == 200:
                    ended[entry_id] = served.clock.epoch
            searches = {word: [e["id"] for e in _read(client, q=word)] for word in WORDS}
            scoped = _read(client, conversation_id=17)
            told.append((served.clock.epoch, _read(client), searches, {"17": scoped}))
        served.clock.advance(1)

        def then(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{**e, "valid_to": ended.get(e["id"])} for e in entries]

        for moment, browse, searches, scoped in told:
            assert _read(client, as_of=moment) == then(browse)
            for word, found in searches.items():
                assert [e["id"] for e in _read(client, q=word, as_of=moment)] == found
            assert _read(client, as_of=moment, conversation_id=17) == then(scoped["17"])

    replay()
