"""Switching providers in the middle of a conversation.

Every assistant turn below is a real provider's recorded stream, served by `httpx.MockTransport` and
parsed by toolwire on its real HTTP path; the history then goes to another provider, and the request
body that reached the transport is checked against that provider's rules. Each `*_problems` validator
encodes the documented request rules whose violation the provider answers with a 400 (call/result
pairing, id formats, role order, fields the API does not know, signatures it did not issue), so
every captured request is checked as a whole, not only the few fields a test looks at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from tests.wire.helpers import chunked_transport, recorded_body
from tests.wire.test_provider_rules import (
    Body,
    anthropic_problems,
    cohere_problems,
    gemini_problems,
    mistral_problems,
    ollama_problems,
    openai_chat_problems,
    responses_problems,
)
from toolwire import (
    InvalidToolCallPart,
    Message,
    ProviderToolPart,
    ThinkingPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    get_model,
)
from toolwire.messages import dump_messages, load_messages

# -- recorded turns ------------------------------------------------------------------------------

OPENAI_PARALLEL = "openai-chat/gpt-4o_parallel-2-tools.magentic.sse"
OPENAI_TEXT_THEN_TOOL = "openai-chat/gpt-4o_text-then-tool.magentic.sse"
ANTHROPIC_THINKING = "anthropic/haiku-4.5_thinking-signature-then-tool-empty-args.llm-anthropic.sse"
ANTHROPIC_TEXT = "anthropic/haiku-4.5_text-only.ruby_llm.sse"
ANTHROPIC_PARALLEL = "anthropic/claude-3-opus_parallel-2-tools.magentic.sse"
ANTHROPIC_REDACTED = "anthropic/sonnet-4.5_redacted-thinking-then-text.pydantic-ai.sse"
ANTHROPIC_WEB_SEARCH = "anthropic/sonnet-4_server-web-search-tool.pydantic-ai.sse"
GEMINI3_SIGNED_CALL = "gemini/gemini-3-pro_call-empty-args-thought-signature.pydantic-ai.sse"
GEMINI3_FOUR_CALLS = "gemini/gemini-3-flash_streamed-partial-args-no-args-calls.vercel.chunks.jsonl"
GEMINI_THOUGHT_THEN_CALL = "gemini/gemini-2.5-flash_thought-then-call-no-args.jsonarray.llm-gemini.json"
GEMINI_THINKING_TEXT = "gemini/gemini-2.5-pro_thinking-text-only.pydantic-ai.sse"
MISTRAL_PARALLEL = "mistral/mistral-large_parallel-2-tools-one-chunk.magentic.sse"
MISTRAL_TEXT = "mistral/mistral-small_text-only.ruby_llm.sse"
RESPONSES_REASONING_CALL = "openai-responses/gpt-5_reasoning-then-function-call.pydantic-ai.sse"
RESPONSES_WEB_SEARCH = "openai-responses/gpt-5_reasoning-then-hosted-web-search-call-then-text.pydantic-ai.sse"
COHERE_PLAN_TWO_CALLS = "cohere/tool-plan-then-2-tool-calls.vercel.chunks.jsonl"
OLLAMA_THINKING_CALL = "ollama/gpt-oss-120b_cloud_thinking-and-tool-call_NON-STREAMED.langchaingo.json"
GROQ_LONG_ID = "openai-compatible/groq_gpt-oss-120b_reasoning-then-tool.pydantic-ai.sse"
OPENROUTER_LONG_ID = "openai-compatible/openrouter_deepseek-v3_text-then-tool.magentic.sse"


def _tool(tool_name: str, /, **properties: str) -> ToolDefinition:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()},
              "required": list(properties)}
    return ToolDefinition(name=tool_name, description=f"The {tool_name} tool.", parameters=schema)


TOOLS = [
    _tool("plus", a="integer", b="integer"), _tool("minus", a="integer", b="integer"),
    _tool("fixed_version"), _tool("get_country"), _tool("final_result", result="integer"),
    _tool("weather", location="string"), _tool("cityAttractions", city="string"),
    _tool("getWeather", location="string"), _tool("read_theme"), _tool("read_screen", id="string"),
    _tool("get_something_by_name", name="string"), _tool("get_weather", location="string"),
]


# -- talking to each provider --------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    spec: str
    problems: Callable[[Body], list[str]]
    text_answer: str
    """A recorded answer, for requests whose answer the test does not look at."""
    content_type: str = "text/event-stream"


TARGETS: dict[str, Target] = {
    "openai-chat": Target("openai:gpt-4o", openai_chat_problems, "openai-chat/gpt-4o_text-only-max-tokens.mirascope.sse"),
    "anthropic": Target("anthropic:claude-haiku-4-5", anthropic_problems, ANTHROPIC_TEXT),
    "gemini": Target("gemini:gemini-3-pro-preview", gemini_problems, GEMINI_THINKING_TEXT),
    "mistral": Target("mistral:mistral-large-latest", mistral_problems, MISTRAL_TEXT),
    "openai-responses": Target("openai-responses:gpt-5", responses_problems,
                               "openai-responses/openrouter_gpt-oss-20b_no-event-lines-text-only.pydantic-ai.sse"),
    "cohere": Target("cohere:command-a-03-2025", cohere_problems, "cohere/text-only.langchain-cohere.sse"),
    "ollama": Target("ollama:gpt-oss:120b", ollama_problems, "ollama/llama3.1_text-only-api-chat.magentic.ndjson",
                     "application/x-ndjson"),
}


def answer_value(call: ToolCallPart) -> Any:
    """A tool result that depends on the call, so a result sent with the wrong call would show."""
    args = call.arguments
    if call.name == "plus":
        return args["a"] + args["b"]
    if call.name == "minus":
        return args["a"] - args["b"]
    if call.name == "fixed_version":
        return "1.2.3"
    return {"tool": call.name, "arguments": args}


class Conversation:
    """A history that moves between providers; every request it sends is captured and validated."""

    def __init__(self, *messages: Message) -> None:
        self.history: list[Message] = list(messages)

    async def send(self, target: str, fixture: str, *, keep: bool = True,
                   host: str | None = None) -> tuple[Body, Message]:
        """Stream the recorded `fixture` as `target`'s answer to the history; return the request and answer.

        `host` names another provider speaking the same protocol (`"groq:openai/gpt-oss-120b"`).
        """
        seen: list[httpx.Request] = []
        spec = TARGETS[target]
        transport = chunked_transport(recorded_body(fixture), content_type=spec.content_type, seen=seen)
        async with httpx.AsyncClient(transport=transport) as client:
            model = get_model(host or spec.spec, api_key="test-key", http_client=client)
            async with model.stream(self.history, tools=TOOLS) as response:
                async for _ in response:
                    pass
        assert response.message is not None
        (request,) = seen
        body: Body = orjson.loads(request.content)
        problems = spec.problems(body)
        assert problems == [], f"{target} would reject this request: {problems}"
        if keep:
            self.history.append(response.message)
        return body, response.message

    def answer(self, message: Message, *, failing: str | None = None) -> None:
        """Append one user message with every result of `message`'s calls, in the reverse of the calls' order."""
        results = [ToolResultPart(call_id=c.id, name=c.name, result=answer_value(c), is_error=c.name == failing)
                   for c in reversed(message.tool_calls)]
        self.history.append(Message.tool_results(results))


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def contains(body: Body, needle: str) -> bool:
    return any(needle in s for s in strings(body))


_OPAQUE_KEYS = {"signature", "thoughtSignature", "data", "encrypted_content", "encrypted_index", "item_id", "id",
                "response_id"}


def _opaque(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _OPAQUE_KEYS and isinstance(item, str):
                yield item
            yield from _opaque(item)
    elif isinstance(value, list):
        for item in value:
            yield from _opaque(item)


def opaque_values(message: Message) -> set[str]:
    """The provider-issued opaque strings a message carries (signatures, encrypted blobs, item/response ids)."""
    found = set(_opaque(message.metadata))
    for part in message.parts:
        if isinstance(part, ThinkingPart) and part.signature:
            found.add(part.signature)
        if isinstance(part, ProviderToolPart):
            found.add(part.id)
        found.update(_opaque(getattr(part, "provider_data", None)))
    call_ids = {p.id for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}
    return {s for s in found if len(s) >= 8 and s not in call_ids}


def leaked(body: Body, messages: list[Message]) -> list[str]:
    """The opaque values of `messages` that appear somewhere in a request body."""
    return [secret for m in messages for secret in sorted(opaque_values(m)) if contains(body, secret)]


def thinking_texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if isinstance(p, ThinkingPart) and p.text]


def signature_of(message: Message) -> str:
    (signature,) = [p.signature for p in message.parts if isinstance(p, ThinkingPart) and p.signature]
    return signature


# -- the conversations ---------------------------------------------------------------------------

QUESTION = "What are 2+3 and 3-2? Then tell me the fixed version and which country I am in."


async def _openai_anthropic_gemini(conv: Conversation) -> dict[str, Message]:
    """Turns 1-3 of the tour: OpenAI's parallel calls, Anthropic's signed thinking, Gemini 3's signed call."""
    _, openai_turn = await conv.send("openai-chat", OPENAI_PARALLEL)
    conv.answer(openai_turn)
    _, anthropic_turn = await conv.send("anthropic", ANTHROPIC_THINKING)
    conv.answer(anthropic_turn)
    _, gemini_turn = await conv.send("gemini", GEMINI3_SIGNED_CALL)
    conv.answer(gemini_turn, failing="get_country")
    return {"openai": openai_turn, "anthropic": anthropic_turn, "gemini": gemini_turn}


