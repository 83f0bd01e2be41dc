"""The agent's name for the shared `ItemQueue` (`toolwire._queue`), which the server's runner uses too."""

from .._queue import BACKLOG as BACKLOG, ItemQueue as ItemQueue

__all__ = ["BACKLOG", "ItemQueue"]
