"""`toolwire replay --protocol P FILE [--json]`: show how toolwire reads a captured response body."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import orjson

from ..events import event_to_dict
from ..exceptions import UserError
from ..replay import ReplayResult, replay
from ..wire import PROTOCOLS


def add_parser(sub: Any) -> None:
    p = sub.add_parser("replay", help="parse a captured raw response body and show the events and message")
    p.add_argument("--protocol", "-p", required=True, choices=sorted(PROTOCOLS), help="the wire protocol")
    p.add_argument("file", help="the raw response body ('-' reads standard input)")
    p.add_argument("--json", action="store_true", help="print one JSON object: message, finish_reason, usage, error")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        body = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        return _fail(args, "file_error", f"Could not read {args.file}: {exc.strerror or exc}.")
    try:
        result = replay(args.protocol, body)
    except UserError as exc:
        return _fail(args, "protocol_unavailable", str(exc))
    try:
        if args.json:
            sys.stdout.write(_dumps(result.to_json_data()) + "\n")
        else:
            _print(result)
    except (TypeError, ValueError, RecursionError) as exc:
        return _fail(args, "unprintable", f"The replayed message cannot be printed as JSON ({type(exc).__name__}: "
                                          f"{exc}); it holds a value nested too deeply or that JSON cannot carry.")
    return 1 if result.error is not None else 0


def _dumps(value: Any, *, indent: bool = False) -> str:
    """JSON text: orjson, or the standard library for what orjson refuses (over 255 levels, huge integers)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, indent=2 if indent else None)


def _print(result: ReplayResult) -> None:
    out = sys.stdout
    for event in result.events:
        if event.type == "message_end":
            continue
        data = event_to_dict(event)
        kind = data.pop("type")
        out.write(f"{kind:<16} {_dumps(data)}\n")
    out.write("\nassembled message:\n")
    out.write(_dumps(result.message.to_dict(), indent=True) + "\n")
    out.write(f"finish_reason: {result.finish_reason}\n")
    if result.usage is not None:
        out.write(f"usage: input_tokens={result.usage.input_tokens} output_tokens={result.usage.output_tokens}\n")
    if result.error is not None:
        out.write(f"error ({result.error.error_type}): {result.error.message}\n")


def _fail(args: argparse.Namespace, kind: str, message: str) -> int:
    if args.json:
        sys.stdout.write(orjson.dumps({"message": None, "finish_reason": None, "usage": None,
                                       "error": {"type": kind, "message": message}}).decode() + "\n")
    else:
        sys.stderr.write(f"toolwire: {message}\n")
    return 1
