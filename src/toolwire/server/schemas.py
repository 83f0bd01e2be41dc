"""Request bodies (validated with pydantic) and the OpenAPI document describing the whole API.

Bodies are read with `read_body`: the size is checked before and while reading (413), the JSON must
parse (400) and match the model (422, naming the field); strings may not contain NUL characters,
which no database stores. Unknown fields are ignored, so clients may send newer fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError
from starlette.requests import Request

from ..messages import Message
from .errors import ApiError
from .uploads import file_paths

__all__ = ["ChatCreate", "ChatUpdate", "DecisionIn", "DecisionsIn", "MessageIn", "openapi_document", "parse_body",
           "read_body", "read_bytes"]

_Model = TypeVar("_Model", bound=BaseModel)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
Id = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_no_nul)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ChatUpdate(_Body):
    """`PATCH /api/chats/{id}`: a new `title`, a new `model` (`null`: the server's default), or both."""

    title: Text | None = None
    model: Id | None = Field(None, description="The id of the model the chat's runs use from now on (`GET "
                                               "/api/models`); `null` for the server's default.")


class MessageIn(_Body):
    client_message_id: Id = Field(description="Chosen by the client, unique per message: sending the same id again "
                                              "attaches to the run it started instead of starting another.")
    text: Text = Field(min_length=1)
    files: list[Id] = Field(default_factory=list, max_length=100,
                            description="Ids of files uploaded to this chat (`POST .../files`) that the message "
                                        "carries.")
    on_disconnect: Literal["continue", "cancel"] = Field(
        "continue", description="What a disconnect of this request does to the run: `continue` (the default) lets "
                                "it finish and be stored; `cancel` cancels it.")
    parent_id: Id | None = Field(
        None, description="The row the message goes under: an earlier answer's id edits the message after it (a new "
                          "branch there), `root` makes a new first message; by default the chat's active leaf.")

    model: Id | None = Field(None, description="The id of the model (`GET /api/models`) the chat uses from this "
                                               "message on (stored as the chat's, as `PATCH` does); by default the "
                                               "chat's model as it is.")
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] | None = Field(
        None, description="What the message does while the chat's run is going (double texting): `reject` (409), "
                          "`enqueue` (it runs when the run ends), `interrupt` (the run is cancelled, then it runs) or "
                          "`rollback` (the run is cancelled and the message answers from before its turn, which "
                          "stays on a branch of its own). Default: the server's `--multitask-strategy`.")


class ChatCreate(_Body):
    """`POST /api/chats`: `title` is optional (a chat without one takes its first message's first line); with
    `message`, the chat's first message is sent in the same request, which then answers as sending it does."""

    title: Text | None = None
    model: Id | None = Field(None, description="The id of the model the chat's runs use (`GET /api/models`); by "
                                               "default the server's default model.")
    message: MessageIn | None = Field(
        None, description="The chat's first message: the chat is created and the message sent in one request, "
                          "which answers with the run's events as `POST /api/chats/{chat_id}/messages` does "
                          "(`X-Chat-Id` and `Location` name the new chat). It takes no `parent_id` other than "
                          "`root` and no `files` (a new chat has none yet).")


class RegenerateIn(_Body):
    client_message_id: Id | None = Field(
        None, description="Chosen by the client, unique per request: the same id again attaches to the run it "
                          "started instead of starting another.")
    on_disconnect: Literal["continue", "cancel"] = "continue"


class LeafIn(_Body):
    message_id: Id = Field(description="A row of the branch to show: the branch goes down from it to its newest "
                                       "leaf.")


class DecisionIn(_Body):
    approval_id: Id
    approved: StrictBool
    reason: Annotated[Text, Field(max_length=2000)] | None = None


class DecisionsIn(_Body):
    decisions: list[DecisionIn] = Field(min_length=1, max_length=200)


async def read_bytes(request: Request, max_bytes: int) -> bytes:
    """The request's body, or a 413 `ApiError` as soon as it is known to be larger than `max_bytes`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_body(request: Request, model: type[_Model], max_bytes: int) -> _Model:
    """The request's JSON body as `model`, or a 413 / 400 / 422 `ApiError` with a full sentence."""
    return parse_body(await read_bytes(request, max_bytes), model)


