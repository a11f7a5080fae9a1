"""A store served to agents over the Model Context Protocol (the official ``mcp`` SDK).

Tools: ``capture``, ``create_record``, ``context``, ``retrieve``, ``retrieve_graph``,
``list``, ``get``, ``history``, the revision operations (``supersede``, ``fork``, ``merge``,
``retract``, ``contest``, ``reinforce``, ``penalize``) and ``forget``. Reads take ``as_of``
(RFC 3339) or ``as_of_position`` (a log position, as ``changes`` gives them: right after that
event), not both.

One naming rule across the tools: a record is named by ``id`` (``ids`` for several, as
``merge`` takes), a record given whole is ``record``; an answer holding one record has it under
``record`` (``get``, and every write that makes one: ``capture``, ``create_record``,
``supersede``, ``fork``, ``merge``), several under ``records``. Arguments that do not fit are
refused in one line naming each one (an unknown argument too: a misspelt one is never
ignored). A read asking for more trust than the server's ceiling is answered at the ceiling,
and says so under ``trust``.

Answers are compact unless a call asks for ``detail``: each record as its id, type, words,
event time and (where ranked) score — :mod:`membrane_es.queries.compact` — since every
character an agent reads costs it context; ``detail`` gives the full records. Compact answers
are bounded: a record's text is cut at 2,000 characters with a marker saying how much more
there is (``get`` it), and an answer's records stop before 40,000 characters, saying how many
were left out; ``get`` answers a record's whole text.

Trust comes from the server's configuration (a :class:`~membrane_es.access.ceiling.Caller`): a
client may narrow it per call (``max_sensitivity``, ``scopes``), never widen it; it may
revise only records it could read in full, and may not write what it could not read back.

Run it with ``membrane-es mcp DIR`` (stdio) or ``membrane-es mcp DIR --http HOST:PORT``
(streamable HTTP at ``/mcp``); :func:`build_server` gives the server for a Membrane in hand.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError as PydanticError

from membrane_es import __version__
from membrane_es.access.ceiling import Caller
from membrane_es.access.keys import KeyRing
from membrane_es.engine import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_EDGE_LIMIT,
    DEFAULT_MAX_HOPS,
    DEFAULT_NODE_LIMIT,
    DEFAULT_RESULTS,
    DEFAULT_ROOT_LIMIT,
    Membrane,
    compact,
)
from membrane_es.errors import MembraneError, ValidationError
from membrane_es.mcp_server.keys import REQUEST_CEILING, KeyCheck
from membrane_es.schema.enums import Sensitivity
from membrane_es.schema.records import TrustContext
from membrane_es.schema.rfc3339 import parse_moment
from membrane_es.schema.validation import check_limit

INSTRUCTIONS = (
    "Long-term memory for this agent. capture what is worth remembering; context gives what "
    "a task needs as text packed into a token budget, with ids to cite; retrieve (or "
    "retrieve_graph) ranks records; list browses them; get a record by id (detail: in full) "
    "and read its history; revise what turned out wrong (supersede, fork, merge, retract, "
    "contest) or helped (reinforce, penalize); forget erases for good. Every read takes as_of "
    "(RFC 3339) to answer as memory stood then, or as_of_position (a position changes gives) "
    "to answer as it stood right after that event."
)
DEFAULT_ACTOR = "mcp-client"
log = logging.getLogger("membrane_es")
TOOL_NAMES = {"browse": "list"}
# A page of changes is read by a model: bounded well below what the HTTP page allows.
MCP_CHANGES_DEFAULT = 20
MCP_CHANGES_MAX = 200  # a tool whose method cannot bear its name

Json = dict[str, Any]


class _Server(MCPServer):
    """The SDK's server, with arguments that do not fit a tool refused in one short line
    naming each argument at fault (the SDK's pydantic report is many lines, with a link
    to pydantic's site): an argument the tool does not take (a misspelt one would
    otherwise be ignored), a missing one, one of the wrong type."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            known = tool.parameters.get("properties", {})
            unknown = sorted(set(arguments) - set(known))
            if unknown:
                raise ToolError(
                    f"{name} takes no argument {', '.join(map(repr, unknown))}; its "
                    f"arguments: {', '.join(known)}"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error.__cause__, PydanticError):
                raise ToolError(_arguments_refused(name, error.__cause__)) from error.__cause__
            raise