@pytest.mark.anyio
async def test_openai_then_anthropic_then_gemini_then_mistral() -> None:
    """gpt-4o_parallel-2-tools → haiku-4.5_thinking-signature-then-tool-empty-args →
    gemini-3-pro_call-empty-args-thought-signature → mistral-large_parallel-2-tools-one-chunk."""
    conv = Conversation(Message.system("Use the tools."), Message.user(QUESTION))

    # 1. OpenAI Chat Completions answers with two parallel calls; the results come back in reverse order.
    _, openai_turn = await conv.send("openai-chat", OPENAI_PARALLEL)
    openai_ids = [c.id for c in openai_turn.tool_calls]
    assert [c.name for c in openai_turn.tool_calls] == ["plus", "minus"]
    conv.answer(openai_turn)

    # 2. To Anthropic: OpenAI's ids are valid there and are kept; each result answers its own call.
    sent, anthropic_turn = await conv.send("anthropic", ANTHROPIC_THINKING)
    assert [b["id"] for b in sent["messages"][1]["content"]] == openai_ids
    results = {b["tool_use_id"]: b["content"] for b in sent["messages"][2]["content"]}
    assert results == {openai_ids[0]: "5", openai_ids[1]: "1"}
    assert sent["system"] == "Use the tools."
    assert not {"tool_calls", "tool_call_id", "function", "stream_options"} & set(strings(sent))
    anthropic_signature = signature_of(anthropic_turn)
    (anthropic_thinking,) = thinking_texts(anthropic_turn)
    assert [(c.name, c.arguments) for c in anthropic_turn.tool_calls] == [("fixed_version", {})]
    conv.answer(anthropic_turn)

    # The history survives JSON in the middle of the tour: every provider gets the same request from it.
    before = {target: await conv.send(target, TARGETS[target].text_answer, keep=False) for target in TARGETS}
    restored = load_messages(dump_messages(conv.history))
    assert restored == conv.history
    conv.history = restored
    for target in TARGETS:
        after, _ = await conv.send(target, TARGETS[target].text_answer, keep=False)
        assert after == before[target][0], target

    # 3. To Gemini: Anthropic's signed thinking stays behind, the responses follow each turn's calls.
    sent, gemini_turn = await conv.send("gemini", GEMINI3_SIGNED_CALL)
    assert not contains(sent, anthropic_signature)
    assert not contains(sent, anthropic_thinking)
    assert not any(p.get("thought") for c in sent["contents"] for p in c["parts"])
    turns = [[p["functionCall"]["name"] for p in c["parts"] if "functionCall" in p] for c in sent["contents"]]
    answers = [[(p["functionResponse"]["name"], p["functionResponse"]["response"])
                for p in c["parts"] if "functionResponse" in p] for c in sent["contents"]]
    assert [t for t in turns if t] == [["plus", "minus"], ["fixed_version"]]
    assert [a for a in answers if a] == [[("plus", {"result": 5}), ("minus", {"result": 1})],
                                         [("fixed_version", {"result": "1.2.3"})]]
    gemini_signature = gemini_turn.tool_calls[0].provider_data["gemini"]["thoughtSignature"]  # type: ignore[index]
    conv.answer(gemini_turn, failing="get_country")

    # 4. To Mistral: every id becomes 9 alphanumerics, a call and its result share one, nothing foreign.
    first, mistral_turn = await conv.send("mistral", MISTRAL_PARALLEL)
    originals = [c.id for m in conv.history[:-1] for c in m.tool_calls]
    sent_ids = [c["id"] for m in first["messages"] for c in m.get("tool_calls") or ()]
    mapping = dict(zip(originals, sent_ids, strict=True))
    assert len(set(mapping.values())) == len(mapping), "two calls were given the same id"
    result_ids = [m["tool_call_id"] for m in first["messages"] if m["role"] == "tool"]
    expected_results = [mapping[r.call_id] for m in conv.history for r in m.tool_results_parts]
    assert result_ids == expected_results
    for secret in (anthropic_signature, anthropic_thinking, gemini_signature):
        assert not contains(first, secret)
    assert not any(isinstance(m.get("content"), list) for m in first["messages"])
    assert [c.id for c in mistral_turn.tool_calls] == ["nqjf8Hqe1", "ATcpCKul3"]
    conv.answer(mistral_turn)

    # A second Mistral request: the ids of the earlier turns have not moved, Mistral's own are unchanged.
    second, _ = await conv.send("mistral", MISTRAL_TEXT)
    assert second["messages"][:len(first["messages"])] == first["messages"]
    own = [c["id"] for c in second["messages"][len(first["messages"])]["tool_calls"]]
    assert own == ["nqjf8Hqe1", "ATcpCKul3"]


