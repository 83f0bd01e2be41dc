"""What each provider's API accepts: one validator per wire protocol, and proof that each catches what it claims.

Each `*_problems` function encodes documented request rules whose violation the provider answers with a 400
(call/result pairing, id formats, role order, fields the API does not know, signatures it did not issue).
tests/wire/test_cross_provider.py checks every request it captures with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest

Body = dict[str, Any]

# -- what each provider accepts ------------------------------------------------------------------


def _extra_fields(obj: dict[str, Any], allowed: set[str], where: str, out: list[str]) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        out.append(f"{where}: {extra} are not fields of this API")


def _json_object(text: Any) -> bool:
    try:
        return isinstance(text, str) and isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def _chat_pairing(messages: list[dict[str, Any]], out: list[str]) -> None:
    """OpenAI-style rule: an assistant's `tool_calls` are answered by `tool` messages right after it."""
    pending: dict[str, bool] = {}
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                out.append(f"messages[{i}]: tool_call_id {call_id!r} answers no call of the assistant message before")
            elif pending[call_id]:
                out.append(f"messages[{i}]: call {call_id!r} is answered twice")
            else:
                pending[call_id] = True
            continue
        unanswered = [k for k, done in pending.items() if not done]
        if unanswered:
            out.append(f"messages[{i}]: calls {unanswered} have no tool message before the next {role} message")
        pending = {}
        if role == "assistant":
            ids = [call.get("id") for call in message.get("tool_calls") or ()]
            if len(set(ids)) != len(ids):
                out.append(f"messages[{i}]: duplicate tool-call ids {ids}")
            pending = dict.fromkeys(ids, False)
    unanswered = [k for k, done in pending.items() if not done]
    if unanswered:
        out.append(f"calls {unanswered} at the end of the history have no tool message")


def _chat_messages(body: Body, fields: set[str], roles: dict[str, set[str]], call_fields: set[str],
                   out: list[str]) -> list[tuple[int, str, dict[str, Any]]]:
    """The checks every OpenAI-shaped API shares; returns the messages of known roles for the API's own."""
    _extra_fields(body, fields, "body", out)
    known: list[tuple[int, str, dict[str, Any]]] = []
    for i, message in enumerate(body["messages"]):
        role = message.get("role")
        if role not in roles:
            out.append(f"messages[{i}]: unknown role {role!r}")
            continue
        _extra_fields(message, roles[role], f"messages[{i}]", out)
        for j, call in enumerate(message.get("tool_calls") or ()):
            _extra_fields(call, call_fields, f"messages[{i}].tool_calls[{j}]", out)
            if not _json_object(call["function"].get("arguments")):
                out.append(f"messages[{i}].tool_calls[{j}]: arguments must be a JSON object encoded as a string")
        known.append((i, role, message))
    _chat_pairing(body["messages"], out)
    return known


_OPENAI_CHAT_FIELDS = {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls",
                       "max_completion_tokens", "max_tokens", "temperature", "top_p", "stop", "reasoning_effort",
                       "response_format"}
_OPENAI_CHAT_MESSAGE = {"system": {"role", "content", "name"}, "developer": {"role", "content", "name"},
                        "user": {"role", "content", "name"}, "tool": {"role", "content", "tool_call_id"},
                        "assistant": {"role", "content", "name", "tool_calls", "refusal"}}


def openai_chat_problems(body: Body) -> list[str]:
    """Chat Completions: known fields only, string arguments, ids of at most 40 characters, pairing."""
    out: list[str] = []
    for i, role, message in _chat_messages(body, _OPENAI_CHAT_FIELDS, _OPENAI_CHAT_MESSAGE,
                                           {"id", "type", "function"}, out):
        if role == "assistant" and message.get("content") is None and not message.get("tool_calls"):
            out.append(f"messages[{i}]: content may be null only next to tool_calls")
        out.extend(f"messages[{i}]: tool-call id {c['id']!r} must have 1 to 40 characters"
                   for c in message.get("tool_calls") or () if not 0 < len(c.get("id") or "") <= 40)
        if role == "tool" and not isinstance(message.get("content"), str):
            out.append(f"messages[{i}]: tool content must be a string")
    return out


