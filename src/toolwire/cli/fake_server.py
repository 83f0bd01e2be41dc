"""`toolwire fake-server --protocol P [--script FILE | --replay FILE | --auto] [--port N]`.

Runs a fake provider API on this machine: point any client (toolwire or another library) at the
printed base URL to get streams in that provider's exact wire format without a key or a network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from ..exceptions import UserError
from ..testing.fake import FAKE_PROTOCOLS, FakeRecording, FakeReply, FakeScript, Responder, load_script
from ..testing.fake._auto import AutoResponder
from ..testing.fake_server import FakeProviderServer


def add_parser(sub: Any) -> None:
    p = sub.add_parser("fake-server", help="serve a fake provider API on loopback (scripted, recorded or automatic)",
                       description="Serve a fake provider API that streams in the provider's exact wire format.")
    p.add_argument("--protocol", "-p", required=True, choices=sorted(FAKE_PROTOCOLS), help="the wire protocol")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--script", metavar="FILE", help="a JSON script of turns, answered one per request")
    mode.add_argument("--replay", metavar="FILE",
                      help="a recorded body (.sse, .ndjson, .json, .chunks.jsonl) or a toolwire cassette to serve")
    mode.add_argument("--auto", action="store_true",
                      help="call the tools each request offers, then summarise their results (the default)")
    p.add_argument("--then-auto", action="store_true", help="with --script: answer automatically once it is used up")
    p.add_argument("--status", type=int, default=200, help="with --replay of a body: the HTTP status to answer")
    p.add_argument("--delay", type=float, default=0.0, help="seconds between streamed frames (--auto, --replay)")
    p.add_argument("--seed", type=int, default=None, help="make ids and automatic arguments reproducible")
    p.add_argument("--api-key", default=None, help="require this API key on every request")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    p.set_defaults(func=run)


def replies_from_replay_file(path: Path, status: int, delay: float) -> Responder:
    """A body file answers every request; a cassette answers with its recorded responses in order."""
    if path.suffix == ".json":
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            data = None
        if isinstance(data, dict) and "interactions" in data:
            replies: list[FakeReply] = []
            for interaction in data["interactions"]:
                response = interaction.get("response", {})
                headers = response.get("headers", {})
                body = response.get("body", response.get("text", ""))
                replies.append(FakeRecording(body=str(body), status=int(response.get("status", 200)),
                                             content_type=headers.get("content-type"), delay=delay))
            return FakeScript(replies)
    if not path.is_file():
        raise UserError(f"There is no file {path} to replay.")
    return FakeRecording(file=str(path), status=status, delay=delay)


def run(args: argparse.Namespace) -> int:
    try:
        responder: Responder
        if args.script:
            then = AutoResponder(seed=args.seed or 0, delay=args.delay) if args.then_auto else None
            responder = FakeScript(load_script(args.script), then=then,
                                   when_used_up="Add turns to the script, or start the server with --then-auto.")
        elif args.replay:
            responder = replies_from_replay_file(Path(args.replay), args.status, args.delay)
        else:
            responder = AutoResponder(seed=args.seed or 0, delay=args.delay)
        server = FakeProviderServer(args.protocol, responder, seed=args.seed, api_key=args.api_key,
                                    host=args.host, port=args.port)
    except UserError as exc:
        sys.stderr.write(f"toolwire: {exc}\n")
        return 1

    def ready(server: FakeProviderServer) -> None:
        out = sys.stdout
        out.write(f"Fake {server.protocol} server listening on {server.url}\n")
        out.write(f"base_url: {server.base_url}\n")
        out.write(f"Try: toolwire chat {server.provider}:any-model --base-url {server.base_url} --api-key any\n")
        out.write(f"  or, in Python: get_model('{server.provider}:any-model', base_url='{server.base_url}', "
                  "api_key='any')\n")
        out.write("Press Ctrl-C to stop.\n")
        out.flush()

    try:
        server.serve_forever(ready)
    except OSError as exc:
        sys.stderr.write(f"toolwire: Could not listen on {args.host}:{args.port} ({exc.strerror or exc}).\n")
        return 1
    return 0
