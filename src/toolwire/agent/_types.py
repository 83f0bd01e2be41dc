"""What a run hands back: the result, its steps, and the chunks `run_stream` yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, cast

from typing_extensions import TypeVar

from ..events import FinishReason, Usage
from ..exceptions import UserError
from ..messages import Message, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from ._approval import RunState

__all__ = ["OutputT", "RunChunk", "RunResult", "RunStatus", "StepResult", "ToolExecution"]

OutputT = TypeVar("OutputT", default=str)
"""The type of a run's output: `str` for text, or the agent's `output_type`."""

RunStatus: TypeAlias = Literal["completed", "paused"]
"""`"completed"`: the run has its output. `"paused"`: it waits for a person to approve tool calls."""

ToolExecution: TypeAlias = Literal["eager", "after_stream", "sequential"]
"""When tools start: `"eager"` (each the moment its call is complete, while the model still streams),
`"after_stream"` (all at once when the response has ended) or `"sequential"` (one after another, after
the response). Eager is the default and the fastest; the others exist for comparison and for tools that
must not overlap."""


@dataclass(slots=True, kw_only=True)
class StepResult:
    """One model request of a run and the tool round that answered it.

    Attributes:
        index: 0-based position of the step in the run.
        message: The assistant message the model produced.
        results: The results of its tool calls, in the calls' order (empty for the final answer).
        usage: Tokens this request used, where the provider reported them.
        finish_reason: Why the response ended.
    """

    index: int
    message: Message
    results: list[ToolResultPart] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: FinishReason | None = None


@dataclass(slots=True, kw_only=True)
class RunResult(Generic[OutputT]):
    """The outcome of a run: its output, or the tool calls it paused on.

    Attributes:
        messages: The run's new messages in order: the prompt (when one was given), then each assistant
            message and the user message with its tool results, ending with the final answer. Only
            whole rounds: a paused round is in `state`, not here, so this is always a valid history.
        usage: Tokens summed over all steps.
        steps: Each model request with its usage and tool results. For a paused run the last step is
            the paused one, with the results known so far.
        status: `"completed"` or `"paused"` (waiting for approval).
        pending: The tool calls waiting for a person's decision (empty unless paused).
        state: What resuming needs (`None` unless paused): store `state.to_json()`, and later call
            `agent.run(resume=RunState.from_json(saved), approvals={call_id: True, ...})`.
        requests: Model requests this run made.
        tool_calls: Tool calls this run ran.
    """

    messages: list[Message]
    usage: Usage
    steps: list[StepResult]
    status: RunStatus = "completed"
    pending: list[ToolCallPart] = field(default_factory=list)
    state: RunState | None = None
    requests: int = 0
    tool_calls: int = 0
    _output: Any = None

    @property
    def output(self) -> OutputT:
        """The final answer: its text, or the validated object of the agent's `output_type`.

        Raises `UserError` for a paused run, which has no answer yet.
        """
        if self.status == "paused":
            names = ", ".join(f"{c.name} ({c.id})" for c in self.pending)
            raise UserError(f"The run is paused until a person decides on the tool calls {names}, so it has no "
                            "output yet. Resume it: agent.run(resume=result.state, approvals={call_id: True, ...}).")
        return cast(OutputT, self._output)

    @property
    def paused(self) -> bool:
        """The run waits for approval of `pending` calls."""
        return self.status == "paused"

    @property
    def final_message(self) -> Message:
        """The assistant message that gave the final answer (for a paused run: the one it paused on)."""
        return self.steps[-1].message


@dataclass(slots=True, kw_only=True)
class RunChunk(Generic[OutputT]):
    """One item of `Agent.run_stream`.

    Attributes:
        output: Text to show now (may be empty). The first text of an assistant message that follows a
            tool round starts with `"\\n"`, once some text was already shown, so consecutive answers do not
            run together; stored messages never carry that newline.
        messages: Messages completed at this moment, to append to a history. An assistant message that
            calls tools arrives together with the user message holding its results, so a history
            extended chunk by chunk is valid at every point.
        partial_data: With an `output_type`: the answer's JSON as far as it has streamed (dicts, lists,
            strings whose end may be cut short), when it changed; else `None`. Each one only adds to the
            one before, within one answer.
        partial: The same answer as an object of the output type, when `partial_data` already validates
            as one (an unfinished last list item is left out); else `None`. Never an object with fields
            that were not given or did not validate. `result.output` is the final, validated object.
    """

    output: str = ""
    messages: list[Message] = field(default_factory=list)
    partial: OutputT | None = None
    partial_data: Any = None
