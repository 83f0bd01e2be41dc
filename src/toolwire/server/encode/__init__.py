"""Encoders: the server's one event stream, written in a browser protocol's format. One module per protocol.

`native` is toolwire's own SSE format (the `/api/chats/{id}/stream` contract); `vercel` is the Vercel AI
SDK's UI message stream (what `useChat` reads); `agui` is AG-UI's event stream. An encoder turns each
log entry into bytes for the response body; it is created per response, so protocols that need state
between events (open text blocks, say) keep it on the instance.
"""

from .native import NativeEncoder as NativeEncoder

__all__ = ["NativeEncoder"]
