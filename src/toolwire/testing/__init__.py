"""Test helpers for code built on toolwire: scripted models that need no network.

`ScriptedModel` plays scripted responses (text, tool calls with chosen argument chunking, delays,
errors, dropped connections) and records every request it receives.

`FakeProviderServer` is a real HTTP server on loopback that streams each provider's exact wire format
(scripted `FakeTurn`s, recorded bodies, or the `AutoResponder`); `RecordingTransport` and
`ReplayTransport` capture real provider streams into cassettes (keys redacted) and serve them back.
"""

from .fake import (
    FakeHTTPError as FakeHTTPError,
    FakeMatch as FakeMatch,
    FakeRecording as FakeRecording,
    FakeRequest as FakeRequest,
    FakeScript as FakeScript,
    FakeStreamError as FakeStreamError,
    FakeText as FakeText,
    FakeThinking as FakeThinking,
    FakeToolCall as FakeToolCall,
    FakeTurn as FakeTurn,
    FakeUsage as FakeUsage,
    estimate_tokens as estimate_tokens,
    load_script as load_script,
)
from .fake._auto import AutoResponder as AutoResponder
from .fake_server import FakeProviderApp as FakeProviderApp, FakeProviderServer as FakeProviderServer
from .record import (
    CassetteError as CassetteError,
    RecordingTransport as RecordingTransport,
    ReplayTransport as ReplayTransport,
    cassette_transport as cassette_transport,
)
from .scripted import (
    Delay as Delay,
    Disconnect as Disconnect,
    Fail as Fail,
    Finish as Finish,
    ScriptedModel as ScriptedModel,
    ScriptedRequest as ScriptedRequest,
    Text as Text,
    Thinking as Thinking,
    ToolCall as ToolCall,
    Turn as Turn,
)

__all__ = [
    "AutoResponder",
    "CassetteError",
    "Delay",
    "Disconnect",
    "Fail",
    "FakeHTTPError",
    "FakeMatch",
    "FakeProviderApp",
    "FakeProviderServer",
    "FakeRecording",
    "FakeRequest",
    "FakeScript",
    "FakeStreamError",
    "FakeText",
    "FakeThinking",
    "FakeToolCall",
    "FakeTurn",
    "FakeUsage",
    "Finish",
    "RecordingTransport",
    "ReplayTransport",
    "ScriptedModel",
    "ScriptedRequest",
    "Text",
    "Thinking",
    "ToolCall",
    "Turn",
    "cassette_transport",
    "estimate_tokens",
    "load_script",
]