def _arguments_refused(tool: str, error: PydanticError) -> str:
    """Each argument at fault and what is wrong with it, in one line."""
    faults = []
    for fault in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in fault["loc"]) or "arguments"
        what = (
            "required"
            if fault["type"] == "missing"
            else fault["msg"][:1].lower() + fault["msg"][1:]
        )
        faults.append(f"{where}: {what}")
    return f"{tool}: " + "; ".join(faults)


def build_server(memory: Membrane, caller: Caller) -> MCPServer:
    """An MCP server over ``memory`` whose clients never read above ``caller``'s ceiling."""
    server: MCPServer = _Server(name="membrane-es", instructions=INSTRUCTIONS, version=__version__)
    tools = _Tools(memory, caller)
    for tool in (
        tools.capture,
        tools.create_record,
        tools.context,
        tools.retrieve,
        tools.retrieve_graph,
        tools.browse,
        tools.get,
        tools.history,
        tools.changes,
        tools.supersede,
        tools.fork,
        tools.merge,
        tools.retract,
        tools.contest,
        tools.reinforce,
        tools.penalize,
        tools.forget,
    ):
        server.add_tool(tool, name=TOOL_NAMES.get(tool.__name__), structured_output=True)
    return server


def serve_stdio(memory: Membrane, ceiling: TrustContext) -> None:
    """Serve an open store on standard input and output until the client goes."""
    build_server(memory, caller_of(ceiling)).run("stdio")


def serve_http(
    memory: Membrane, ceiling: TrustContext, host: str, port: int, keys: KeyRing | None = None
) -> None:
    """Serve an open store over streamable HTTP at ``http://host:port/mcp``; with ``keys``
    (any configured), every request needs a bearer key (:mod:`membrane_es.mcp_server.keys`)."""
    import uvicorn

    server_caller = caller_of(ceiling)
    app: Any = build_server(memory, server_caller).streamable_http_app(host=host)
    if keys is not None and keys.enabled:
        app = KeyCheck(app, keys, server_caller)
    uvicorn.run(app, host=host, port=port, log_level="info")


def caller_of(ceiling: TrustContext) -> Caller:
    return Caller(max_sensitivity=ceiling.max_sensitivity, scopes=tuple(ceiling.scopes))