def parse_body(body: bytes, model: type[_Model]) -> _Model:
    """A JSON body as `model`, or a 400 / 422 `ApiError` with a full sentence."""
    if not body.strip():
        raise ApiError(400, "invalid_json", "The request needs a JSON object as its body.")
    try:
        # Validated from the bytes: pydantic's parser skips what the model does not take without building it
        # (1 MB of unknown nested arrays: ~10 ms, where parsing it into Python objects first took ~400 ms of
        # the event loop and ~30 MB).
        return model.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            raise ApiError(400, "invalid_json", f"The request body is not valid JSON ({first['msg']}).") from None
        if not first["loc"] and first["type"] in ("model_type", "model_attributes_type", "dict_type"):
            raise ApiError(422, "invalid_request", "The request body must be a JSON object.") from None
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ApiError(422, "invalid_request", f"The field {where!r} is not valid: {first['msg']}. "
                                               f"({exc.error_count()} problem(s) in all.)") from None


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(413, "body_too_large", f"The request body is larger than this server accepts ({max_bytes:,} "
                                           "bytes); send less.")


# -- the OpenAPI document ------------------------------------------------------------------------

_REF = "#/components/schemas/{model}"


def _schema(model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = (TypeAdapter(model) if not isinstance(model, type) or not issubclass(model, BaseModel) else model)
    raw = schema.json_schema(ref_template=_REF) if isinstance(schema, TypeAdapter) else \
        schema.model_json_schema(ref_template=_REF)
    defs = raw.pop("$defs", {})
    return raw, defs


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _json(ref: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": ref}}}}


_SSE: dict[str, Any] = {
    "description": "The run's events as server-sent events (`id: <cursor>` and `data: <event JSON>`), until "
                   "`run_finished`. Headers: `Location` (the chat's stream) and `X-Run-Id`.",
    "headers": {"X-Run-Id": {"schema": {"type": "string"}}, "Location": {"schema": {"type": "string"}}},
    "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/ServerSentEvent"}}}}


