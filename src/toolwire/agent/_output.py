"""Typed output: how a run asks for an object of a type, checks it, and previews it while it streams.

Two ways to get an object from a model, chosen per provider from the capability table:
- native: the request carries the JSON schema (`settings["output_schema"]`, which each wire protocol
  maps to its field: OpenAI `response_format`, Gemini `responseJsonSchema`, Ollama `format`...; for
  JSON-mode hosts a `json_object` response format plus the schema in the instructions) and the final
  answer's text is the JSON;
- tool: the model is offered one more tool, `final_result`, whose arguments are the object; a valid
  call ends the run (Anthropic, and models whose provider is unknown, since every tool-calling model
  can do it).

Either way the answer is validated with pydantic; a failure goes back to the model (a user message on
the native path, an error result on the tool path) for a bounded number of retries.

Partials are honest about what they are: `partial_data` is the JSON value streamed so far (plain dicts
and lists, the last string possibly cut short), and `partial` is an object of the output type only when
that value validates as one (pydantic's partial mode drops an unfinished last list item); a partial is
never an object of the type holding fields that were not given or did not validate.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import orjson
from pydantic import TypeAdapter, ValidationError

from ..exceptions import ModelRetry, OutputRejected, OutputValidationError, UserError
from ..models import HTTPModel, Model
from ..providers import get_provider
from ..settings import ModelSettings
from ..tools import RunContext, ToolDefinition, positional_arity

__all__ = [
    "FINAL_RESULT_TOOL",
    "MISSING",
    "OutputMode",
    "OutputSpec",
    "OutputValidationError",
    "OutputValidator",
    "apply_validators",
]

OutputMode: TypeAlias = Literal["auto", "native", "tool"]
"""How typed output is requested: `"auto"` (from the provider's capability), `"native"` (the
provider's structured output) or `"tool"` (a `final_result` tool)."""

FINAL_RESULT_TOOL = "final_result"

OutputKind: TypeAlias = Literal["schema", "json_mode", "tool"]

MISSING: Any = object()
"""No value (yet): a partial with nothing to show, an uncached adapter."""


OutputValidator: TypeAlias = Callable[[Any], Any] | Callable[[RunContext[Any], Any], Any]
"""Checks (and may change) a run's answer: `fn(output)` or `fn(ctx, output)`, sync or async. It returns the
output to use (`None` keeps it as it is) or raises `OutputRejected("why")` (or `ModelRetry("why")`) to ask
the model again."""


@dataclass(slots=True, frozen=True)
class Checked:
    """The outcome of checking an answer: the value, or what to tell the model about it."""

    value: Any = None
    error: str | None = None
    rejected: bool = False
    """The error is an output validator's rejection, not a schema problem."""


async def apply_validators(validators: Sequence[OutputValidator], context: RunContext[Any], value: Any) -> Checked:
    """Run the output validators in order on a valid answer.

    `OutputRejected` (or `ModelRetry`) becomes a rejection to send back to the model; any other exception
    is a bug in the validator and propagates (the run ends with it).
    """
    for validator in validators:
        try:
            outcome: Any = validator(context, value) if positional_arity(validator) >= 2 else validator(value)  # type: ignore[call-arg]
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except (OutputRejected, ModelRetry) as exc:
            return Checked(error=exc.message, rejected=True)
        if outcome is not None:
            value = outcome
    return Checked(value=value)


def rejection_text(error: str) -> str:
    """The user message that answers a rejected text or native answer."""
    return f"Your answer was not accepted: {error} Answer again."


def check_validators(validators: Sequence[Any]) -> list[OutputValidator]:
    for validator in validators:
        if not callable(validator):
            raise UserError(f"An output validator is a function of the output (or of the run context and the "
                            f"output); got {type(validator).__name__}.")
    return list(validators)


class OutputSpec:
    """The output type of an agent, and how one run with one model obtains it."""

    def __init__(self, output_type: Any, *, kind: OutputKind, strict_mode: bool = False) -> None:
        self.output_type = output_type
        self.kind: OutputKind = kind
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as exc:
            raise UserError(
                f"output_type={output_type!r} cannot be used for typed output ({type(exc).__name__}: {exc}). "
                "Use a pydantic model, a dataclass, a TypedDict (from typing_extensions on Python 3.11) "
                "or another type pydantic can validate."
            ) from exc
        self.name = _schema_name(output_type)
        self.description = str(schema.get("description") or "")
        self.wrapped = schema.get("type") != "object" or "properties" not in schema
        self.schema = _wrap(schema) if self.wrapped else _without_title(schema)
        self.strict = _strict_compatible(self.schema)
        if strict_mode and not self.strict:
            strict = strict_schema(self.schema)
            if strict is not None:
                self.schema, self.strict = strict, True

    @classmethod
    def for_model(cls, output_type: Any, model: Model, mode: OutputMode) -> OutputSpec:
        """Choose native or tool output for `model` from its provider's capability."""
        capability = _capability(model)
        kind: OutputKind
        if mode == "tool":
            kind = "tool"
        elif mode == "native":
            kind = "json_mode" if capability == "json_mode" else "schema"
        elif capability is None or capability == "tool":
            kind = "tool"
        else:
            kind = "json_mode" if capability == "json_mode" else "schema"
        return cls(output_type, kind=kind, strict_mode=kind == "schema" and _supports_strict(model))

    # -- the request -----------------------------------------------------------------------------

    @property
    def tool_definition(self) -> ToolDefinition | None:
        """The `final_result` tool offered to the model (tool output only)."""
        if self.kind != "tool":
            return None
        description = ("Give the final answer: call this tool once, when the task is done, with the answer "
                       "as its arguments.")
        if self.description:
            description += f" The answer is: {self.description}"
        return ToolDefinition(name=FINAL_RESULT_TOOL, description=description, parameters=self.schema)

    def request_settings(self, settings: ModelSettings) -> ModelSettings:
        """`settings` with what native output needs added."""
        if self.kind == "schema":
            return {**settings, "output_schema": {"name": self.name, "schema": self.schema, "strict": self.strict}}
        if self.kind == "json_mode":
            extra = {**settings.get("extra_body", {}), "response_format": {"type": "json_object"}}
            return {**settings, "extra_body": extra}
        return settings

    def instructions(self) -> str | None:
        """Text added to the system prompt: JSON-mode hosts take no schema, so the model is shown it."""
        if self.kind != "json_mode":
            return None
        return ("Answer with one JSON object and nothing else (no prose, no code fences). It must match this "
                "JSON schema:\n" + orjson.dumps(self.schema).decode())

    # -- checking answers ------------------------------------------------------------------------

    def check_text(self, text: str) -> Checked:
        """Validate a native answer (the final message's text)."""
        body = _strip_fence(text)
        if not body:
            return Checked(error="The answer was empty; it must be a JSON value matching the schema.")
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return Checked(error=f"The answer is not valid JSON ({exc}).")
        return self.check_data(data)

    def check_data(self, data: Any) -> Checked:
        """Validate parsed JSON (the answer, or the `final_result` call's arguments)."""
        if self.wrapped:
            if not isinstance(data, dict) or "result" not in data:
                return Checked(error="The answer must be a JSON object with the value under the key 'result'.")
            data = data["result"]
        try:
            return Checked(value=self.adapter.validate_python(data))
        except ValidationError as exc:
            return Checked(error=describe_errors(exc))

    def tool_error(self, error: str, *, rejected: bool = False) -> str:
        """The error result of an invalid (or rejected) `final_result` call."""
        if rejected:
            return f"The final result was not accepted: {error} Call {FINAL_RESULT_TOOL} again with a corrected answer."
        return (f"The final result does not match its schema: {error} "
                f"Call {FINAL_RESULT_TOOL} again with corrected arguments.")

    def retry_text(self, error: str, *, rejected: bool = False) -> str:
        """The user message asking a native answer again."""
        if rejected:
            return f"Your answer was not accepted: {error} Answer again with only the corrected JSON."
        return (f"Your answer does not match the required output schema: {error} "
                "Answer again with only the corrected JSON.")

    def text_answer_retry(self) -> str:
        """The user message when a tool-output model answered in text instead of calling the tool."""
        return (f"Give your final answer by calling the {FINAL_RESULT_TOOL} tool with the answer as its arguments; "
                "an answer in plain text cannot be accepted.")

    # -- previews --------------------------------------------------------------------------------

    def partial(self, snapshot: Any) -> tuple[Any, Any]:
        """`(data, value)` from a `PartialJSON` snapshot: the answer's JSON so far (`MISSING` when there is
        nothing to show) and the object of the output type it validates as (`MISSING` until it does)."""
        if self.wrapped:
            if not isinstance(snapshot, dict) or "result" not in snapshot:
                return MISSING, MISSING
            snapshot = snapshot["result"]
        if snapshot is None:
            return MISSING, MISSING
        try:
            return snapshot, self.adapter.validate_python(snapshot, experimental_allow_partial=True)
        except ValidationError:
            return snapshot, MISSING


def is_missing(value: Any) -> bool:
    return value is MISSING


def describe_errors(exc: ValidationError) -> str:
    """Validation errors as one line the model can act on."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "the value"
        if error["type"] == "missing":
            problems.append(f"{where}: this field is required")
        else:
            shown = repr(error["input"])
            if len(shown) > 80:
                shown = shown[:77] + "..."
            problems.append(f"{where}: {error['msg']} (got {shown})")
    return "; ".join(problems) + "."


def _capability(model: Model) -> str | None:
    """The provider's `structured_output` capability, or None for a model of no known provider."""
    if isinstance(model, HTTPModel):
        return model.provider.capabilities.structured_output
    try:
        return get_provider(model.provider_name).capabilities.structured_output
    except UserError:
        return None


def _schema_name(output_type: Any) -> str:
    raw = getattr(output_type, "__name__", None) or "output"
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(raw))[:64]
    return name or "output"


