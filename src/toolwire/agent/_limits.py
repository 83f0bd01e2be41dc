"""Usage limits: how much one run may spend, checked before the request or tool call that would exceed it.

    agent = Agent(model, usage_limits=UsageLimits(requests=5, total_tokens=20_000, tool_calls=10))
    await agent.run("...", usage_limits=UsageLimits(output_tokens=500))   # this run only

What is checked, and when:
- `requests`: before each model request; the request that would be one too many is not sent.
- `tool_calls`: before each tool runs; a call beyond the limit is answered with an error result instead
  of running, the round is committed whole, then the run stops.
- `input_tokens`, `output_tokens`, `total_tokens`: before each request, from what the run has used so far
  and a projection of the next request's input: it resends the whole conversation, so it takes at least
  as many input tokens as the previous request did. A request whose own response goes over a token limit
  is not cut short (the tokens are spent by then); the run stops before the next one. A run that ends
  with that response ends normally. Providers that report no usage count as zero.

Limits apply to one `run` call: a resumed run counts from zero again. Every stop raises
`UsageLimitExceeded` with the run's valid history in `.messages` (every call answered).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..events import Usage
from ..exceptions import UsageLimitExceeded, UserError

__all__ = ["UsageLimits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimits:
    """The most one run may use; `None` means no limit.

    Attributes:
        requests: Model requests.
        tool_calls: Tool calls run (unknown tools, invalid arguments and denied calls are not run, so they
            do not count).
        input_tokens: Input tokens summed over the run's requests.
        output_tokens: Output tokens summed over the run's requests.
        total_tokens: Input and output tokens summed over the run's requests.
    """

    requests: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise UserError(f"UsageLimits({f.name}=...) must be a whole number of 0 or more, or None; "
                                f"got {value!r}.")

    def check_request(self, *, requests: int, usage: Usage, last_input: int | None) -> UsageLimitExceeded | None:
        """The error to raise instead of making one more request, or `None` when it may be made."""
        if self.requests is not None and requests + 1 > self.requests:
            return _exceeded("requests", self.requests, f"It has made {requests} model request(s), and one more "
                             f"would exceed the limit of {self.requests}.")
        used_in = usage.input_tokens or 0
        used_out = usage.output_tokens or 0
        projected = last_input or 0
        if self.output_tokens is not None and used_out >= self.output_tokens:
            return _exceeded("output_tokens", self.output_tokens, f"It has used {used_out} output tokens; the "
                             f"limit is {self.output_tokens}, and another request would add more.")
        if self.input_tokens is not None and used_in + projected > self.input_tokens:
            return _exceeded("input_tokens", self.input_tokens, f"It has used {used_in} input tokens, and the next "
                             f"request would send at least {projected} more (the previous request's input); the "
                             f"limit is {self.input_tokens}.")
        if self.total_tokens is not None and used_in + used_out + projected >= self.total_tokens:
            return _exceeded("total_tokens", self.total_tokens, f"It has used {used_in + used_out} tokens, and the "
                             f"next request would use at least {projected + 1} more; the limit is "
                             f"{self.total_tokens}.")
        return None

    def check_tool_call(self, *, tool_calls: int) -> UsageLimitExceeded | None:
        """The error to raise instead of running one more tool, or `None` when it may run."""
        if self.tool_calls is not None and tool_calls + 1 > self.tool_calls:
            return _exceeded("tool_calls", self.tool_calls, f"It has run {tool_calls} tool call(s), and one more "
                             f"would exceed the limit of {self.tool_calls}.")
        return None


def _exceeded(limit: str, value: int, detail: str) -> UsageLimitExceeded:
    return UsageLimitExceeded(
        f"The run stopped at its usage limit {limit}={value}. {detail} Raise the limit (UsageLimits), or go on "
        "from this error's `messages` with a new run.",
        limit=limit,
        value=value,
        messages=[],
    )


TOOL_LIMIT_RESULT = ("This call was not run: the run reached its limit of {limit} tool call(s) and stops after "
                     "this round.")
"""The error result of a call that the tool-call limit kept from running."""