def _protocol_paths(op: Callable[..., dict[str, Any]], schemas: dict[str, Any], chat_id: dict[str, Any],
                    run_started: dict[str, Any]) -> dict[str, Any]:
    """The Vercel AI SDK and AG-UI routes (`protocol_routes.py`). Their bodies are described as loosely as the
    server reads them: of the messages only the last is read, so the others need only a role."""
    uimessage = {"type": "object", "required": ["role"], "properties": {
        "id": {"description": "The message's id (read on the last message: 1 to 200 characters)."},
        "role": {"enum": ["system", "user", "assistant"]},
        "parts": {"description": "The message's parts (read on the last message: an array of objects; text parts "
                                 "of a user message, approval responses of an assistant message)."}}}
    schemas["VercelChatRequest"] = {
        "type": "object", "required": ["id"],
        "description": "What `DefaultChatTransport` posts: the chat id (the client's, scoped to the user) and the "
                       "whole history in `messages`, or just the last message as `message`.",
        "properties": {"id": {"type": "string"}, "trigger": {"type": ["string", "null"]},
                       "messages": {"type": ["array", "null"], "items": uimessage},
                       "message": {"oneOf": [{"type": "null"}, uimessage]}}}
    schemas["AguiRunInput"] = {
        "type": "object", "required": ["threadId", "runId"],
        "description": "AG-UI's `RunAgentInput`: of `messages` only the last (a user message) is read, or `resume` "
                       "(answers to the paused run's interrupts); `tools`, `context`, `state` and `forwardedProps` "
                       "are ignored.",
        "properties": {"threadId": {"type": "string"}, "runId": {"type": "string"},
                       "messages": {"type": ["array", "null"], "items": {
                           "type": "object", "required": ["role"], "properties": {"role": {"enum": [
                               "developer", "system", "assistant", "user", "tool", "activity", "reasoning"]}}}},
                       "resume": {"type": ["array", "null"], "items": {"type": "object"}}}}
    stream = {"description": "The run's events in the protocol's stream (`data: <chunk JSON>` frames). Headers: "
                             "`X-Run-Id`, `X-Chat-Id` (the server's chat id).",
              "headers": {"X-Run-Id": {"schema": {"type": "string"}}, "X-Chat-Id": {"schema": {"type": "string"}}},
              "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    body_errors = {"410": _error_response("The message was already sent and its run's events are no longer kept."),
                   "413": _error_response("The body (or its last message) is too large.")}
    client_chat_id = {**chat_id, "description": "The client's chat id."}

    def posted(summary: str, body: str) -> dict[str, Any]:
        operation = op(summary, {"200": stream, **run_started, **body_errors}, body=body)
        operation["responses"]["400"] = _error_response("The body is not JSON.")
        return operation

    return {
        "/api/chat": {"post": posted("Vercel AI SDK: send a user message, or approval responses", "VercelChatRequest")},
        "/api/chat/{chat_id}/stream": {"get": op("Vercel AI SDK: follow the chat's active run from its start", {
            "200": stream, "204": {"description": "Nothing is running."}}, parameters=[client_chat_id])},
        "/api/chat/{chat_id}/stop": {"post": op("Vercel AI SDK: cancel the chat's running run", {
            "202": {"description": "Cancelling", "content": {"application/json": {"schema": {
                "type": "object", "required": ["run_id", "status"],
                "properties": {"run_id": {"type": "string"}, "status": {"const": "cancelling"}}}}}},
            "204": {"description": "Nothing is running."},
            "409": _error_response("The run is paused for approval, or has just ended.")},
            parameters=[client_chat_id])},
        "/api/chat/{chat_id}/messages": {"get": op("Vercel AI SDK: the stored chat as UI messages", {
            "200": {"description": "OK", "content": {"application/json": {"schema": {
                "type": "object", "required": ["messages"],
                "properties": {"messages": {"type": "array", "items": {"type": "object"}}}}}}}},
            parameters=[client_chat_id])},
        "/api/agui": {"post": posted("AG-UI: run the agent (a user message, or answers to interrupts)",
                                     "AguiRunInput")},
    }


def branch_paths(paths: dict[str, Any], op: Callable[..., dict[str, Any]], chat_id: dict[str, Any],
                 run_started: dict[str, Any]) -> None:
    """The routes of branching chats (`server/branches.py`): regenerate an answer, switch the active branch."""
    path_body = {"description": "The branch, as `GET /api/chats/{id}/messages` answers it", "content": {
        "application/json": {"schema": {"type": "object", "required": ["leaf_id", "messages"], "properties": {
            "leaf_id": {"type": ["string", "null"]},
            "messages": {"type": "array", "items": {"$ref": _REF.format(model="MessageRow")}},
            "runs": {"type": "array", "items": {"$ref": _REF.format(model="RunSummary")}}}}}}}
    message_id = {"name": "message_id", "in": "path", "required": True, "schema": {"type": "string"}}
    paths["/api/chats/{chat_id}/messages/{message_id}/regenerate"] = {"post": op(
        "Answer the user message of this row's turn again (regenerate, or retry a failed run): a new branch beside "
        "the earlier answer; starts a run and follows it", {"200": _SSE, **run_started},
        body="RegenerateIn", parameters=[chat_id, message_id])}
    paths["/api/chats/{chat_id}/leaf"] = {"put": op(
        "Switch the chat's active branch to the one through `message_id` (down to its newest leaf)",
        {"200": path_body}, body="LeafIn", parameters=[chat_id])}


