"""The `toolwire` command line. Each subcommand lives in its own module and registers itself here.

The command needs the `cli` extra (rich, uvicorn); without it, it says which install line is missing
instead of failing with an ImportError. A closed pipe (`toolwire providers | head`) ends the command
quietly: the reader chose to stop reading.
"""

from __future__ import annotations

import argparse
import importlib
import os
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


_EXTRA_MODULES = frozenset({"rich", "uvicorn"})


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="toolwire",
        description="Stream LLM responses with tool calls across providers.",
    )
    parser.add_argument("--version", action="version", version=f"toolwire {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in dict.fromkeys(COMMANDS.values()):
        module = importlib.import_module(f"{__name__}.{module_name}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
    except ModuleNotFoundError as exc:
        if exc.name not in _EXTRA_MODULES:
            raise
        from .._install import install_hint

        sys.stderr.write(f"toolwire: The toolwire command needs the cli extra ({exc.name} is not installed): "
                         f"{install_hint('cli')}.\n")
        return 1
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    return code


def _silence_stdout() -> None:
    """After the reader of stdout went away: send what is still buffered nowhere, so exit stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
