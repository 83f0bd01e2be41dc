"""MCP over HTTP as hosted servers need it: bearer tokens, headers, the caller's client, TLS, the legacy SSE
transport, the server's instructions and run context reaching the server, against real `mcp` servers on
loopback (tests/mcp/server.py in a subprocess)."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
import pytest

from tests.agent.support import assert_valid_history, results_of
from toolwire import Agent, MCPServerError, RunContext, UserError
from toolwire.mcp import MCPServer
from toolwire.testing import ScriptedModel, ToolCall

from .support import http_process

if TYPE_CHECKING:
    from toolwire.mcp import CallMCPTool

pytestmark = pytest.mark.anyio

KINDS = ["http", "sse"]
TOKEN = "s3cret-token"


def connect(kind: str, url: str, **options: Any) -> MCPServer:
    return MCPServer.sse(url, **options) if kind == "sse" else MCPServer.http(url, **options)


@contextmanager
def guarded(kind: str, **env: str) -> Iterator[str]:
    with http_process(kind=kind, env={"MCP_TOKEN": TOKEN, "MCP_WHOAMI": "1", **env}) as (url, _process):
        yield url


async def whoami(server: MCPServer, deps: Any = None) -> Any:
    model = ScriptedModel([ToolCall("whoami", {})], ["Done."])
    result = await Agent(model, toolsets=[server]).run("Who am I?", deps=deps)
    assert_valid_history(result.messages)
    (answer,) = results_of(result.messages)
    assert not answer.is_error, answer.result
    return answer.result


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_needs_a_token_refuses_without_one_with_a_clear_error(kind: str) -> None:
    with guarded(kind) as url:
        with pytest.raises(MCPServerError) as missing:
            async with connect(kind, url, connect_timeout=20):
                pass
        with pytest.raises(MCPServerError) as wrong:
            async with connect(kind, url, bearer_token="not-it", connect_timeout=20):
                pass
    assert "HTTP 401 Unauthorized" in str(missing.value)
    assert "it needs credentials and none were given" in str(missing.value)
    assert "bearer_token=" in str(missing.value)
    assert "the credentials it was given were refused" in str(wrong.value)
    assert TOKEN not in str(wrong.value) and "not-it" not in str(wrong.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_bearer_token_and_custom_headers_reach_the_server(kind: str) -> None:
    with guarded(kind) as url:
        server = connect(kind, url, bearer_token=TOKEN, headers={"X-Team": "blue"})
        assert await whoami(server) == {"team": "blue", "user": None}


@pytest.mark.parametrize("kind", KINDS)
async def test_the_callers_own_client_is_used_as_it_is_and_left_open(kind: str) -> None:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", "X-Team": "red"},
                                timeout=httpx2.Timeout(30, read=300))
    try:
        with guarded(kind) as url:
            assert await whoami(connect(kind, url, http_client=client)) == {"team": "red", "user": None}
            assert not client.is_closed
    finally:
        await client.aclose()


async def test_an_auth_flow_signs_every_request() -> None:
    class TokenAuth(httpx2.Auth):
        def __init__(self) -> None:
            self.signed = 0

        def auth_flow(self, request: httpx2.Request) -> Any:
            self.signed += 1
            request.headers["Authorization"] = f"Bearer {TOKEN}"
            yield request

    auth = TokenAuth()
    with guarded("http") as url:
        assert await whoami(MCPServer.http(url, auth=auth)) == {"team": None, "user": None}
    assert auth.signed >= 2  # the handshake and the call at least


def test_http_options_are_checked_before_connecting() -> None:
    url = "http://127.0.0.1:9/mcp"
    with pytest.raises(UserError, match=r"httpx2\.AsyncClient"):
        MCPServer.http(url, http_client=httpx.AsyncClient())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="configure them on the client"):
        MCPServer.http(url, http_client=httpx2.AsyncClient(), bearer_token="t")
    with pytest.raises(UserError, match="not both"):
        MCPServer.http(url, bearer_token="t", headers={"authorization": "Bearer u"})
    with pytest.raises(UserError, match="must start with http"):
        MCPServer.sse("127.0.0.1:9/sse")


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, and that key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolwire-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_tls_is_verified_and_a_ca_bundle_makes_a_private_certificate_trusted(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with guarded("http", MCP_TLS_CERT=str(cert), MCP_TLS_KEY=str(key)) as url:
        assert url.startswith("https://")
        with pytest.raises(MCPServerError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            async with MCPServer.http(url, bearer_token=TOKEN, connect_timeout=20):
                pass
        trusted = MCPServer.http(url, bearer_token=TOKEN, verify=str(cert), headers={"X-Team": "tls"})
        assert await whoami(trusted) == {"team": "tls", "user": None}


@pytest.mark.parametrize("kind", KINDS)
async def test_the_servers_instructions_join_the_system_prompt(kind: str) -> None:
    with guarded(kind, MCP_INSTRUCTIONS="Call whoami before anything else.") as url:
        model = ScriptedModel(["Hi."], ["Hi."])
        server = connect(kind, url, bearer_token=TOKEN)
        quiet = connect(kind, url, bearer_token=TOKEN, use_instructions=False)
        await Agent(model, toolsets=[server], system="Be brief.").run("Go.")
        await Agent(model, toolsets=[quiet.prefixed("q")], system="Be brief.").run("Go.")
        assert server.instructions == "Call whoami before anything else."
    first, second = (r.messages[0] for r in model.requests)
    assert (first.role, first.text) == ("system", "Be brief.\n\nCall whoami before anything else.")
    assert (second.role, second.text) == ("system", "Be brief.")


async def test_a_servers_instructions_survive_a_prefix_and_a_filter() -> None:
    with guarded("http", MCP_INSTRUCTIONS="Prefer add.") as url:
        model = ScriptedModel(["Hi."])
        server = MCPServer.http(url, bearer_token=TOKEN)
        await Agent(model, toolsets=[server.prefixed("m").filtered(["m_add"])]).run("Go.")
    assert model.requests[0].messages[0].text == "Prefer add."


@pytest.mark.parametrize("kind", KINDS)
async def test_run_context_deps_reach_the_server_as_meta(kind: str) -> None:
    seen: list[tuple[str, str, dict[str, Any]]] = []

    async def process(ctx: RunContext[dict[str, str]], call_tool: CallMCPTool, name: str,
                      arguments: dict[str, Any]) -> Any:
        assert ctx.run_id is not None and ctx.tool_call is not None and ctx.tool_call.name == name
        seen.append((ctx.deps["user"], name, arguments))
        return await call_tool(name, arguments, meta={"user": ctx.deps["user"]})

    with guarded(kind) as url:
        server = connect(kind, url, bearer_token=TOKEN, process_tool_call=process)
        assert await whoami(server, deps={"user": "ada"}) == {"team": None, "user": "ada"}
    assert seen == [("ada", "whoami", {})]


async def test_the_sse_transport_lists_and_calls_tools() -> None:
    with guarded("sse") as url:
        model = ScriptedModel([ToolCall("add", {"a": 2, "b": 3})], ["Five."])
        server = MCPServer.sse(url, bearer_token=TOKEN)
        async with Agent(model, toolsets=[server]) as agent:
            result = await agent.run("Add.")
    (added,) = results_of(result.messages)
    assert (added.name, added.result, added.is_error) == ("add", {"result": 5}, False)
    assert "whoami" in [t.name for t in model.requests[0].tools]


async def test_process_tool_call_can_ask_the_model_again_within_the_servers_retries() -> None:
    from toolwire import ModelRetry, ToolRetriesExceeded

    from .support import stdio_server

    async def positive_only(ctx: RunContext[Any], call_tool: CallMCPTool, name: str, arguments: dict[str, Any]) -> Any:
        if name == "add" and min(arguments.values()) < 0:
            raise ModelRetry("Only positive numbers, please.")
        return await call_tool(name, arguments)

    model = ScriptedModel([ToolCall("add", {"a": -1, "b": 2})], [ToolCall("add", {"a": 1, "b": 2})], ["3."])
    result = await Agent(model, toolsets=[stdio_server(process_tool_call=positive_only, retries=1)]).run("Add.")
    refused, added = results_of(result.messages)
    assert refused.result == {"error": "Only positive numbers, please."}
    assert added.result == {"result": 3}
    strict = ScriptedModel([ToolCall("add", {"a": -1, "b": 2})], ["never"])
    with pytest.raises(ToolRetriesExceeded) as caught:
        await Agent(strict, toolsets=[stdio_server(process_tool_call=positive_only, retries=0)]).run("Add.")
    assert (caught.value.tool, caught.value.retries) == ("add", 0)
    assert_valid_history(caught.value.messages)
