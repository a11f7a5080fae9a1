"""What the API page says to its readers, the people calling the API: the introduction at the
top of ``/docs`` and ``/openapi.json``, and a real example of each error answer."""

from __future__ import annotations

DESCRIPTION = """\
Memory entries for agents, over HTTP: notes of six types (`user`, `feedback`, `project`,
`reference`, `learning`, `context`) that you create, search, revise, relate and read as they
stood at any past moment. The routes and JSON shapes are those of Arbiter's memory API. This
page is also at `/`; the OpenAPI document it shows is `/openapi.json`.

**Authentication.** Send `Authorization: Bearer <your API key>` with every request (the key
the server was started with, in `MEMBRANE_API_KEY`, or one from its keys file). A key may be
limited to some conversations and sensitivity levels, and belongs to one tenant: you see and
change only what it allows. An entry the key cannot see answers 404, as one that does not
exist.

**A first session.**

1. `POST /v1/memory/entries` with `{"type": "project", "title": "Deploys go out on Fridays"}`
   answers 201 with the entry and its `id`.
2. `GET /v1/memory/entries?q=deploy` searches titles and contents (BM25); without `q` it
   lists the newest first.
3. `PATCH /v1/memory/entries/{id}` revises it; the earlier revision stays readable with
   `GET /v1/memory/entries?as_of=2026-01-01T00:00:00Z` (a moment as RFC 3339 with its
   offset, or as epoch seconds), or `?as_of_position=N` (right after the log's event N, as
   `/v1/memory/changes` numbers them; to the second entries keep).
4. `POST /v1/memory/entries/{id}/invalidate` ends its validity;
   `DELETE /v1/memory/entries/{id}?erase=true` erases its content for good.

**Writes and reads across servers.** Every write answers with an `x-membrane-position`
header; send it back as `x-membrane-min-position` to make a read (on any server of the same
store) include that write.

**Errors** are `{"error": "<what is wrong>"}` with the status that says why: 400 names the
field at fault (an unknown field is refused, not ignored), 401 a missing or unknown key, 403 a
write the key may not make, 404 an entry that does not exist or that the key cannot see, 409 a
relation that already exists (with its `existing_id`), 413 a body over 1 MiB, 504 a read whose
`x-membrane-min-position` was not reached in time.
"""

# A real answer for each error status, as the server words it.
ERROR_EXAMPLES: dict[int, tuple[str, dict[str, object]]] = {
    400: ("A missing field", {"error": "title: required"}),
    401: ("No key, or an unknown one", {"error": "missing or invalid bearer token"}),
    403: (
        "A write outside the key's conversations",
        {"error": "conversation_id: outside the scopes this key may write"},
    ),
    404: ("No such entry (or the key cannot see it)", {"error": "entry not found"}),
    409: ("The relation exists", {"error": "relation already exists", "existing_id": 12}),
    413: (
        "The body is too large",
        {"error": "Request Entity Too Large"},
    ),
    504: (
        "The views did not catch up in time",
        {"error": "min_position 1042 not reached within 5 s (the read views are at 1040)"},
    ),
}