class _Tools:
    """The tools, each a thin call on the facade under the server's ceiling."""

    def __init__(self, memory: Membrane, caller: Caller) -> None:
        self._memory = memory
        self._server_caller = caller

    @property
    def _caller(self) -> Caller:
        """The ceiling of this call: the server's, narrowed by the request's key if any."""
        return REQUEST_CEILING.get() or self._server_caller

    # --- writes -----------------------------------------------------------------------

    def capture(
        self,
        content: Any,
        source_kind: str = "agent_turn",
        summary: str = "",
        reason_to_remember: str = "",
        context: Any = None,
        tags: list[str] | None = None,
        scope: str = "",
        sensitivity: str = "low",
        proposed_type: str | None = None,
        timestamp: str | None = None,
        detail: bool = False,
        resolve: bool | None = None,
    ) -> Json:
        """Remember raw content (any JSON value): makes a primary record, an entity for
        each thing it names that is not known yet, a fact when the content is
        subject/predicate/object-shaped, and the edges between them, in one write. Answers
        the primary record under ``record`` and the ids made beside it under ``created``
        (detail: every record and edge in full). A fact already known is reinforced, not
        stored twice, and a new value of a single-valued predicate (city, employer…)
        supersedes the old: ``resolved`` says so (resolve: false stores the fact as given;
        absent: the store's choice, on unless it was opened with resolution off)."""

        def run() -> Any:
            self._check_write(sensitivity, scope)
            return self._memory.capture_memory(
                content,
                source_kind=source_kind,
                context=context,
                reason_to_remember=reason_to_remember,
                proposed_type=proposed_type,
                summary=summary,
                sensitivity=sensitivity,
                source="mcp",
                tags=tags or [],
                scope=scope,
                timestamp=parse_moment(timestamp, "timestamp"),
                resolve=resolve,
            )

        return _answer(run, _captured(detail))

    def create_record(
        self,
        record: Json,
        actor: str = DEFAULT_ACTOR,
        rationale: str = "Initial creation",
        detail: bool = False,
        resolve: bool | None = None,
    ) -> Json:
        """Store one record in Membrane's JSON shape (type, payload, scope…); answers it
        under ``record``, compactly (detail: in full). A semantic, entity or competence
        record matching an active one of its scope reinforces it instead
        (``resolution.outcome`` says ``reinforced``; resolve: false stores it as given;
        absent: the store's choice)."""

        def run() -> Any:
            self._check_write(*_level_and_scope(record))
            return self._memory.create_record(
                record, actor=actor, rationale=rationale, resolve=resolve
            )

        return _answer(run, _record(detail))

    def supersede(
        self,
        id: str,
        record: Json,
        rationale: str,
        actor: str = DEFAULT_ACTOR,
        detail: bool = False,
        widen: bool = False,
    ) -> Json:
        """Replace the record ``id`` by ``record``; the old one is retracted, nothing
        deleted. Answers the new record under ``record``, compactly (detail: in full).
        Without a scope the new record takes the old one's; widen: true lets it be read
        more widely (another scope, or none)."""
        return _answer(
            lambda: self._revisable([id], record).supersede(
                id, record, actor, rationale, widen=widen
            ),
            _record(detail),
        )

    def fork(
        self,
        id: str,
        record: Json,
        rationale: str,
        actor: str = DEFAULT_ACTOR,
        detail: bool = False,
        widen: bool = False,
    ) -> Json:
        """Derive ``record``, a conditional variant of the record ``id`` (e.g. for one
        environment); both stay. Answers the new record under ``record``, compactly (detail:
        in full). It takes the source's scope unless widen: true."""
        return _answer(
            lambda: self._revisable([id], record).fork(id, record, actor, rationale, widen=widen),
            _record(detail),
        )

    def merge(
        self,
        ids: list[str],
        record: Json,
        rationale: str,
        actor: str = DEFAULT_ACTOR,
        detail: bool = False,
        widen: bool = False,
    ) -> Json:
        """Combine the records ``ids`` into ``record``; every source is retracted, all in one
        write. Answers the new record under ``record``, compactly (detail: in full). It
        takes the sources' common scope (sources in different scopes are refused) unless
        widen: true."""
        return _answer(
            lambda: self._revisable(ids, record).merge(ids, record, actor, rationale, widen=widen),
            _record(detail),
        )

    def retract(self, id: str, rationale: str, actor: str = DEFAULT_ACTOR) -> Json:
        """Withdraw a record: left out of reads from now on, kept in history."""
        return _done(lambda: self._revisable([id]).retract(id, actor, rationale))

    def contest(
        self,
        id: str,
        rationale: str,
        contesting_ref: str = "",
        actor: str = DEFAULT_ACTOR,
    ) -> Json:
        """Flag conflicting evidence against a record (contesting_ref: the record holding it)."""
        return _done(lambda: self._revisable([id]).contest(id, contesting_ref, actor, rationale))

    def reinforce(self, id: str, rationale: str, actor: str = DEFAULT_ACTOR) -> Json:
        """The record helped: its salience rises and its decay clock restarts."""
        return _done(lambda: self._revisable([id]).reinforce(id, actor, rationale))

    def penalize(self, id: str, amount: float, rationale: str, actor: str = DEFAULT_ACTOR) -> Json:
        """The record misled: its salience drops by amount (never below its floor)."""
        return _done(lambda: self._revisable([id]).penalize(id, amount, actor, rationale))

    def forget(self, id: str, rationale: str, actor: str = DEFAULT_ACTOR) -> Json:
        """Erase a record's content for good (its key is destroyed), and that of records
        derived from it alone; its structure and history stay, redacted. Answers the ids
        forgotten."""
        return _answer(lambda: {"forgotten": self._revisable([id]).forget(id, actor, rationale)})

    # --- reads ------------------------------------------------------------------------

    def context(
        self,
        task: str,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        memory_types: list[str] | None = None,
        as_of: str | None = None,
        as_of_position: int | None = None,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
        detail: bool = False,
    ) -> Json:
        """What a task needs as text to read, packed into budget_tokens: one line a memory
        (event date, who, the words, [ref] — ref a prefix of the id, to cite), a
        conversation's turns together in time order; with the ids it holds. detail: each
        memory's id, type, time, score and tokens, and what counted them."""
        return self._read(
            max_sensitivity,
            scopes,
            lambda trust: self._memory.context(
                task,
                trust=trust,
                budget_tokens=budget_tokens,
                memory_types=memory_types,
                as_of=parse_moment(as_of),
                as_of_position=as_of_position,
            ),
            None if detail else compact.context,
        )

    def retrieve(
        self,
        task: str = "",
        memory_types: list[str] | None = None,
        limit: int = DEFAULT_RESULTS,
        min_salience: float = 0.0,
        as_of: str | None = None,
        as_of_position: int | None = None,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
        explain: bool = False,
        detail: bool = False,
    ) -> Json:
        """The records a task needs, best first (layered: working, entity, semantic,
        competence, plan_graph, episodic), only those it gives evidence for (an empty task
        lists all by salience), as memory stood at as_of if given: each its id, type, words,
        time and score (detail: the full records); explain: also why each placed where it
        did (vector, lexical and time evidence, salience, score)."""
        return self._read(
            max_sensitivity,
            scopes,
            lambda trust: self._memory.retrieve(
                task,
                trust=trust,
                memory_types=memory_types,
                min_salience=min_salience,
                limit=limit,
                as_of=parse_moment(as_of),
                as_of_position=as_of_position,
                explain=explain or not detail,  # the compact answer shows each one's score
            ),
            None if detail else partial(compact.retrieved, explain=explain),
        )

    def retrieve_graph(
        self,
        task: str = "",
        max_hops: int = DEFAULT_MAX_HOPS,
        root_limit: int = DEFAULT_ROOT_LIMIT,
        node_limit: int = DEFAULT_NODE_LIMIT,
        edge_limit: int = DEFAULT_EDGE_LIMIT,
        memory_types: list[str] | None = None,
        as_of: str | None = None,
        as_of_position: int | None = None,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
        explain: bool = False,
        detail: bool = False,
    ) -> Json:
        """Ranked roots for a task and the records related to them (max_hops 0: roots):
        nodes compactly, with their hop (0: a root, with its score), and edges as [source,
        predicate, target] (detail: the full records); explain: also why each root placed
        where it did."""
        return self._read(
            max_sensitivity,
            scopes,
            lambda trust: self._memory.retrieve_graph(
                task,
                trust=trust,
                memory_types=memory_types,
                root_limit=root_limit,
                node_limit=node_limit,
                edge_limit=edge_limit,
                max_hops=max_hops,
                as_of=parse_moment(as_of),
                as_of_position=as_of_position,
                explain=explain or not detail,
            ),
            None if detail else partial(compact.graph, explain=explain),
        )

    def browse(
        self,
        memory_types: list[str] | None = None,
        scope: str | None = None,
        tags: list[str] | None = None,
        min_salience: float = 0.0,
        limit: int = DEFAULT_RESULTS,
        as_of: str | None = None,
        as_of_position: int | None = None,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
        detail: bool = False,
    ) -> Json:
        """Browse the records this client may see, most salient first: only of these types,
        in this scope, with all these tags (limit 0: all); compactly (detail: in full)."""

        def run(trust: TrustContext) -> Any:
            limit_ = check_limit("limit", limit)
            found = self._memory.retrieve(
                trust=trust,
                memory_types=memory_types,
                min_salience=min_salience,
                as_of=parse_moment(as_of),
                as_of_position=as_of_position,
            ).records
            wanted = set(tags or ())
            kept = [
                item
                for item in found
                if (scope is None or item.scope == scope) and wanted <= set(item.tags)
            ]
            return {"records": kept[:limit_] if limit_ else kept}

        return self._read(
            max_sensitivity,
            scopes,
            run,
            None if detail else lambda r: compact.listed(r["records"]),
        )

    def get(
        self,
        id: str,
        as_of: str | None = None,
        as_of_position: int | None = None,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
        detail: bool = False,
    ) -> Json:
        """One record, now or as it stood at as_of, under ``record``: its id, type, words and
        whole text and time (detail: in full — payload, lifecycle, provenance, relations,
        audit)."""
        return self._read(
            max_sensitivity,
            scopes,
            lambda trust: self._memory.retrieve_by_id(
                id, trust=trust, as_of=parse_moment(as_of), as_of_position=as_of_position
            ),
            # the whole text: where a cut one says to look
            (lambda item: {"record": item})
            if detail
            else (lambda item: {"record": compact.whole(item)}),
        )

    def history(
        self,
        id: str,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
    ) -> Json:
        """Every event of a record: version, time, event, action, actor and rationale."""
        return self._read(
            max_sensitivity,
            scopes,
            lambda trust: {"entries": self._memory.history(id, trust=trust)},
        )

    def changes(
        self,
        after: int = 0,
        limit: int = MCP_CHANGES_DEFAULT,
        max_sensitivity: str | None = None,
        scopes: list[str] | None = None,
        detail: bool = False,
    ) -> Json:
        """The store's changes after a log position, in log order (at most limit, 1 to
        200): each one's position, time, operation, record, actor, rationale and
        the fields it changed, with the record after it (its id, type, words and time; detail:
        in full). Call again with after=next_after; next_after == head: caught up."""
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MCP_CHANGES_MAX
        ):
            raise ToolError(f"limit: must be from 1 to {MCP_CHANGES_MAX}")

        def shape(page: Any) -> Any:
            if detail:
                return page
            changes = [
                {**msgspec.to_builtins(change), "record": compact.record(change.record)}
                for change in page.changes
            ]
            return {"changes": changes, "next_after": page.next_after, "head": page.head}

        return self._read(
            max_sensitivity,
            scopes,
            lambda trust: self._memory.changes_page(after=after, limit=limit, trust=trust),
            shape,
        )

    # --- the ceiling --------------------------------------------------------------------

    def _read(
        self,
        max_sensitivity: str | None,
        scopes: Sequence[str] | None,
        read: Callable[[TrustContext], Any],
        shape: Callable[[Any], Any] | None = None,
    ) -> Json:
        """A read under the trust the client asks for, lowered to the ceiling; an answer
        read with less than was asked says so under ``trust``."""
        lowered: list[str] = []
        answer = _answer(lambda: read(self._trust(max_sensitivity, scopes, lowered)), shape)
        if lowered:
            answer["trust"] = "; ".join(lowered)
        return answer

    def _trust(
        self, max_sensitivity: str | None, scopes: Sequence[str] | None, lowered: list[str]
    ) -> TrustContext:
        """What the client asks for, lowered to the server's ceiling; what was lowered is
        added to ``lowered`` in words."""
        level = self._caller.max_sensitivity
        if max_sensitivity is not None:
            try:
                level = Sensitivity(max_sensitivity)
            except ValueError:
                raise ValidationError(
                    "max_sensitivity", f"{max_sensitivity!r} is not a sensitivity level"
                ) from None
        declared = TrustContext(
            max_sensitivity=level, authenticated=True, scopes=list(scopes or [])
        )
        granted = self._caller.clamp(declared)
        if granted.max_sensitivity != level:
            lowered.append(
                f"asked for max_sensitivity {level}; answered at {granted.max_sensitivity}, "
                "this server's ceiling"
            )
        refused = [scope for scope in declared.scopes if scope not in granted.scopes]
        if refused:
            lowered.append(
                f"scopes {', '.join(refused)} are beyond this server's ceiling "
                f"({', '.join(self._caller.scopes)}): left out"
            )
        return granted

    def _revisable(self, ids: Sequence[str], new_record: Json | None = None) -> Membrane:
        """The store, once the ceiling lets this client revise ``ids`` and write the record."""
        if not self._caller.unrestricted:
            ceiling = self._caller.ceiling()
            for record_id in ids:
                self._memory.retrieve_by_id(record_id, trust=ceiling)
            if new_record is not None:
                self._check_write(*_level_and_scope(new_record))
        return self._memory

    def _check_write(self, sensitivity: str, scope: str) -> None:
        if not self._caller.may_write(sensitivity, scope):
            raise ToolError("record sensitivity or scope exceeds this server's trust ceiling")


