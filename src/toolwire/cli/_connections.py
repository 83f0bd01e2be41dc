"""`toolwire serve`'s options for what one connection may cost (`server.connections.ConnectionLimits`) and
who may frame the page (`ServerConfig.frame_ancestors`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError

if TYPE_CHECKING:
    from ..server.connections import ConnectionLimits


def _defaults() -> Any:
    """The limits' defaults for the help text: a copy of `ConnectionLimits`' (a test keeps them equal). Every
    `toolwire` command builds this parser, and importing the server package for six numbers would cost each
    of them the whole server's import (about a second); installs without the `server` extra have no server
    package to read them from at all."""
    from types import SimpleNamespace

    return SimpleNamespace(header_timeout=10.0, keep_alive_timeout=5, max_request_line_bytes=8190,
                           max_header_fields=100, max_header_field_bytes=8190, max_header_bytes=32_768)


def add_connection_arguments(p: Any) -> None:
    _DEFAULTS = _defaults()
    p.add_argument("--limit-concurrency", type=int, default=None, metavar="N",
                   help="connections open at once (event streams included); a request past it gets 503 "
                        "(default: half the open-file limit, `ulimit -n`)")
    p.add_argument("--header-timeout", type=float, default=_DEFAULTS.header_timeout, metavar="SECONDS",
                   help="time a connection has to send a request's whole head; 408 after "
                        f"(default: {_DEFAULTS.header_timeout:g}; never applies to a running stream)")
    p.add_argument("--timeout-keep-alive", type=int, default=_DEFAULTS.keep_alive_timeout, metavar="SECONDS",
                   help=f"close a kept-alive connection idle this long (default: {_DEFAULTS.keep_alive_timeout})")
    p.add_argument("--max-request-line", type=int, default=_DEFAULTS.max_request_line_bytes, metavar="BYTES",
                   help=f"longest request line; 414 past it (default: {_DEFAULTS.max_request_line_bytes})")
    p.add_argument("--max-header-fields", type=int, default=_DEFAULTS.max_header_fields, metavar="N",
                   help=f"most header fields in a request; 431 past it (default: {_DEFAULTS.max_header_fields})")
    p.add_argument("--max-header-field-bytes", type=int, default=_DEFAULTS.max_header_field_bytes, metavar="BYTES",
                   help=f"longest header field; 431 past it (default: {_DEFAULTS.max_header_field_bytes})")
    p.add_argument("--max-header-bytes", type=int, default=_DEFAULTS.max_header_bytes, metavar="BYTES",
                   help=f"largest request head in all; 431 past it (default: {_DEFAULTS.max_header_bytes})")


def add_browser_arguments(p: Any) -> None:
    p.add_argument("--frame-ancestors", default="'none'", metavar="SOURCES",
                   help="who may show the page in a frame, as a CSP source list, e.g. "
                        "\"'self' https://portal.example\" (default: 'none', no site)")


def check_connection_arguments(args: argparse.Namespace) -> None:
    """A `UserError` for a limit that is not more than 0."""
    for flag, value in (("--limit-concurrency", args.limit_concurrency), ("--header-timeout", args.header_timeout),
                        ("--timeout-keep-alive", args.timeout_keep_alive),
                        ("--max-request-line", args.max_request_line),
                        ("--max-header-fields", args.max_header_fields),
                        ("--max-header-field-bytes", args.max_header_field_bytes),
                        ("--max-header-bytes", args.max_header_bytes)):
        if value is not None and value <= 0:
            raise UserError(f"{flag} must be more than 0.")


def connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    from ..server.connections import ConnectionLimits

    check_connection_arguments(args)
    return ConnectionLimits(max_request_line_bytes=args.max_request_line, max_header_fields=args.max_header_fields,
                            max_header_field_bytes=args.max_header_field_bytes,
                            max_header_bytes=args.max_header_bytes, header_timeout=args.header_timeout,
                            keep_alive_timeout=args.timeout_keep_alive, max_connections=args.limit_concurrency)