@pytest.mark.anyio
async def test_a_tour_of_every_provider_and_back_keeps_each_ones_opaque_data_at_home() -> None:
    """The first tour, then gpt-5_reasoning-then-function-call (Responses), tool-plan-then-2-tool-calls
    (Cohere), gpt-oss-120b_cloud_thinking-and-tool-call (Ollama), and back to Anthropic, Gemini and OpenAI."""
    conv = Conversation(Message.user(QUESTION))
    turns = await _openai_anthropic_gemini(conv)
    _, mistral_turn = await conv.send("mistral", MISTRAL_PARALLEL)
    conv.answer(mistral_turn)
    await conv.send("mistral", MISTRAL_TEXT)
    conv.history.append(Message.user("Now the weather, please."))

    # OpenAI Responses: no reasoning items and no item ids, as none of these turns came from it.
    sent, responses_turn = await conv.send("openai-responses", RESPONSES_REASONING_CALL)
    assert [i for i in sent["input"] if i.get("type") == "reasoning" or "id" in i] == []
    assert leaked(sent, conv.history[:-1]) == []
    conv.answer(responses_turn)
    # Cohere: another provider's reasoning may travel as a plan, as text only; signatures stay behind.
    sent, cohere_turn = await conv.send("cohere", COHERE_PLAN_TWO_CALLS)
    assert leaked(sent, conv.history[:-1]) == []
    conv.answer(cohere_turn)
    # Ollama: plain-text thinking of every provider, never a signature.
    sent, ollama_turn = await conv.send("ollama", OLLAMA_THINKING_CALL)
    assert leaked(sent, conv.history[:-1]) == []
    conv.answer(ollama_turn)

    # Back at Anthropic: its own thinking comes back exactly as signed, before its call; nobody else's.
    sent, _ = await conv.send("anthropic", ANTHROPIC_TEXT)
    thinking = [b for m in sent["messages"] for b in m["content"] if b["type"] in ("thinking", "redacted_thinking")]
    anthropic_turn = turns["anthropic"]
    assert thinking == [{"type": "thinking", "thinking": thinking_texts(anthropic_turn)[0],
                         "signature": signature_of(anthropic_turn)}]
    own = next(m for m in sent["messages"] if m["content"][0]["type"] == "thinking")
    assert [b["type"] for b in own["content"]] == ["thinking", "tool_use"]
    assert own["content"][1]["id"] == anthropic_turn.tool_calls[0].id
    conv.history.append(Message.user("Thanks. One more thing."))

    # Back at Gemini: its signature is on its own call again; the foreign turns carry no foreign data.
    sent, _ = await conv.send("gemini", GEMINI_THINKING_TEXT)
    gemini_call = turns["gemini"].tool_calls[0]
    signed = [p for c in sent["contents"] for p in c["parts"]
              if p.get("functionCall", {}).get("name") == gemini_call.name]
    assert [p["thoughtSignature"] for p in signed] == [gemini_call.provider_data["gemini"]["thoughtSignature"]]  # type: ignore[index]
    assert leaked(sent, [m for m in conv.history if m.metadata.get("provider") != "gemini"]) == []

    # And OpenAI Chat Completions once more: every call of every provider, paired, nothing opaque.
    sent, _ = await conv.send("openai-chat", OPENAI_TEXT_THEN_TOOL)
    sent_calls = [c["id"] for m in sent["messages"] for c in m.get("tool_calls") or ()]
    assert sent_calls == [c.id for m in conv.history[:-1] for c in m.tool_calls]
    assert leaked(sent, conv.history[:-1]) == []


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["openai-chat", "anthropic"])
async def test_generated_gemini_ids_and_mistral_ids_go_to(target: str) -> None:
    """gemini-3-flash_streamed-partial-args-no-args-calls, then mistral-large_parallel-2-tools-one-chunk."""
    conv = Conversation(Message.user("Read the theme, then screens A, B and C; then add 1 and 2."))
    _, gemini_turn = await conv.send("gemini", GEMINI3_FOUR_CALLS)
    calls = gemini_turn.tool_calls
    assert [c.name for c in calls] == ["read_theme", "read_screen", "read_screen", "read_screen"]
    assert len({c.id for c in calls}) == 4, "same-name calls without ids must get distinct ids"
    conv.answer(gemini_turn)
    _, mistral_turn = await conv.send("mistral", MISTRAL_PARALLEL)
    conv.answer(mistral_turn)

    sent, _ = await conv.send(target, TARGETS[target].text_answer)
    if target == "openai-chat":
        sent_calls = {c["id"]: orjson.loads(c["function"]["arguments"])
                      for m in sent["messages"] for c in m.get("tool_calls") or ()}
        sent_results = {m["tool_call_id"]: orjson.loads(m["content"]) for m in sent["messages"] if m["role"] == "tool"}
    else:
        blocks = [b for m in sent["messages"] for b in m["content"]]
        sent_calls = {b["id"]: b["input"] for b in blocks if b["type"] == "tool_use"}
        sent_results = {b["tool_use_id"]: orjson.loads(b["content"]) for b in blocks if b["type"] == "tool_result"}
    # Both ids are valid at both targets, so they travel unchanged; each result still answers its call.
    every_call = [*calls, *mistral_turn.tool_calls]
    assert sent_calls == {c.id: c.arguments for c in every_call}
    assert sent_results == {c.id: answer_value(c) for c in every_call}
    assert sent_results[calls[2].id] == {"tool": "read_screen", "arguments": {"id": "B"}}
    assert leaked(sent, [gemini_turn]) == []
    assert not contains(sent, thinking_texts(gemini_turn)[0])