def openapi_document(*, max_message_chars: int) -> dict[str, Any]:
    """The API described as OpenAPI 3.1 (served at `/openapi.json`)."""
    schemas: dict[str, Any] = {}
    for name, model in (("ChatCreate", ChatCreate), ("ChatUpdate", ChatUpdate), ("MessageIn", MessageIn),
                        ("DecisionsIn", DecisionsIn), ("Message", Message), ("RegenerateIn", RegenerateIn),
                        ("LeafIn", LeafIn)):
        schema, defs = _schema(model)
        schemas.update(defs)
        schemas[name] = schema
    schemas["MessageIn"]["properties"]["text"]["maxLength"] = max_message_chars
    iso = {"type": "string", "format": "date-time"}
    chat_props = {"id": {"type": "string"}, "title": {"type": "string"}, "created_at": iso, "updated_at": iso,
                  "model": {"type": ["string", "null"], "description": "The id of the chat's model; null: the "
                                                                         "server's default."}}
    schemas["Chat"] = {"type": "object", "properties": chat_props, "required": list(chat_props)}
    schemas["MessageRow"] = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "sequence_number": {"type": "integer", "minimum": 1},
                       "kind": {"enum": ["user", "assistant", "tools_aggregate"]},
                       "role": {"enum": ["user", "assistant"]}, "run_id": {"type": ["string", "null"]},
                       "created_at": iso, "messages": {"type": "array", "items": {"$ref": _REF.format(model="Message")},
                                                       "minItems": 1, "maxItems": 2},
                       "parent_id": {"type": ["string", "null"], "description": "The row this one follows."},
                       "sibling_ids": {"type": "array", "items": {"type": "string"},
                                       "description": "The rows with the same parent, itself included, oldest first "
                                                      "(in a chat's path)."}},
        "required": ["id", "sequence_number", "kind", "role", "run_id", "created_at", "messages"],
    }
    schemas["RunSummary"] = {
        "type": "object",
        "description": "How a run of the returned rows ended (`run_finished`'s fields, `duration` from the stored "
                       "times; `status` `resumed` for a run paused for approval and then decided), and, for a run "
                       "that resumed a paused one, the decisions it resumed with.",
        "properties": {"run_id": {"type": "string"},
                       "status": {"enum": ["running", "paused", "resumed", "completed", "cancelled", "failed",
                                           "interrupted"]},
                       "model": {"type": ["string", "null"], "description": "The id of the model the run used."},
                       "usage": {"type": ["object", "null"]}, "error": {"type": ["object", "null"]},
                       "steps": {"type": "integer", "minimum": 0}, "duration": {"type": ["number", "null"]},
                       "decisions": {"type": "array", "items": {
                           "type": "object", "required": ["call_id", "approved", "reason"],
                           "properties": {"call_id": {"type": "string"}, "approved": {"type": "boolean"},
                                          "reason": {"type": ["string", "null"]}}}}},
        "required": ["run_id", "status", "usage", "error", "steps", "duration", "decisions"],
    }
    schemas["ChatDetail"] = {
        "type": "object",
        "properties": {
            **chat_props,
            "active_run": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["run_id", "status", "last_event_id"],
                "properties": {"run_id": {"type": "string"}, "status": {"const": "running"},
                               "run_number": {"type": "integer"},
                               "last_event_id": {"type": ["string", "null"]},
                               "model": {"type": ["string", "null"]}}}]},
            "paused": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["run_id", "message", "results", "approvals"],
                "properties": {"run_id": {"type": "string"}, "message": {"$ref": _REF.format(model="Message")},
                               "results": {"type": "array", "items": {"type": "object"}},
                               "approvals": {"type": "array", "items": {
                                   "type": "object", "required": ["approval_id", "call"],
                                   "properties": {"approval_id": {"type": "string"}, "call": {"type": "object"}}}}}}]},
        },
        "required": [*chat_props, "active_run", "paused"],
    }
    schemas["ServerEvent"] = {
        "type": "object", "required": ["type", "run_id", "step"],
        "description": "toolwire's event (`toolwire.events.event_to_dict`) or a run event, with `run_id` and `step`.",
        "properties": {"type": {"type": "string"}, "run_id": {"type": "string"},
                       "step": {"type": ["integer", "null"], "minimum": 0}},
    }
    schemas["ServerSentEvent"] = {
        "type": "object", "required": ["data"],
        "description": "One frame of the stream: `id` is the cursor `<run>-<index>`, `data` the event's JSON.",
        "properties": {"id": {"type": "string", "pattern": "^[0-9]+-[0-9]+$"}, "event": {"type": "string"},
                       "data": {"type": "string", "contentMediaType": "application/json",
                                "contentSchema": {"$ref": _REF.format(model="ServerEvent")}}},
    }
    schemas["Error"] = {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}}

    chat_id = {"name": "chat_id", "in": "path", "required": True, "schema": {"type": "string"}}
    auth: list[dict[str, list[str]]] = [{"bearer": []}]
    common = {"401": _error_response("No valid API token."), "404": _error_response("No such chat (or not yours)."),
              "429": {**_error_response("Too many requests of this user at once, or (for a write) too many writes "
                                        "per minute; `Retry-After` says when to try again."),
                      "headers": {"Retry-After": {"schema": {"type": "string"}}}}}

    def op(summary: str, responses: dict[str, Any], *, body: str | None = None,
           parameters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        unknown = {"400": _error_response("A query parameter the operation does not take.")}
        operation: dict[str, Any] = {"summary": summary, "security": auth,
                                     "responses": {**unknown, **responses, **common}}
        if parameters:
            operation["parameters"] = parameters
        if body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": _REF.format(model=body)}}}}
            operation["responses"].update({"400": _error_response("The body is not JSON, or a query parameter the "
                                                                  "operation does not take."),
                                           "413": _error_response("The body is too large."),
                                           "422": _error_response("A field is not valid.")})
        return operation

    run_started = {"409": _error_response("A run is active or paused."), "429": _error_response("Rate limited."),
                   "503": _error_response("Shutting down, or running as many runs as it takes: try again.")}
    paths: dict[str, Any] = {
        "/api/chats": {
            "post": op("Create a chat; with `message`, also send its first message and follow its run",
                       {"201": _json(_REF.format(model="Chat"), "Created"),
                        "200": {**_SSE, "description": "With `message`: the first run's events, as sending a "
                                                       "message answers; `X-Chat-Id` names the new chat.",
                                "headers": {**_SSE["headers"], "X-Chat-Id": {"schema": {"type": "string"}}}},
                        **run_started},
                       body="ChatCreate"),
            "get": op("The caller's chats, newest first", {"200": {"description": "OK", "content": {
                "application/json": {"schema": {"type": "object", "required": ["chats"], "properties": {
                    "chats": {"type": "array", "items": {"$ref": _REF.format(model="Chat")}}}}}}}}),
        },
        "/api/chats/{chat_id}": {
            "get": op("A chat, its active run and its paused run", {"200": _json(_REF.format(model="ChatDetail"))},
                      parameters=[chat_id]),
            "patch": op("Rename a chat, or choose its model", {"200": _json(_REF.format(model="Chat"))},
                        body="ChatUpdate",
                        parameters=[chat_id]),
            "delete": op("Delete a chat (cancelling its run first)", {"204": {"description": "Deleted"}},
                         parameters=[chat_id]),
        },
        "/api/chats/{chat_id}/messages": {
            "get": op("One branch of the chat (the active one, or the one through `leaf`): its rows in sequence "
                      "order with their siblings, and how their runs ended", {"200": {
                "description": "OK", "content": {"application/json": {"schema": {
                    "type": "object", "required": ["messages"], "properties": {
                        "leaf_id": {"type": ["string", "null"]},
                        "messages": {"type": "array", "items": {"$ref": _REF.format(model="MessageRow")}},
                        "runs": {"type": "array", "items": {"$ref": _REF.format(model="RunSummary")}}}}}}},
                "400": _error_response("`after` is not a number, or another query parameter was given.")},
                parameters=[chat_id, {"name": "after", "in": "query", "required": False,
                                      "schema": {"type": "integer", "minimum": 0}},
                            {"name": "leaf", "in": "query", "required": False, "schema": {"type": "string"},
                             "description": "A row of the branch to read (down to its newest leaf); by default "
                                            "the chat's active leaf."}]),
            "post": op("Send a message: starts a run and follows it", {"200": _SSE, **run_started},
                       body="MessageIn", parameters=[chat_id]),
        },
        "/api/chats/{chat_id}/stream": {
            "get": op("Follow the chat's events after a cursor (or the active run from its start)", {
                "200": _SSE, "204": {"description": "Nothing to follow."},
                "400": _error_response("The cursor is not an event id of this chat."),
                "410": _error_response("The events after the cursor are no longer kept: reload the messages.")},
                parameters=[chat_id, {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
                            {"name": "Last-Event-ID", "in": "header", "required": False,
                             "schema": {"type": "string"}}]),
        },
        "/api/chats/{chat_id}/runs/{run_id}/cancel": {
            "post": op("Cancel a running run", {"202": {"description": "Cancelling", "content": {
                "application/json": {"schema": {"type": "object", "required": ["run_id", "status"], "properties": {
                    "run_id": {"type": "string"}, "status": {"const": "cancelling"}}}}}},
                "409": _error_response("The run is not running.")},
                parameters=[chat_id, {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}]),
        },
        "/api/chats/{chat_id}/approvals": {
            "post": op("Decide the paused run's approvals: resumes it and follows it", {"200": _SSE, **run_started},
                       body="DecisionsIn", parameters=[chat_id]),
        },
    }
    schemas["SearchResults"] = {
        "type": "object", "required": ["results", "next_cursor"],
        "properties": {"results": {"type": "array", "items": {
            "type": "object", "required": ["chat", "message_id", "sequence_number", "snippet"],
            "description": "A matching chat, with its newest matching message (null when only the title matches) "
                           "and about 160 characters of plain text around the first matching word.",
            "properties": {"chat": {"$ref": _REF.format(model="Chat")}, "message_id": {"type": ["string", "null"]},
                           "sequence_number": {"type": ["integer", "null"], "minimum": 1},
                           "snippet": {"type": "string"}}}},
            "next_cursor": {"type": ["string", "null"], "description": "Pass as `cursor` for the next page."}},
    }
    paths["/api/search"] = {"get": op(
        "Search the caller's chats: every word of `q` (as a word prefix, case ignored) in the title or in one "
        "message's text; newest first", {
            "200": _json(_REF.format(model="SearchResults")),
            "400": _error_response("`q` is empty or too long, `limit` or `cursor` is not a number in range, or "
                                   "another query parameter was given.")},
        parameters=[{"name": "q", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1,
                                                                               "maxLength": 200}},
                    {"name": "limit", "in": "query", "required": False,
                     "schema": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20}},
                    {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}}])}
    paths.update(_protocol_paths(op, schemas, chat_id, run_started))
    paths.update(file_paths(op, chat_id, _error_response))
    branch_paths(paths, op, chat_id, run_started)
    plain = {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}
    paths["/api/me"] = {"get": op("Who this API token belongs to (the user's name)", {"200": {
        "description": "The user", "content": {"application/json": {"schema": {
            "type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"},
                "suggestions": {"type": "array", "items": {"type": "string"},
                                "description": "Prompts the page offers in an empty chat"}}}}}}})}
    paths["/api/models"] = {"get": op("The models chats choose from, the default first", {"200": {
        "description": "The models", "content": {"application/json": {"schema": {
            "type": "object", "required": ["models"], "properties": {"models": {"type": "array", "items": {
                "type": "object", "required": ["id", "label", "default"], "properties": {
                    "id": {"type": "string"}, "label": {"type": "string"}, "default": {"type": "boolean"}}}}}}}}}})}
    paths["/healthz"] = {"get": {"summary": "The process is up", "responses": {"200": plain}}}
    paths["/readyz"] = {"get": {"summary": "Ready to serve (database reachable, accepting runs)",
                                "responses": {"200": plain, "503": plain}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "toolwire chat server", "version": "1",
                 "description": "Chats with an agent whose runs outlive their requests; events stream as SSE and "
                                "resume at any event id. See the server guide (docs/guides/server.md)."},
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
