"""`RunConfig`: everything a run needs from its agent, read from the agent's attributes when the run starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..events import ToolResultEvent
from ..memory import ChatMemory, ResumeClaims
from ..models import Model
from ..settings import ModelSettings
from ..telemetry import Instrumentation
from ..tools import ApprovalPredicate
from ..toolsets import Toolset
from ._execute import Toolbox
from ._guard import PROCESS_CLAIMS
from ._instructions import Instruction
from ._limits import UsageBudget, UsageLimits
from ._output import OutputSpec, OutputValidator
from ._types import ToolExecution

__all__ = ["RunConfig"]


@dataclass(slots=True, kw_only=True)
class RunConfig:
    """Everything a run needs from its agent, fixed when the run starts."""

    model: Model
    toolbox: Toolbox
    """The agent's own tools (toolsets and a run's tools are added per step)."""
    instructions: tuple[Instruction, ...] = ()
    max_steps: int = 20
    max_parallel_tools: int = 8
    tool_execution: ToolExecution = "eager"
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    on_tool_result: Callable[[ToolResultEvent], Any] | None = None
    requires_approval: ApprovalPredicate | None = None
    memory: ChatMemory | None = None
    own_history: bool = True
    output: OutputSpec | None = None
    output_retries: int = 1
    output_validators: tuple[OutputValidator, ...] = ()
    partial_validators: tuple[OutputValidator, ...] = ()
    """Output validators that also check partial answers while they stream (`partial=True`)."""
    retries: int = 1
    """How many times in a row a tool may raise `ModelRetry` when it sets no `retries` of its own."""
    resume_claims: ResumeClaims | None = None
    toolsets: tuple[Toolset, ...] = ()
    usage_limits: UsageLimits | None = None
    budget: UsageBudget | None = None
    telemetry: Instrumentation | None = None
    name: str | None = None

    @property
    def claims(self) -> ResumeClaims:
        """Who decides that a state is resumed once: the agent's claims, the memory's, or this process's."""
        if self.resume_claims is not None:
            return self.resume_claims
        if self.memory is not None and isinstance(self.memory, ResumeClaims):
            return self.memory
        return PROCESS_CLAIMS

    @property
    def memory_is_source(self) -> bool:
        """Each request is built from the memory alone; the run keeps no conversation of its own."""
        return self.memory is not None and not self.own_history