def _without_title(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without the titles pydantic derives from Python names: they repeat keys and cost tokens.

    Only schema keywords are dropped, never a property that happens to be named "title".
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            out[key] = {k: _without_title(v) if isinstance(v, dict) else v for k, v in value.items()}
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            out[key] = [_without_title(v) if isinstance(v, dict) else v for v in value]
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _without_title(value)
        else:
            out[key] = value
    return out


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema that is not an object, as the `result` property of one (tools and OpenAI need objects)."""
    schema = _without_title(schema)
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": inner}, "required": ["result"],
                               "additionalProperties": False}
    if "$defs" in schema:
        wrapped["$defs"] = schema["$defs"]  # refs are "#/$defs/...", from the root: they still resolve
    return wrapped


_STRICT_PROVIDERS = frozenset({"openai", "openai-responses", "mistral"})
"""Providers whose structured output has a strict mode (constrained decoding) that toolwire may ask for.

Compatible hosts speaking the same protocol are left non-strict: their support for `strict` varies."""


def _supports_strict(model: Model) -> bool:
    return model.provider_name in _STRICT_PROVIDERS


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema in the form strict mode accepts, or `None` when it cannot take one.

    Strict mode needs every object closed (`additionalProperties: false`) and every property required.
    A property that was optional stays optional in meaning: the model must now write it, and where its
    type allows `null` (`x: int | None = None`) it can; values the model gives are validated against
    the output type as before. `default`s are dropped (strict mode rejects them) and a `$ref` with
    sibling keywords is inlined. An object with open-ended keys (`dict[str, int]`) has no strict form.
    """
    defs = schema.get("$defs", {})

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node and len(node) > 1:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            if name not in defs:
                raise _NotStrict
            node = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "default":
                continue
            if key in ("properties", "$defs"):
                out[key] = {k: convert(v) for k, v in value.items()}
            elif key in ("items", "anyOf", "allOf", "oneOf", "prefixItems", "not"):
                out[key] = convert(value)
            else:
                out[key] = value
        if out.get("type") == "object" or "properties" in out:
            if out.get("additionalProperties", False) is not False or "patternProperties" in out:
                raise _NotStrict
            out["additionalProperties"] = False
            out["required"] = list(out.get("properties", {}))
        return out

    try:
        converted: dict[str, Any] = convert(schema)
    except _NotStrict:
        return None
    return converted if _strict_compatible(converted) else None


class _NotStrict(Exception):
    """The schema has a part strict mode cannot express."""


def _strict_compatible(schema: Any) -> bool:
    """OpenAI's strict mode needs every object closed and every property required."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            properties = schema.get("properties", {})
            if schema.get("additionalProperties") is not False:
                return False
            if set(schema.get("required", ())) != set(properties):
                return False
        return all(_strict_compatible(v) for v in schema.values())
    if isinstance(schema, list):
        return all(_strict_compatible(v) for v in schema)
    return True


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


def _strip_fence(text: str) -> str:
    """The JSON inside a Markdown code fence, which some JSON-mode models add anyway."""
    match = _FENCE.match(text)
    return (match.group(1) if match else text).strip()
