"""The models `toolwire serve` offers, for the page's model picker (docs/guides/models.md).

Three ways, the first model listed being the default:

- no option: the default model of every provider whose API key is set in the environment, then the
  offline fake model (alone when no key is set, and then the page shows no picker);
- `--model PROVIDER:MODEL`, repeated: exactly those (`fake` is the offline model); `--base-url` and
  `--api-key` apply to each. A model whose key is missing stops the start: it was named on the command line;
- `--models-file FILE` (TOML): one `[[models]]` table per model, with an id, a label and per-model
  settings (`_SETTINGS`). An entry whose key is missing is left out, with a line saying so: one file serves
  machines that hold different keys. If no entry is left, the start stops rather than serving a fake model
  to users who expect a real one.

Errors in the file are one `UserError` sentence naming the file and the entry.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from http.cookiejar import Cookie, CookieJar
from typing import TYPE_CHECKING, Any

import httpx

from .._net import AsyncioNetwork
from .._transport import ShardedTransport
from ..exceptions import UserError
from ..models import Model, get_model
from ..providers import get_provider
from ..settings import ModelSettings
from ._tools import check_model

if TYPE_CHECKING:
    from ..server import ModelChoice

__all__ = ["ServeModel", "automatic_models", "command_line_models", "file_models", "open_models",
           "shared_model_client"]

_MODEL_CONNECTIONS = httpx.Limits(max_connections=None, max_keepalive_connections=2048)
"""Every run streams from the model on a connection of its own, and the server runs many at once: httpx's
default cap (100 connections) would make the 101st run wait for a free one. The runs themselves are the
bound (`--runs-per-minute` per user). Kept alive: as many as a busy server streams at once, since every
tool round's next request wants one back at the same moment. With 256, a turn boundary of 1,000 chats
(`bench/side_by_side`) had about 500 requests opening new connections at once (each a TLS handshake against
a real provider); idle ones still close after httpx's 5 s."""

FAKE_MODEL = "fake"
"""The offline model's name (as `_offline.FAKE_MODEL`, which is imported only when it is served: it brings the fake
provider server)."""

_OFFLINE_LABEL = "Offline demo"

