"""`Forwarding`: an object standing in for another, overriding a few methods and passing the rest through.

The server measures (`metrics.py`) and bounds (`budgets.py`) its store, event log and rate limiter by wrapping
them where the app is built, so that none of them (nor the run manager) has to know. A method looked up
through the wrapper once is kept on it, so a call that is only passed through costs what a direct call does.
Plain attributes (`health`, `shared`, `hub`...) are read from the wrapped object every time: they may change.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["Forwarding"]


class Forwarding:
    """Passes every attribute it does not define to `wrapped` (methods are looked up once)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        if inspect.ismethod(value):
            value = self.wrap_method(name, value)
            setattr(self, name, value)  # found in the instance's dict from now on: no second lookup
        return value

    def wrap_method(self, name: str, method: Any) -> Any:
        """What this wrapper calls for the wrapped object's method `name` (the method itself, here)."""
        return method

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"