_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")
_MISTRAL_FIELDS = {"model", "messages", "stream", "tools", "tool_choice", "parallel_tool_calls", "max_tokens",
                   "temperature", "top_p", "stop", "random_seed", "reasoning_effort", "response_format",
                   "prompt_mode", "safe_prompt"}
_MISTRAL_MESSAGE = {"system": {"role", "content"}, "user": {"role", "content"},
                    "assistant": {"role", "content", "tool_calls", "prefix"},
                    "tool": {"role", "content", "tool_call_id", "name"}}


def mistral_problems(body: Body) -> list[str]:
    """Mistral: 9-character `[a-zA-Z0-9]` ids, no user right after a tool result, last role user or tool."""
    out: list[str] = []
    messages = body["messages"]
    for i, role, message in _chat_messages(body, _MISTRAL_FIELDS, _MISTRAL_MESSAGE,
                                           {"id", "type", "function", "index"}, out):
        ids = [c.get("id") for c in message.get("tool_calls") or ()]
        if role == "tool":
            ids.append(message.get("tool_call_id"))
        out.extend(f"messages[{i}]: tool call id {cid!r} is not 9 characters of [a-zA-Z0-9]"
                   for cid in ids if not (isinstance(cid, str) and _MISTRAL_ID.fullmatch(cid)))
        content = message.get("content")
        if role == "assistant" and isinstance(content, list):
            out.extend(f"messages[{i}]: content chunk type {c.get('type')!r} is not text or thinking"
                       for c in content if c.get("type") not in ("text", "thinking"))
        if role == "user" and i and messages[i - 1].get("role") == "tool":
            out.append(f"messages[{i}]: a user message may not follow a tool message")
    if messages and messages[-1].get("role") not in ("user", "tool"):
        out.append("the last message must be a user or tool message")
    return out


_COHERE_FIELDS = {"model", "messages", "stream", "tools", "tool_choice", "strict_tools", "max_tokens",
                  "temperature", "p", "k", "stop_sequences", "thinking", "response_format", "documents", "seed"}
_COHERE_MESSAGE = {"system": {"role", "content"}, "user": {"role", "content"},
                   "assistant": {"role", "content", "tool_calls", "tool_plan", "citations"},
                   "tool": {"role", "tool_call_id", "content"}}


def cohere_problems(body: Body) -> list[str]:
    """Cohere v2 chat: known fields, tool results as text or document items, pairing."""
    out: list[str] = []
    for i, role, message in _chat_messages(body, _COHERE_FIELDS, _COHERE_MESSAGE, {"id", "type", "function"}, out):
        if role == "assistant" and not message.get("content") and not message.get("tool_calls"):
            out.append(f"messages[{i}]: an assistant message needs content or tool_calls")
        content = message.get("content")
        if role == "tool" and not isinstance(content, str) and not all(
                c.get("type") in ("text", "document") for c in content or ()):
            out.append(f"messages[{i}]: tool content must be text or document items")
    return out


_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_ANTHROPIC_FIELDS = {"model", "max_tokens", "messages", "stream", "system", "thinking", "tools", "tool_choice",
                     "temperature", "top_p", "top_k", "stop_sequences", "metadata", "output_config"}
_ANTHROPIC_BLOCKS: dict[str, dict[str, set[str] | None]] = {
    "assistant": {"text": {"type", "text"}, "thinking": {"type", "thinking", "signature"},
                  "redacted_thinking": {"type", "data"}, "tool_use": {"type", "id", "name", "input"},
                  "server_tool_use": None, "web_search_tool_result": None},
    "user": {"text": {"type", "text"}, "image": {"type", "source"}, "document": {"type", "source", "title"},
             "tool_result": {"type", "tool_use_id", "content", "is_error"}},
}


