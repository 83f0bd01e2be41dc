"""`toolwire record MODEL PROMPT --out CASSETTE`: capture a real provider stream for offline tests.

The request goes through `RecordingTransport`, so the cassette holds the exact response body with API
keys and auth headers redacted; `ReplayTransport` (or `toolwire fake-server --replay`) serves it back.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from .._fresh_loop import run_in_new_loop
from .._transport import Secrets
from ..exceptions import StreamError, ToolwireError, UserError
from ..messages import Message
from ..models import Timeout, get_model
from ..testing.record import RecordingTransport
from ..tools import ToolDefinition
from ._tools import add_timeout_argument


def add_parser(sub: Any) -> None:
    p = sub.add_parser("record", help="stream one real response into a cassette file (keys redacted)",
                       description="Send one prompt and record the provider's raw stream into a cassette file.")
    p.add_argument("model", help="provider:model, e.g. openai:gpt-4.1-mini")
    p.add_argument("prompt", help="the user message")
    p.add_argument("--out", "-o", required=True, help="the cassette file to write (JSON)")
    p.add_argument("--system", default=None, help="a system message")
    p.add_argument("--tools", metavar="FILE", default=None,
                   help="a JSON list of tool definitions: {name, description, parameters}")
    p.add_argument("--append", action="store_true", help="add to an existing cassette instead of replacing it")
    p.add_argument("--raw", metavar="FILE", default=None,
                   help="also write the raw response body here (for `toolwire replay`)")
    p.add_argument("--base-url", default=None, help="send to this base URL instead of the provider's")
    p.add_argument("--api-key", default=None, help="the API key (default: the provider's environment variable)")
    add_timeout_argument(p)
    p.set_defaults(func=run)


def load_tools(path: str) -> list[ToolDefinition]:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise UserError(f"Could not read the tools file {path}: {exc.strerror or exc}.") from exc
    except orjson.JSONDecodeError as exc:
        raise UserError(f"The tools file {path} is not valid JSON ({exc}).") from exc
    if not isinstance(data, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in data):
        raise UserError(f"The tools file {path} must hold a JSON list of objects with a name, a description "
                        "and JSON-schema parameters.")
    return [ToolDefinition(name=t["name"], description=str(t.get("description", "")),
                           parameters=t.get("parameters") or {"type": "object", "properties": {}}) for t in data]


async def record(args: argparse.Namespace) -> tuple[RecordingTransport, Message | None]:
    tools = load_tools(args.tools) if args.tools else []
    transport = RecordingTransport(args.out, append=args.append)
    messages = ([Message.system(args.system)] if args.system else []) + [Message.user(args.prompt)]
    async with httpx.AsyncClient(transport=transport) as client:
        model = get_model(args.model, api_key=args.api_key, base_url=args.base_url, http_client=client,
                          timeout=Timeout.of(args.timeout))
        async with model.stream(messages, tools=tools) as response:
            async for event in response:
                if event.type == "text_delta":
                    sys.stdout.write(event.text)
                    sys.stdout.flush()
                elif event.type == "tool_call_end":
                    sys.stdout.write(f"\n[tool call] {event.call.name} {event.call.arguments_raw}\n")
        return transport, response.message


def run(args: argparse.Namespace) -> int:
    try:
        transport, _ = run_in_new_loop(record, args)
    except StreamError as exc:
        sys.stderr.write(f"\ntoolwire: {exc} (the stream as received was recorded in {args.out}).\n")
        return 1
    except ToolwireError as exc:
        sys.stderr.write(f"toolwire: {exc}\n")
        return 1
    except httpx.HTTPError as exc:
        secrets = Secrets([args.api_key, urlsplit(args.base_url or "").password])
        sys.stderr.write(f"toolwire: The request failed ({type(exc).__name__}: {secrets.redact(str(exc))}).\n")
        return 1
    last = transport.interactions[-1]["response"] if transport.interactions else {}
    if args.raw and last:
        Path(args.raw).write_text(str(last.get("body", last.get("text", ""))), encoding="utf-8")
    sys.stdout.write(f"\nRecorded {len(transport.interactions)} interaction(s) in {args.out} "
                     "(API keys and auth headers redacted).\n")
    return 0
