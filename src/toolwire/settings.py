"""Per-request model settings, shared by every wire protocol.

A protocol maps each setting to its provider's field (OpenAI `max_completion_tokens`, Anthropic
`max_tokens`, Gemini `generationConfig.maxOutputTokens`...) and ignores what its provider cannot do.
`extra_body` is merged into the request JSON last, for provider options toolwire does not model.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["ModelSettings", "OutputSchema", "ToolChoice"]

ToolChoice = Literal["auto", "none", "required"] | dict[str, str]
"""`"auto"`, `"none"`, `"required"`, or `{"name": "tool_name"}` to force one tool."""


class OutputSchema(TypedDict, total=False):
    """Native structured output: the JSON schema the final answer must follow."""

    name: str
    schema: dict[str, Any]
    strict: bool


class ModelSettings(TypedDict, total=False):
    max_tokens: int
    temperature: float
    top_p: float
    stop: list[str]
    tool_choice: ToolChoice
    parallel_tool_calls: bool
    thinking: bool | int | str
    """Ask for reasoning: `True`, a token budget (Anthropic, Gemini) or an effort (`"low"`...)."""
    output_schema: OutputSchema
    stateful: bool
    """OpenAI Responses: send `previous_response_id` and only the new items."""
    extra_body: dict[str, Any]
    extra_headers: dict[str, str]


def merge_extra(body: dict[str, Any], settings: ModelSettings) -> dict[str, Any]:
    extra = settings.get("extra_body")
    if extra:
        body.update(extra)
    return body