def anthropic_problems(body: Body) -> list[str]:
    """Messages API: alternating roles from user, known blocks, tool ids, results right after their calls."""
    out: list[str] = []
    _extra_fields(body, _ANTHROPIC_FIELDS, "body", out)
    if not isinstance(body.get("max_tokens"), int):
        out.append("max_tokens is required")
    messages = body["messages"]
    if messages and messages[0]["role"] != "user":
        out.append("the first message must be a user message")
    uses_tools = False
    previous_uses: list[str] = []
    for i, message in enumerate(messages):
        role = message["role"]
        _extra_fields(message, {"role", "content"}, f"messages[{i}]", out)
        if i and messages[i - 1]["role"] == role:
            out.append(f"messages[{i}]: roles must alternate")
        blocks = message["content"]
        kinds = _ANTHROPIC_BLOCKS.get(role)
        if kinds is None or not isinstance(blocks, list) or not blocks:
            out.append(f"messages[{i}]: role {role!r} with content {blocks!r} is not accepted")
            continue
        for j, block in enumerate(blocks):
            where = f"messages[{i}].content[{j}]"
            if block.get("type") not in kinds:
                out.append(f"{where}: a {block.get('type')!r} block is not accepted in a {role} message")
                continue
            allowed = kinds[block["type"]]
            if allowed is not None:
                _extra_fields(block, allowed, where, out)
            if block["type"] == "text" and not block.get("text"):
                out.append(f"{where}: text blocks must be non-empty")
            if block["type"] == "thinking" and not block.get("signature"):
                out.append(f"{where}: a thinking block needs its signature")
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            uses_tools = uses_tools or bool(results)
            if any(b.get("type") == "tool_result" for b in blocks[len(results):]):
                out.append(f"messages[{i}]: tool_result blocks must come before any other content")
            out.extend(f"messages[{i}]: tool_result for {r!r} has no tool_use in the previous message"
                       for r in results if r not in previous_uses)
            missing = [u for u in previous_uses if u not in results]
            if missing:
                out.append(f"messages[{i}]: tool_use ids {missing} have no tool_result right after them")
            previous_uses = []
        else:
            previous_uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            uses_tools = uses_tools or bool(previous_uses)
            out.extend(f"messages[{i}]: tool_use id {u!r} does not match ^[a-zA-Z0-9_-]+$"
                       for u in previous_uses if not _ANTHROPIC_ID.fullmatch(u))
            if len(set(previous_uses)) != len(previous_uses):
                out.append(f"messages[{i}]: duplicate tool_use ids {previous_uses}")
    if previous_uses:
        out.append(f"tool_use ids {previous_uses} end the history without results")
    if uses_tools and not body.get("tools"):
        out.append("a request with tool_use or tool_result blocks must define tools")
    return out


_GEMINI_FIELDS = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
                  "cachedContent"}
_GEMINI_DATA = {"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
                "codeExecutionResult"}


def gemini_problems(body: Body) -> list[str]:
    """generateContent: alternating user/model contents, one datum per part, responses matching the calls,
    and a thought signature on the first call of every model step of the current turn (Gemini 3)."""
    out: list[str] = []
    _extra_fields(body, _GEMINI_FIELDS, "body", out)
    contents = body["contents"]
    turn_start = 0
    for i, content in enumerate(contents):
        _extra_fields(content, {"role", "parts"}, f"contents[{i}]", out)
        if content.get("role") not in ("user", "model"):
            out.append(f"contents[{i}]: unknown role {content.get('role')!r}")
        if i and contents[i - 1]["role"] == content["role"]:
            out.append(f"contents[{i}]: roles must alternate")
        if not content.get("parts"):
            out.append(f"contents[{i}]: parts must not be empty")
        for j, part in enumerate(content.get("parts") or ()):
            _extra_fields(part, _GEMINI_DATA | {"thought", "thoughtSignature"}, f"contents[{i}].parts[{j}]", out)
            if len(_GEMINI_DATA & set(part)) != 1:
                out.append(f"contents[{i}].parts[{j}]: a part holds exactly one kind of data")
            call = part.get("functionCall")
            if call is not None and not (set(call) <= {"name", "args", "id"} and isinstance(call.get("args"), dict)):
                out.append(f"contents[{i}].parts[{j}]: functionCall must be {{name, args (object), id?}}")
            response = part.get("functionResponse")
            if response is not None and not isinstance(response.get("response"), dict):
                out.append(f"contents[{i}].parts[{j}]: functionResponse.response must be an object")
        if content["role"] == "user" and any("text" in p for p in content.get("parts") or ()):
            turn_start = i
        responses = [p["functionResponse"]["name"] for p in content.get("parts") or () if "functionResponse" in p]
        if responses:
            previous = contents[i - 1]["parts"] if i else []
            calls = [p["functionCall"]["name"] for p in previous if "functionCall" in p]
            if responses != calls:
                out.append(f"contents[{i}]: function responses {responses} do not answer the calls {calls} in order")
    for i, content in enumerate(contents[turn_start:], turn_start):
        calls = [p for p in content.get("parts") or () if "functionCall" in p]
        if content["role"] == "model" and calls and not calls[0].get("thoughtSignature"):
            out.append(f"contents[{i}]: the first functionCall of a step of the current turn needs a thoughtSignature")
    return out