def _level_and_scope(record: Json) -> tuple[str, str]:
    if not isinstance(record, dict):
        raise ValidationError("record", "must be a JSON object")
    return str(record.get("sensitivity") or "low"), str(record.get("scope") or "")


def _answer(run: Callable[[], Any], shape: Callable[[Any], Any] | None = None) -> Json:
    """Run a call; its result (in ``shape``, when given) as JSON, or the error as a tool
    error the model can read.

    An error the engine did not anticipate still says what failed (its kind), rather than
    the SDK's bare "Error executing tool"; its details stay in the server's log."""
    try:
        answer = run()
        result = msgspec.to_builtins(answer if shape is None else shape(answer))
    except ValidationError as error:
        field = _ARGUMENT_NAMES.sub(lambda m: ARGUMENT_NAMES[m.group()], error.field, count=1)
        raise ToolError(_printable(f"validation error for {field}: {error.message}")) from None
    except MembraneError as error:
        raise ToolError(_printable(str(error))) from None
    except ToolError:
        raise  # the ceiling's refusal, already worded for the model
    except Exception as error:
        log.exception("MCP tool call failed")
        raise ToolError(f"the server failed on this call ({type(error).__name__})") from None
    return result if isinstance(result, dict) else {"result": result}


# The engine names the facade's parameters in its errors; the tools name them otherwise.
ARGUMENT_NAMES = {
    "new_record": "record",
    "forked_record": "record",
    "merged_record": "record",
    "old_id": "id",
    "source_id": "id",
    "record_ids": "ids",
}
_ARGUMENT_NAMES = re.compile(r"^(" + "|".join(ARGUMENT_NAMES) + r")\b")


def _printable(text: str) -> str:
    """The text with any lone surrogate (from the caller's input) escaped: a reply must be
    valid UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _record(detail: bool) -> Callable[[Any], Any]:
    """A record answer's shape: the record under ``record``, compact unless ``detail``."""
    if detail:
        return lambda item: {"record": item}
    return lambda item: {"record": compact.record(item)}


def _captured(detail: bool) -> Callable[[Any], Any]:
    """A capture's answer: its primary record under ``record``, as every write answers,
    and the records made beside it under ``created`` (detail: in full, with the edges;
    else their ids)."""
    if detail:
        return lambda result: {
            "record": result.primary_record,
            "created": result.created_records,
            "edges": result.edges,
        }
    return compact.captured


def _done(run: Callable[[], None]) -> Json:
    _answer(run)
    return {"ok": True}
