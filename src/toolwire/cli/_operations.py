"""`toolwire serve`'s options for running it: Prometheus metrics (`server/metrics.py`) and per-user token budgets
(`server/budgets.py`). Parsing the command line needs neither (installs without the `server` extra build it
too); `operations_config` turns the options into `ServerConfig` fields once the server is imported."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..exceptions import UserError

METRICS_TOKEN_ENV = "TOOLWIRE_METRICS_TOKEN"


def add_operations_arguments(p: Any) -> None:
    p.add_argument("--metrics", action="store_true",
                   help="serve Prometheus metrics at /metrics to scrapers sending the metrics token (default: off)")
    p.add_argument("--metrics-token", default=None, metavar="TOKEN",
                   help=f"the bearer token /metrics requires, 16 characters or more (or set {METRICS_TOKEN_ENV}, "
                        "which keeps it out of the process list)")
    for period in ("daily", "monthly"):
        for direction in ("input", "output"):
            p.add_argument(f"--{period}-{direction}-tokens", type=int, default=None, metavar="N",
                           help=f"{direction} tokens each user's runs may use per UTC "
                                f"{'day' if period == 'daily' else 'month'} (default: no limit)")
    p.add_argument("--user-budget", action="append", default=[], metavar="USER:LIMITS",
                   help="one user's own token budget instead of the default, e.g. "
                        "alice:daily-input=2000000,monthly-output=unlimited (repeatable)")


def operations_config(args: argparse.Namespace) -> dict[str, Any]:
    """`ServerConfig` keyword arguments for `--metrics`, `--metrics-token` and the token budgets."""
    from ..server.budgets import TokenBudget, TokenBudgets, parse_budget

    token = args.metrics_token or os.environ.get(METRICS_TOKEN_ENV) or None
    if args.metrics and not token:
        raise UserError("--metrics needs a token for the scraper to send: --metrics-token TOKEN or "
                        f"{METRICS_TOKEN_ENV} "
                        "(16 characters or more; the metrics are the whole server's, not one user's).")
    if token and len(token) < 16:
        raise UserError("--metrics-token must be at least 16 characters long; use a long random string.")
    limits = {name: getattr(args, f"{name}_tokens") for name in
              ("daily_input", "daily_output", "monthly_input", "monthly_output")}
    if any(value is not None and value < 0 for value in limits.values()):
        raise UserError("A token budget (--daily-input-tokens and the like) is 0 or more tokens.")
    users: dict[str, TokenBudget] = {}
    for given in args.user_budget:
        user, sep, text = given.partition(":")
        if not sep or not user.strip():
            raise UserError(f"--user-budget is USER:LIMITS, e.g. alice:daily-input=2000000; got {given!r}.")
        users[user.strip()] = parse_budget(text)
    default = TokenBudget(**limits)
    budgets = TokenBudgets(default=default, users=users) if default.limited or users else None
    return {"metrics": args.metrics, "metrics_token": token, "budgets": budgets}
