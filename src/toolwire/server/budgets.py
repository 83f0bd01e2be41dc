"""Per-user token budgets: daily and monthly limits on input and output tokens, checked before a run starts.

    from toolwire.server import ServerConfig
    from toolwire.server.budgets import TokenBudget, TokenBudgets

    config = ServerConfig(budgets=TokenBudgets(
        default=TokenBudget(daily_input=200_000, monthly_output=1_000_000),
        users={"alice": TokenBudget(daily_input=2_000_000)},  # alice: this budget instead of the default
    ))

A user's usage is what the store recorded for their runs (`runs.usage_json`, written when a run ends or
pauses), summed over the runs started since the period began: days and months in UTC, so a daily budget
resets at 00:00 UTC and a monthly one at 00:00 UTC on the 1st. The sum is read from the shared database at
each admission (one aggregate query), so every replica sees the same usage and nothing is cached.

A run is refused before anything is stored or the model is called: HTTP 429 with the code
`budget_exceeded`, a sentence saying which budget is used up and when it resets, and `Retry-After` (the
seconds until then). The check sits where the run manager admits runs, in front of its rate limiter
(`BudgetedLimiter.acquire(user, "runs")`, which it calls for every new run and every resumed one).

What a budget does not bound (docs/guides/budgets.md): a run already going when its user
reaches the budget finishes (its usage counts once it ends, so the next run is refused); several runs
started at once, before any of them ended, are each admitted on the usage recorded so far; and a chat's
runs go with it when the chat is deleted, their usage too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..exceptions import UserError
from ..store import SQLStore, Store, StoreUnavailable
from ._proxy import Forwarding
from .errors import ApiError

__all__ = ["BudgetExceeded", "BudgetedLimiter", "TokenBudget", "TokenBudgets", "Usage", "parse_budget"]

Period = Literal["daily", "monthly"]
Direction = Literal["input", "output"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenBudget:
    """The most tokens one user's runs may use per UTC day and month; `None`: no limit."""

    daily_input: int | None = None
    daily_output: int | None = None
    monthly_input: int | None = None
    monthly_output: int | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise UserError(f"A token budget's {item.name} is a number of tokens (0 or more), or None for no "
                                f"limit; got {value!r}.")

    @property
    def limited(self) -> bool:
        return any(getattr(self, item.name) is not None for item in fields(self))


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens a user's runs used in the current day and month (UTC)."""

    daily_input: int = 0
    daily_output: int = 0
    monthly_input: int = 0
    monthly_output: int = 0


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenBudgets:
    """The server's token budgets: a default for every user, and budgets of their own for some (by user name).

    A user's own budget replaces the default whole: a limit it leaves at `None` is lifted for that user.

    Attributes:
        default: Every user's budget unless `users` names them.
        users: User name → that user's budget.
        clock: The current time, timezone-aware (tests give their own).
    """

    default: TokenBudget = field(default_factory=TokenBudget)
    users: Mapping[str, TokenBudget] = field(default_factory=dict)
    clock: Callable[[], datetime] = _utc_now

    def for_user(self, name: str) -> TokenBudget:
        return self.users.get(name, self.default)

    @property
    def per_user(self) -> bool:
        return bool(self.users)


class BudgetExceeded(ApiError):
    """429 `budget_exceeded`: the user's runs used up a token budget; `limit` names it (`daily_input_tokens`)."""

    def __init__(self, limit: str, message: str, retry_after: int) -> None:
        super().__init__(429, "budget_exceeded", message, headers={"Retry-After": str(retry_after)})
        self.limit = limit


def period_starts(now: datetime) -> tuple[datetime, datetime, datetime, datetime]:
    """The current UTC day's and month's starts, and the next ones (when the budgets reset)."""
    now = now.astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return day, month, day + timedelta(days=1), next_month


async def usage_of(store: Store, user_id: str, now: datetime) -> Usage:
    """The tokens `user_id`'s runs used this UTC day and month, summed in the database (one query)."""
    from sqlalchemy import BigInteger, case, cast, func, select
    from sqlalchemy.dialects.postgresql import JSONB
    from sqlalchemy.exc import SQLAlchemyError

    from ..store._schema import chats, runs

    if not isinstance(store, SQLStore):
        raise UserError("Token budgets read usage from an SQLStore's database; this store is a "
                        f"{type(store).__name__}.")
    day, month, _, _ = period_starts(now)
    postgres = store.engine.dialect.name == "postgresql"

    def tokens(key: str) -> Any:
        # usage_json is text on both databases (the schema's rule); each one reads a number out of it.
        if postgres:
            return cast(cast(runs.c.usage_json, JSONB)[key].astext, BigInteger)
        return func.json_extract(runs.c.usage_json, f"$.{key}")

    def total(key: str, since: datetime) -> Any:
        return func.coalesce(func.sum(case((runs.c.created_at >= since, tokens(key)), else_=0)), 0)

    query = (select(total("input_tokens", day), total("output_tokens", day), total("input_tokens", month),
                    total("output_tokens", month))
             .select_from(runs.join(chats, runs.c.chat_id == chats.c.id))
             .where(chats.c.user_id == user_id, runs.c.created_at >= month, runs.c.usage_json.is_not(None)))
    try:
        async with store.engine.connect() as conn:
            row = (await conn.execute(query)).one()
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"The token usage of this user could not be read ({type(exc).__name__}); try again "
                               "in a moment.") from exc
    return Usage(daily_input=int(row[0]), daily_output=int(row[1]), monthly_input=int(row[2]),
                 monthly_output=int(row[3]))