_SETTINGS = {
    "model": "PROVIDER:MODEL (or \"fake\" for the offline model), required",
    "id": "what chats store and the API sends (default: the model)",
    "label": "what the page shows (default: the model)",
    "base_url": "send this model's requests here instead of to the provider",
    "api_key_env": "the environment variable holding its API key (default: the provider's)",
    "temperature": "a number from 0 to 2",
    "max_tokens": "the most tokens of one answer, a whole number",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeModel:
    """One model of the server: what the picker shows and what the factory builds."""

    id: str
    label: str
    spec: str
    """`provider:model`, or `fake` (the offline model)."""
    base_url: str | None = None
    api_key: str | None = None
    settings: ModelSettings | None = None

    @property
    def choice(self) -> ModelChoice:
        from ..server import ModelChoice  # the server extra: imported once `serve` runs

        return ModelChoice(id=self.id, label=self.label)


def _offline() -> ServeModel:
    return ServeModel(id=FAKE_MODEL, label=_OFFLINE_LABEL, spec=FAKE_MODEL)


def automatic_models() -> tuple[list[ServeModel], str | None]:
    """The models without any option, and a line saying which keys made them (`None`: no key is set)."""
    from .demo import DEFAULT_MODELS, available_providers

    found = [(f"{name}:{DEFAULT_MODELS[name]}", variable) for name, variable in available_providers()]
    models = [ServeModel(id=spec, label=spec, spec=spec) for spec, _ in found] + [_offline()]
    if not found:
        return models, None
    named = ", ".join(f"{spec} ({variable} is set)" for spec, variable in found)
    return models, (f"toolwire serve: the models are {named} and the offline fake model; the first is the default "
                    "(use --model to name them yourself).")


def command_line_models(specs: Sequence[str], *, api_key: str | None, base_url: str | None) -> list[ServeModel]:
    """The repeated `--model` options (each checked: a missing key stops the start)."""
    models: list[ServeModel] = []
    for spec in specs:
        if spec == FAKE_MODEL:
            models.append(_offline())
            continue
        check_model(spec, api_key=api_key, base_url=base_url)
        models.append(ServeModel(id=spec, label=spec, spec=spec, base_url=base_url, api_key=api_key))
    _unique(models, lambda model: f"--model {model.spec} is given twice; name each model once.")
    return models


def file_models(path: str) -> tuple[list[ServeModel], list[str]]:
    """The models of a `--models-file`, and a line for each entry left out because its key is not set."""
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except FileNotFoundError:
        raise UserError(f"The models file {path} does not exist; check the --models-file path.") from None
    except OSError as exc:
        raise UserError(f"The models file {path} cannot be read ({exc.strerror or exc}).") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"The models file {path} is not valid TOML ({exc}).") from None
    entries = data.get("models")
    extra = sorted(set(data) - {"models"})
    if extra:
        raise UserError(f"The models file {path} has {extra[0]!r} at its top level; it holds only [[models]] "
                        "tables, one per model.")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise UserError(f"The models file {path} has no [[models]] tables; give one per model, each with "
                        "model = \"provider:model\".")
    models: list[ServeModel] = []
    left_out: list[str] = []
    missing_keys: list[str] = []
    read = [_entry(path, number, entry) for number, entry in enumerate(entries, start=1)]
    _unique([model for model, _ in read], lambda model: f"The models file {path} has two models with the id "
                                                        f"{model.id!r}; give each its own id = \"...\".")
    for number, (model, missing) in enumerate(read, start=1):
        if missing is not None:
            left_out.append(f"toolwire serve: {path}, model {number} ({model.label}) is left out: {missing} is not "
                            "set.")
            missing_keys.append(missing)
            continue
        models.append(model)
    if not models:
        raise UserError(f"None of the models of {path} has its API key set ({', '.join(dict.fromkeys(missing_keys))}"
                        "); set one, or add a model = \"fake\" entry for the offline model.")
    return models, left_out


def _entry(path: str, number: int, entry: dict[str, Any]) -> tuple[ServeModel, str | None]:
    """One `[[models]]` table as a model, and the key variable it misses (`None`: it has its key)."""
    spec = entry.get("model")
    name = f"model {number}" + (f" ({spec})" if isinstance(spec, str) and spec else "")

    def fail(sentence: str) -> UserError:
        return UserError(f"The models file {path}, {name}: {sentence}")

    unknown = sorted(set(entry) - set(_SETTINGS))
    if unknown:
        raise fail(f"{unknown[0]!r} is not a setting; a model takes {', '.join(_SETTINGS)}.")
    if not isinstance(spec, str) or not spec.strip():
        raise fail("it needs model = \"provider:model\" (or \"fake\" for the offline model).")
    texts = {key: entry.get(key) for key in ("id", "label", "base_url", "api_key_env")}
    for key, value in texts.items():
        if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 200 or
                                  "\x00" in value):
            raise fail(f"{key} must be a non-empty string of at most 200 characters.")
    settings: ModelSettings = {}
    temperature = entry.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float) or \
                not math.isfinite(temperature) or not 0 <= temperature <= 2:
            raise fail("temperature must be a number from 0 to 2.")
        settings["temperature"] = float(temperature)
    max_tokens = entry.get("max_tokens")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise fail("max_tokens must be a whole number, 1 or more.")
        settings["max_tokens"] = max_tokens
    model_id = texts["id"] or spec
    label = texts["label"] or spec
    base_url = texts["base_url"]
    if spec == FAKE_MODEL:
        if base_url or texts["api_key_env"] or settings:
            raise fail("the offline model (\"fake\") takes only id and label.")
        return ServeModel(id=model_id, label=texts["label"] or _OFFLINE_LABEL, spec=FAKE_MODEL), None
    provider_name, sep, model_name = spec.partition(":")
    if not sep or not model_name:
        raise fail(f"{spec!r} has no provider; write model = \"provider:model\", e.g. \"openai:gpt-4.1-mini\" "
                   "(`toolwire providers` lists the providers).")
    try:
        provider = get_provider(provider_name)
    except UserError as exc:
        raise fail(str(exc)) from None
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise fail(f"base_url {base_url!r} needs a scheme (http:// or https://).")
    variables = [texts["api_key_env"]] if texts["api_key_env"] else list(provider.api_key_env)
    api_key = next((os.environ[v] for v in variables if os.environ.get(v)), None)
    model = ServeModel(id=model_id, label=label, spec=spec, base_url=base_url, api_key=api_key,
                       settings=settings or None)
    if api_key is None and provider.api_key_required:
        return model, " or ".join(variables)
    return model, None