@pytest.mark.anyio
@pytest.mark.parametrize("target", list(TARGETS))
async def test_long_ids_from_openai_compatible_hosts_go_to(target: str) -> None:
    """groq_gpt-oss-120b_reasoning-then-tool, then openrouter_deepseek-v3_text-then-tool: ids of 39 and 46
    characters (OpenAI accepts at most 40)."""
    conv = Conversation(Message.user("Look something up, then tell me the weather in your favourite city."))
    _, groq_turn = await conv.send("openai-chat", GROQ_LONG_ID, host="groq:openai/gpt-oss-120b")
    conv.answer(groq_turn)
    _, openrouter_turn = await conv.send("openai-chat", OPENROUTER_LONG_ID,
                                            host="openrouter:deepseek/deepseek-chat")
    conv.answer(openrouter_turn)
    assert [len(m.tool_calls[0].id) for m in (groq_turn, openrouter_turn)] == [39, 46]

    await conv.send(target, TARGETS[target].text_answer)  # validated: ids, pairing, fields


@pytest.mark.anyio
@pytest.mark.parametrize("target", list(TARGETS))
async def test_a_cohere_id_for_a_long_tool_name_goes_to(target: str) -> None:
    # Cohere names a call `<tool name>_<12 characters>` (as the recordings show), so a 58-character tool
    # name gives a 71-character id: too long for both OpenAI APIs as it is.
    name = "search_customer_orders_by_date_range_and_status_of_account"
    call = ToolCallPart(id=f"{name}_k3j9x0p2m1qz", name=name, arguments={}, arguments_raw="{}")
    conv = Conversation(Message.user("Find my orders."),
                        Message(role="assistant", parts=[call], metadata={"provider": "cohere"}))
    conv.answer(conv.history[-1])
    assert len(call.id) == 71

    sent, _ = await conv.send(target, TARGETS[target].text_answer)  # validated: ids and pairing
    if target == "openai-chat":
        sent_ids = [sent["messages"][1]["tool_calls"][0]["id"], sent["messages"][2]["tool_call_id"]]
        assert len(sent_ids[0]) == 40
    elif target == "openai-responses":
        sent_ids = [item["call_id"] for item in sent["input"][1:3]]
        assert len(sent_ids[0]) == 64
    else:
        return  # no length limit there (and Mistral rewrites every foreign id anyway)
    assert sent_ids[0] == sent_ids[1], "the call and its result must carry the same id"
    assert sent_ids[0].startswith(name[:20])