_RESPONSES_FIELDS = {"model", "input", "instructions", "stream", "tools", "tool_choice", "parallel_tool_calls",
                     "max_output_tokens", "temperature", "top_p", "reasoning", "store", "include", "text",
                     "previous_response_id"}
_RESPONSES_ITEMS = {"message": {"type", "role", "content", "id", "status"},
                    "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
                    "function_call_output": {"type", "call_id", "output"},
                    "reasoning": {"type", "id", "summary", "encrypted_content", "content", "status"}}
_RESPONSES_ITEM_PREFIX = {"message": "msg_", "function_call": "fc_", "reasoning": "rs_"}


def responses_problems(body: Body) -> list[str]:
    """Responses: known items, call ids of 1 to 64 characters, every call answered, item ids of the right kind,
    and a reasoning item always followed by the item it led to."""
    out: list[str] = []
    _extra_fields(body, _RESPONSES_FIELDS, "body", out)
    items = body["input"]
    calls: dict[str, bool] = {}
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        allowed = _RESPONSES_ITEMS.get(kind)
        if allowed is None:
            if not str(item.get("id", "")).startswith(("ws_", "fs_", "ci_", "mcp_")):
                out.append(f"input[{i}]: unknown item type {kind!r}")
            continue
        _extra_fields(item, allowed, f"input[{i}]", out)
        prefix = _RESPONSES_ITEM_PREFIX.get(kind)
        if "id" in item and prefix and not str(item["id"]).startswith(prefix):
            out.append(f"input[{i}]: {kind} item id {item['id']!r} is not one this API issued")
        if kind == "function_call":
            if not 0 < len(item["call_id"]) <= 64:
                out.append(f"input[{i}]: call_id {item['call_id']!r} must have 1 to 64 characters")
            if not _json_object(item["arguments"]):
                out.append(f"input[{i}]: arguments must be a JSON object encoded as a string")
            calls[item["call_id"]] = False
        elif kind == "function_call_output":
            if item["call_id"] not in calls and "previous_response_id" not in body:
                out.append(f"input[{i}]: no function_call with call_id {item['call_id']!r} precedes this output")
            calls[item["call_id"]] = True
        elif kind == "reasoning":
            following = items[i + 1] if i + 1 < len(items) else {}
            if following.get("type") not in ("function_call", "message", "reasoning") or following.get("role") == "user":
                out.append(f"input[{i}]: a reasoning item must be followed by the item it produced")
        elif item.get("role") not in ("user", "assistant", "system", "developer"):
            out.append(f"input[{i}]: unknown role {item.get('role')!r}")
    unanswered = [k for k, done in calls.items() if not done]
    if unanswered:
        out.append(f"function calls {unanswered} have no function_call_output")
    return out


_OLLAMA_FIELDS = {"model", "messages", "stream", "tools", "options", "format", "think", "keep_alive"}
_OLLAMA_MESSAGE = {"system": {"role", "content", "images"}, "user": {"role", "content", "images"},
                   "assistant": {"role", "content", "thinking", "tool_calls", "images"},
                   "tool": {"role", "content", "tool_name", "tool_call_id"}}