def _unique(models: list[ServeModel], sentence: Callable[[ServeModel], str]) -> None:
    seen: set[str] = set()
    for model in models:
        if model.id in seen:
            raise UserError(sentence(model))
        seen.add(model.id)


def secrets_of(models: Sequence[ServeModel]) -> list[str]:
    """The API keys the models use (each is redacted from tool results, as `--api-key` always was)."""
    found: list[str] = []
    for model in models:
        if model.spec == FAKE_MODEL:
            continue
        if model.api_key:
            found.append(model.api_key)
            continue
        provider = get_provider(model.spec.partition(":")[0])
        found.extend(value for v in provider.api_key_env if (value := os.environ.get(v)))
    return found


class _KeepsNoCookies(CookieJar):
    """The shared model client's cookie jar, which keeps nothing. The client serves every user's runs: a cookie that
    one response sets (a CDN's bot-management cookie in front of an API, a gateway's session) would go out with
    every later request, another user's included. Model APIs authenticate with headers. It also spares each
    response's cookie parsing (httpx builds `urllib` stand-ins for the request and the response to feed a jar)."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return

    def set_cookie(self, cookie: Cookie) -> None:
        return


def shared_model_client() -> httpx.AsyncClient:
    """The one HTTP client the server's models share: several pools (httpcore's bookkeeping is quadratic in one
    pool's connections, see `ShardedTransport`), connections on asyncio's own transports (`_net.py`), no cookies."""
    return httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0), cookies=_KeepsNoCookies(),
                             transport=ShardedTransport(limits=_MODEL_CONNECTIONS, network=AsyncioNetwork()))


@asynccontextmanager
async def open_models(models: Sequence[ServeModel], *, fake_delay: float,
                      clients: list[httpx.AsyncClient]) -> AsyncIterator[tuple[dict[str, Model], str]]:
    """Each model built (by id) and a line describing them, for as long as the block lasts. The real models share
    one HTTP client; the offline model runs its fake provider on a loopback port. Clients go into `clients`,
    whose owner closes them."""
    built: dict[str, Model] = {}
    described: list[str] = []
    async with AsyncExitStack() as stack:
        shared: httpx.AsyncClient | None = None
        for model in models:
            if model.spec == FAKE_MODEL:
                from ._offline import offline_model

                offline, sentence = await stack.enter_async_context(offline_model(delay=fake_delay, clients=clients))
                built[model.id] = offline
                described.append(sentence if len(models) == 1 else f"{model.id} ({sentence})")
                continue
            if shared is None:
                shared = shared_model_client()
                clients.append(shared)
            built[model.id] = get_model(model.spec, api_key=model.api_key, base_url=model.base_url,
                                        http_client=shared, settings=model.settings)
            described.append(model.spec if model.id == model.spec else f"{model.id} ({model.spec})")
        if len(models) > 1:
            line = f"models: {described[0]} (the default), {', '.join(described[1:])}"
        else:
            line = described[0]
        yield built, line