OPAQUE_SOURCES = [
    ("anthropic", ANTHROPIC_REDACTED), ("anthropic", ANTHROPIC_WEB_SEARCH), ("anthropic", ANTHROPIC_PARALLEL),
    ("openai-responses", RESPONSES_REASONING_CALL), ("openai-responses", RESPONSES_WEB_SEARCH),
    ("gemini", GEMINI3_SIGNED_CALL), ("gemini", GEMINI_THOUGHT_THEN_CALL), ("gemini", GEMINI_THINKING_TEXT),
    ("cohere", COHERE_PLAN_TWO_CALLS), ("ollama", OLLAMA_THINKING_CALL),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("source", "fixture", "target"), [
    pytest.param(source, fixture, target, id=f"{fixture.split('/')[1]}-to-{target}")
    for source, fixture in OPAQUE_SOURCES for target in TARGETS if target != source
])
async def test_opaque_data_never_reaches_another_provider(source: str, fixture: str, target: str) -> None:
    conv = Conversation(Message.user("Go on."))
    _, turn = await conv.send(source, fixture)
    if turn.tool_calls:
        conv.answer(turn)
    else:
        conv.history.append(Message.user("And then?"))
    secrets = opaque_values(turn)
    assert secrets or source in ("cohere", "ollama"), "the recording should carry opaque data"

    sent, _ = await conv.send(target, TARGETS[target].text_answer)
    assert leaked(sent, [turn]) == []
    if target in ("anthropic", "gemini", "mistral", "openai-chat", "openai-responses"):
        # These targets only take back reasoning they produced: any other provider's is left out.
        for text in thinking_texts(turn):
            assert not contains(sent, text)
