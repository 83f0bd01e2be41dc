"""Usage limits: how much one run may spend, checked before the request or tool call that would exceed it.

    agent = Agent(model, usage_limits=UsageLimits(requests=5, total_tokens=20_000, tool_calls=10))
    await agent.run("...", usage_limits=UsageLimits(output_tokens=500))   # this run only

    budget = UsageBudget(total_tokens=100_000)          # one budget shared by many runs and agents
    await asyncio.gather(agent.run("a", budget=budget), other_agent.run("b", budget=budget))

What is checked, and when:
- `requests`: before each model request; the request that would be one too many is not sent.
- `tool_calls`: before each tool runs; a call beyond the limit is answered with an error result instead
  of running, the round is committed whole, then the run stops.
- `input_tokens`, `output_tokens`, `total_tokens`: before each request, from what the run has used so far
  and a projection of the next request's input: it resends the whole conversation, so it takes at least
  as many input tokens as the previous request did. A request whose own response goes over a token limit
  is not cut short (the tokens are spent by then); the run stops before the next one. A run that ends
  with that response ends normally. Providers that report no usage count as zero.
- `request_input_tokens`: the input of one request. Where the model can count tokens before a request
  (`Model.count_tokens`: Anthropic and Gemini), each request is counted first and one over the limit is
  not sent; counting is one more HTTP request per model request, made only when this limit is set.
  Elsewhere, from the previous request's input (the next one resends all of it): once a request went
  over the limit, no further one is sent, but the first one over it cannot be refused in advance.

Limits apply to one `run` call: a resumed run counts from zero again. Every stop raises
`UsageLimitExceeded` with the run's valid history in `.messages` (every call answered).

A `UsageBudget` holds the same limits for any number of runs, of one agent or several, at the same time
or one after another: each request and each tool call is reserved from it under a lock before it is
made, so concurrent runs never make one request or tool call more than the budget allows. Tokens are
known only once a response reports them: they are added as each response ends, so runs that are
streaming when the budget runs out may each finish their current response (the overshoot is at most
those responses). A spent budget raises `UsageBudgetExceeded` (a `UsageLimitExceeded`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields

from ..events import Usage
from ..exceptions import UsageBudgetExceeded, UsageLimitExceeded, UserError

__all__ = ["UsageBudget", "UsageLimits"]


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
        request_input_tokens: Input tokens of any one request (the conversation it resends).
    """

    requests: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    request_input_tokens: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise UserError(f"UsageLimits({f.name}=...) must be a whole number of 0 or more, or None; "
                                f"got {value!r}.")

    def check_request(
        self, *, requests: int, usage: Usage, last_input: int | None, budget: UsageBudget | None = None
    ) -> UsageLimitExceeded | None:
        """The error to raise instead of making one more request, or `None` when it may be made.

        `budget`: the counts are those of a shared budget (the message says so).
        """
        who = "The runs sharing the budget have" if budget is not None else "It has"
        if self.requests is not None and requests + 1 > self.requests:
            return _exceeded("requests", self.requests, f"{who} made {requests} model request(s), and one more "
                             f"would exceed the limit of {self.requests}.", budget)
        used_in = usage.input_tokens or 0
        used_out = usage.output_tokens or 0
        projected = last_input or 0
        if self.request_input_tokens is not None and projected > self.request_input_tokens:
            return _exceeded("request_input_tokens", self.request_input_tokens, f"Its last request sent {projected} "
                             f"input tokens, over the limit of {self.request_input_tokens} for one request, and the "
                             "next one would resend all of them.", budget)
        if self.output_tokens is not None and used_out >= self.output_tokens:
            return _exceeded("output_tokens", self.output_tokens, f"{who} used {used_out} output tokens; the "
                             f"limit is {self.output_tokens}, and another request would add more.", budget)
        if self.input_tokens is not None and used_in + projected > self.input_tokens:
            return _exceeded("input_tokens", self.input_tokens, f"{who} used {used_in} input tokens, and the next "
                             f"request would send at least {projected} more (the run's previous request's input); "
                             f"the limit is {self.input_tokens}.", budget)
        if self.total_tokens is not None and used_in + used_out + projected >= self.total_tokens:
            return _exceeded("total_tokens", self.total_tokens, f"{who} used {used_in + used_out} tokens, and the "
                             f"next request would use at least {projected + 1} more; the limit is "
                             f"{self.total_tokens}.", budget)
        return None

    def check_counted(self, counted: int, *, provider: str, budget: UsageBudget | None = None
                      ) -> UsageLimitExceeded | None:
        """The error to raise instead of sending a request whose input `provider` counted as `counted`
        tokens, or `None` when it may be sent."""
        if self.request_input_tokens is not None and counted > self.request_input_tokens:
            return _exceeded("request_input_tokens", self.request_input_tokens, f"Its next request would send "
                             f"{counted} input tokens ({provider} counted them before it was sent), over the limit "
                             f"of {self.request_input_tokens} for one request, so it was not sent.", budget)
        return None

    def check_tool_call(self, *, tool_calls: int, budget: UsageBudget | None = None) -> UsageLimitExceeded | None:
        """The error to raise instead of running one more tool, or `None` when it may run."""
        who = "The runs sharing the budget have" if budget is not None else "It has"
        if self.tool_calls is not None and tool_calls + 1 > self.tool_calls:
            return _exceeded("tool_calls", self.tool_calls, f"{who} run {tool_calls} tool call(s), and one more "
                             f"would exceed the limit of {self.tool_calls}.", budget)
        return None


