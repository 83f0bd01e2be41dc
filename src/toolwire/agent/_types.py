"""What a run hands back: the result, its steps, and the chunks `run_stream` yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ..events import FinishReason, Usage
from ..messages import Message, ToolResultPart

__all__ = ["RunChunk", "RunResult", "StepResult", "ToolExecution"]

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
class RunResult:
    """The outcome of a finished run.

    Attributes:
        output: The final answer's text.
        messages: The run's new messages in order: the prompt (when one was given), then each assistant
            message and the user message with its tool results, ending with the final answer.
        usage: Tokens summed over all steps.
        steps: Each model request with its usage and tool results.
    """

    output: str
    messages: list[Message]
    usage: Usage
    steps: list[StepResult]

    @property
    def final_message(self) -> Message:
        """The assistant message that gave the final answer."""
        return self.steps[-1].message


@dataclass(slots=True, kw_only=True)
class RunChunk:
    """One item of `Agent.run_stream`.

    Attributes:
        output: Text to show now (may be empty). The first text of an assistant message that follows a
            tool round starts with `"\\n"`, once some text was already shown, so consecutive answers do not
            run together; stored messages never carry that newline.
        messages: Messages completed at this moment, to append to a history. An assistant message that
            calls tools arrives together with the user message holding its results, so a history
            extended chunk by chunk is valid at every point.
    """

    output: str = ""
    messages: list[Message] = field(default_factory=list)