def ollama_problems(body: Body) -> list[str]:
    """Ollama /api/chat: known fields, arguments as objects, tool messages naming a call of the assistant."""
    out: list[str] = []
    _extra_fields(body, _OLLAMA_FIELDS, "body", out)
    calls: dict[str, str] = {}
    for i, message in enumerate(body["messages"]):
        role = message.get("role")
        if role not in _OLLAMA_MESSAGE:
            out.append(f"messages[{i}]: unknown role {role!r}")
            continue
        _extra_fields(message, _OLLAMA_MESSAGE[role], f"messages[{i}]", out)
        if not isinstance(message.get("content"), str):
            out.append(f"messages[{i}]: content must be a string")
        if role == "assistant":
            calls = {}
            for call in message.get("tool_calls") or ():
                function = call["function"]
                if not isinstance(function.get("arguments"), dict):
                    out.append(f"messages[{i}]: arguments must be a JSON object, not {function.get('arguments')!r}")
                calls[call.get("id", "")] = function["name"]
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id is not None and calls.get(call_id) != message.get("tool_name"):
                out.append(f"messages[{i}]: tool result {call_id!r} / {message.get('tool_name')!r} answers no call "
                           "of the assistant message before it")
    return out


# -- the validators catch what they claim to -----------------------------------------------------


def _chat(messages: list[dict[str, Any]]) -> Body:
    return {"model": "m", "messages": messages, "stream": True}


_CALL = {"id": "call_8Sp49rZGndlZALo0uq1XvA7A", "type": "function", "function": {"name": "f", "arguments": "{}"}}

BROKEN_REQUESTS: list[Any] = [
    pytest.param(openai_chat_problems, _chat([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{**_CALL, "id": "x" * 41}]},
        {"role": "tool", "tool_call_id": "x" * 41, "content": "1"}]), "1 to 40 characters", id="openai-chat-long-id"),
    pytest.param(openai_chat_problems, _chat([
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [_CALL]},
        {"role": "user", "content": "and?"}]), "have no tool message", id="openai-chat-unanswered-call"),
    pytest.param(mistral_problems, _chat([
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [_CALL]},
        {"role": "tool", "tool_call_id": _CALL["id"], "content": "1"}]), "9 characters", id="mistral-foreign-id"),
    pytest.param(mistral_problems, _chat([
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
                                            "tool_calls": [{**_CALL, "id": "abcDEF123"}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "1"}, {"role": "user", "content": "and?"}]),
        "may not follow a tool", id="mistral-user-after-tool"),
    pytest.param(cohere_problems, _chat([{"role": "user", "content": "hi"},
                                         {"role": "tool", "tool_call_id": "x", "content": [{"type": "json"}]}]),
        "text or document", id="cohere-tool-content"),
    pytest.param(anthropic_problems, {"model": "m", "max_tokens": 10, "tools": [{}], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call.1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call.1"}]}]},
        "does not match", id="anthropic-invalid-id"),
    pytest.param(anthropic_problems, {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2"}]}]},
        "has no tool_use in the previous message", id="anthropic-wrong-result"),
    pytest.param(gemini_problems, {"contents": [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "s"},
                                    {"functionCall": {"name": "g", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {}}},
                                   {"functionResponse": {"name": "f", "response": {}}}]}]},
        "in order", id="gemini-responses-out-of-order"),
    pytest.param(gemini_problems, {"contents": [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]},
        "needs a thoughtSignature", id="gemini-unsigned-call"),
    pytest.param(responses_problems, {"model": "m", "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "call_1", "output": "1"}]}, "no function_call",
        id="openai-responses-orphan-output"),
    pytest.param(ollama_problems, {"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]},
        "must be a JSON object", id="ollama-string-arguments"),
]


@pytest.mark.parametrize(("problems", "body", "expected"), BROKEN_REQUESTS)
def test_validators_reject_what_the_provider_rejects(problems: Callable[[Body], list[str]], body: Body,
                                                     expected: str) -> None:
    found = problems(body)
    assert any(expected in p for p in found), found