class UsageBudget:
    """Usage limits shared by several runs (of one agent or many), concurrent or one after another.

        budget = UsageBudget(requests=10, total_tokens=50_000)
        await agent.run("...", budget=budget)
        await other_agent.run("...", budget=budget)
        budget.requests_used, budget.usage          # what all of them spent

    Requests and tool calls are reserved under a lock before they are made, so no number of concurrent
    runs makes one more than allowed; tokens are added as each response ends (see the module docstring).
    The lock is a thread lock held for a few additions only, so runs on different threads or event loops
    (`run_sync`) may share a budget too.

    `requests`, `tool_calls`, `input_tokens`, `output_tokens`, `total_tokens` and `request_input_tokens` are
    as for `UsageLimits`, counted over every run that uses the budget; `name` names the budget in errors
    (`"team-a"`).
    """

    def __init__(
        self,
        *,
        requests: int | None = None,
        tool_calls: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
        request_input_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        self.limits = UsageLimits(requests=requests, tool_calls=tool_calls, input_tokens=input_tokens,
                                  output_tokens=output_tokens, total_tokens=total_tokens,
                                  request_input_tokens=request_input_tokens)
        self.name = name
        self._lock = threading.Lock()
        self._usage = Usage()
        self._requests = 0
        self._tool_calls = 0

    @property
    def usage(self) -> Usage:
        """Tokens spent by every run that used the budget, as reported by the responses so far."""
        return self._usage

    @property
    def requests_used(self) -> int:
        """Model requests made (or being made) under the budget."""
        return self._requests

    @property
    def tool_calls_used(self) -> int:
        """Tool calls run (or running) under the budget."""
        return self._tool_calls

    def reserve_request(self, *, last_input: int | None) -> UsageLimitExceeded | None:
        """Count one more request, or the error to raise instead when the budget does not allow it."""
        with self._lock:
            exceeded = self.limits.check_request(requests=self._requests, usage=self._usage, last_input=last_input,
                                                 budget=self)
            if exceeded is None:
                self._requests += 1
            return exceeded

    def reserve_tool_call(self) -> UsageLimitExceeded | None:
        """Count one more tool call, or the error to raise instead when the budget does not allow it."""
        with self._lock:
            exceeded = self.limits.check_tool_call(tool_calls=self._tool_calls, budget=self)
            if exceeded is None:
                self._tool_calls += 1
            return exceeded

    def add(self, usage: Usage | None) -> None:
        """Add the tokens one response used."""
        if usage is None:
            return
        with self._lock:
            self._usage = self._usage + usage

    def __repr__(self) -> str:
        return (f"UsageBudget(name={self.name!r}, requests_used={self._requests}, tool_calls_used={self._tool_calls}, "
                f"usage={self._usage!r})")


def _exceeded(limit: str, value: int, detail: str, budget: UsageBudget | None) -> UsageLimitExceeded:
    if budget is not None:
        which = f"the usage budget {budget.name!r}" if budget.name else "its shared usage budget"
        return UsageBudgetExceeded(
            f"The run stopped at {which} ({limit}={value}). {detail} Give the runs a larger UsageBudget, or go "
            "on from this error's `messages` with a new one.",
            limit=limit,
            value=value,
            messages=[],
        )
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
