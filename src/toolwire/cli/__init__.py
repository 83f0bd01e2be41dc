"""The `toolwire` command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

# subcommand → module in this package defining `add_parser(subparsers)`; the parser's `func` runs it.
COMMANDS: dict[str, str] = {
    "replay": "replay",
    "fake-server": "fake_server",
    "record": "record",
    "chat": "chat",
    "run": "run",
    "providers": "providers",
    "demo": "demo",
    "serve": "serve",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolwire",
        description="Stream LLM responses with tool calls across providers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in dict.fromkeys(COMMANDS.values()):
        module = importlib.import_module(f"{__name__}.{module_name}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
