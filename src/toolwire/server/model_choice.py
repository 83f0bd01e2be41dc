"""The server's models and each chat's choice among them: the model picker (docs/guides/models.md).

A server may offer several models (`ServerConfig.models`; `toolwire serve` repeats `--model` or reads
`--models-file`), the first being the default. A chat stores the id of its choice (`Chat.model`; `None` is
the default, which every chat made before there was a choice has). Each run resolves the choice as it
starts, records the id it used (`Run.model`, and `model` in its `run_started` event) and hands it to the
agent factory (`ChatContext.model`), which builds the agent on that model.

A chat whose stored model is no longer offered (the server restarted with other models) runs on the
default; its choice stays stored, and applies again if the model comes back. A request naming a model the
server does not offer is refused (422 `unknown_model`) before anything is stored.

A server with no models configured (`create_app` without `ServerConfig.models`) offers no choice: `GET
/api/models` lists nothing, runs record no model, and a request naming one gets 422.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from ..exceptions import UserError
from ..store import Chat, User
from .errors import ApiError

if TYPE_CHECKING:
    from .routes import ServerState

__all__ = ["ModelChoice", "ServerModels", "choose_model", "list_models"]

MAX_MODEL_ID = 200
"""The longest model id (the `chats.model` and `runs.model` columns hold up to this many characters)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelChoice:
    """One model a server offers.

    Attributes:
        id: What chats store and requests send (`GET /api/models` lists them); the agent factory gets it
            as `ChatContext.model`.
        label: What the page shows (default: the id).
    """

    id: str
    label: str = ""


class ServerModels:
    """The models of one server, the first being the default (see the module docstring)."""

    def __init__(self, choices: Sequence[ModelChoice] = ()) -> None:
        seen: set[str] = set()
        for choice in choices:
            if not choice.id or len(choice.id) > MAX_MODEL_ID or "\x00" in choice.id:
                raise UserError(f"A model id is 1 to {MAX_MODEL_ID} characters; {choice.id[:40]!r} is not.")
            if choice.id in seen:
                raise UserError(f"Two models have the id {choice.id!r}; give each model an id of its own.")
            seen.add(choice.id)
        self.choices = tuple(choices)
        self._ids = frozenset(seen)
        self._listing = [{"id": c.id, "label": c.label or c.id, "default": i == 0} for i, c in enumerate(choices)]

    @property
    def default(self) -> str | None:
        """The default model's id (`None`: the server offers no choice)."""
        return self.choices[0].id if self.choices else None

    def resolve(self, chosen: str | None) -> str | None:
        """The id a run of a chat that chose `chosen` uses: that model while it is offered, else the default."""
        return chosen if chosen in self._ids else self.default

    def check(self, value: Any) -> str:
        """`value` if it is the id of one of the server's models; else 422 `unknown_model`, with a sentence."""
        if not isinstance(value, str):
            raise ApiError(422, "invalid_request", "`model` is the id of one of the server's models (a string), as "
                                                   "GET /api/models lists them.")
        if value not in self._ids:
            if not self.choices:
                raise ApiError(422, "unknown_model", "This server offers no choice of model; send the request "
                                                     "without `model`.")
            offered = ", ".join(repr(c.id) for c in self.choices[:10])
            raise ApiError(422, "unknown_model", f"This server has no model {value[:80]!r}; choose one of {offered} "
                                                 "(GET /api/models lists them).")
        return value

    def listing(self) -> list[dict[str, Any]]:
        return self._listing


async def list_models(request: Request) -> Response:
    """`GET /api/models`: the server's models (id, label, whether it is the default), in the order offered."""
    from .routes import _caller, _json  # routes.py builds on this module's checks

    server, _user = await _caller(request)
    return _json({"models": server.models.listing()})


async def choose_model(server: ServerState, user: User, chat: Chat, value: Any) -> Chat:
    """Store `value` (checked: one of the server's model ids; `None`: back to the default) as the chat's model,
    unless it already is."""
    model = None if value is None else server.models.check(value)
    if chat.model == model:
        return chat
    updated = await server.store.set_chat_model(user.id, chat.id, model)
    if updated is None:  # deleted a moment ago
        raise ApiError(404, "chat_not_found", "There is no chat with this id for this API token.")
    return updated