def refusal(budget: TokenBudget, usage: Usage, now: datetime) -> BudgetExceeded | None:
    """The refusal for a user whose usage reached a limit of `budget`, else `None`.

    When several are reached, the one that resets last is named: waiting for the others would not help.
    """
    _, _, next_day, next_month = period_starts(now)
    reached: list[tuple[datetime, str, str, int, int]] = []
    for period, resets in (("daily", next_day), ("monthly", next_month)):
        for direction in ("input", "output"):
            name = f"{period}_{direction}"
            limit: int | None = getattr(budget, name)
            used: int = getattr(usage, name)
            if limit is not None and used >= limit:
                reached.append((resets, period, direction, limit, used))
    if not reached:
        return None
    resets, period, direction, limit, used = max(reached, key=lambda r: r[0])
    seconds = max(1, math.ceil((resets - now.astimezone(UTC)).total_seconds()))
    which = "today's" if period == "daily" else "this month's"
    message = (f"You have used {which} {direction} token budget ({used:,} of {limit:,} tokens); it resets at "
               f"{resets:%Y-%m-%d %H:%M} UTC, in {_duration(seconds)}. Send your message again then.")
    return BudgetExceeded(f"{period}_{direction}_tokens", message, seconds)


def _duration(seconds: int) -> str:
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes = max(1, math.ceil(rest / 60)) if not (days or hours) else rest // 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


class BudgetedLimiter(Forwarding):
    """The run manager's rate limiter, with the token budgets checked first for every run it admits."""

    def __init__(self, limiter: Any, budgets: TokenBudgets, store: Store) -> None:
        if not isinstance(store, SQLStore):
            raise UserError("Token budgets read each user's usage from an SQLStore's database (SQLite or "
                            f"PostgreSQL); this store is a {type(store).__name__}.")
        super().__init__(limiter)
        self.budgets = budgets
        self._store = store
        self._names: dict[str, str] = {}
        """User id → name (a user's name never changes), for budgets given by name."""

    async def acquire(self, user_id: str, kind: str) -> float | None:
        if kind == "runs":
            await self.check(user_id)
        wait: float | None = await self.wrapped.acquire(user_id, kind)
        return wait

    async def check(self, user_id: str) -> None:
        """Raise `BudgetExceeded` if the user's runs used up one of their budgets."""
        budget = self.budgets.default
        if self.budgets.per_user:
            budget = self.budgets.for_user(await self._name(user_id))
        if not budget.limited:
            return
        now = self.budgets.clock()
        refused = refusal(budget, await usage_of(self._store, user_id, now), now)
        if refused is not None:
            raise refused

    async def _name(self, user_id: str) -> str:
        name = self._names.get(user_id)
        if name is None:
            from sqlalchemy import select

            from ..store._schema import users

            assert isinstance(self._store, SQLStore)
            async with self._store.engine.connect() as conn:
                name = (await conn.execute(select(users.c.name).where(users.c.id == user_id))).scalar_one()
            self._names[user_id] = name
        return name


_KEYS = {"daily-input": "daily_input", "daily-output": "daily_output", "monthly-input": "monthly_input",
         "monthly-output": "monthly_output"}


def parse_budget(text: str) -> TokenBudget:
    """`daily-input=200000,monthly-output=1000000` (`toolwire serve --user-budget alice:...`) as a budget."""
    values: dict[str, int | None] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        name = _KEYS.get(key.strip())
        if not sep or name is None:
            raise UserError(f"A token budget is a list like daily-input=200000,monthly-output=1000000 (limits: "
                            f"{', '.join(_KEYS)}); {item!r} is not one of them.")
        value = value.strip().replace("_", "")
        if value == "unlimited":
            values[name] = None
        elif value.isdigit():
            values[name] = int(value)
        else:
            raise UserError(f"A token budget's {key.strip()} is a number of tokens or 'unlimited'; got {value!r}.")
    return TokenBudget(**values)
