"""What the server tells browsers about its responses: who may frame them, how to read them, what to leak.

Every response carries `X-Content-Type-Options: nosniff` (a response is only ever what its type says) and
`Referrer-Policy: no-referrer` (the page's address can carry `#token=`; fragments are never sent, but no
part of the address should be). HTML (the page) carries the page's Content-Security-Policy with
`frame-ancestors`, so no other site can frame the signed-in page and trick a click on its buttons (a
`<meta>` policy cannot say `frame-ancestors`); every other response carries a policy that loads nothing
and may not be framed either.

The headers are added once, to the response's start; the body (each event of a stream) passes untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..web import PAGE_POLICY

__all__ = ["BrowserHeaders"]


class BrowserHeaders:
    """ASGI middleware adding the headers above; `frame_ancestors` is the CSP source list of who may frame."""

    def __init__(self, app: ASGIApp, *, frame_ancestors: str = "'none'") -> None:
        self.app = app
        common = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
        if frame_ancestors.strip() == "'none'":
            common.append((b"x-frame-options", b"DENY"))  # for browsers that predate frame-ancestors
        ancestors = f"frame-ancestors {frame_ancestors}".encode()
        self.page_headers = [*common, (b"content-security-policy", PAGE_POLICY.encode() + b"; " + ancestors)]
        self.other_headers = [*common, (b"content-security-policy", b"default-src 'none'; " + ancestors)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                html = any(name.lower() == b"content-type" and value.startswith(b"text/html")
                           for name, value in headers)
                message["headers"] = headers + (self.page_headers if html else self.other_headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)
