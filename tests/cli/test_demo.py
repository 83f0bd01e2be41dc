"""`toolwire demo` end to end: a separate process, no terminal, no key, only loopback."""

from __future__ import annotations

import socket

import pytest

from toolwire.cli import main
from toolwire.cli.demo import available_providers, real_model_spec
from toolwire.exceptions import UserError

from .support import ANSI, clean_env, toolwire


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_demo_runs_offline_with_parallel_tools_a_failure_and_a_final_answer() -> None:
    done = toolwire("demo")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert ANSI.search(out) is None, "a pipe must get plain text, no terminal codes"
    assert "fake openai-chat provider on http://127.0.0.1:" in out
    # The streamed preamble, then every call as it completed streaming.
    assert "Let me use get_weather, find_restaurants, convert_currency and book_table." in out
    assert '→ get_weather(city="Lisbon")' in out
    assert '→ find_restaurants(city="Lisbon", cuisine="seafood")' in out
    assert '→ convert_currency(amount=250, from_currency="USD", to_currency="EUR")' in out
    assert '→ book_table(restaurant="Cervejaria do Cais", people=2, time="20:00")' in out
    # Results in the order the tools finished (0.2 s, 0.3 s, 0.5 s, 0.8 s), not the order of the calls.
    finished = [line.split("(")[0] for line in out.splitlines() if line.startswith(("✓ ", "✗ "))]
    assert finished == ["✗ book_table", "✓ convert_currency", "✓ find_restaurants", "✓ get_weather"]
    assert ("failed: The tool 'book_table' failed with ConnectionError: the booking service did not answer"
            in out)
    assert '"converted":230.0' in out
    # The final answer came back from the provider after the results were sent to it.
    final = out.index("Here is what the tools returned:")
    assert final > out.index("✓ get_weather")
    assert "- book_table" in out[final:] and "- get_weather returned" in out[final:]
    assert "usage: 2 model requests" in out


def test_demo_speaks_another_wire_protocol() -> None:
    done = toolwire("demo", "--protocol", "anthropic")
    assert done.returncode == 0, done.stderr
    assert "fake anthropic provider" in done.stdout
    assert "✗ book_table(" in done.stdout and "✓ get_weather(" in done.stdout
    assert "- book_table failed:" in done.stdout  # Anthropic carries is_error back to the model


def test_demo_with_a_key_present_only_mentions_the_real_provider() -> None:
    # Were the demo to call OpenAI, it would go to this closed port and fail.
    env = clean_env(OPENAI_API_KEY="sk-not-used", OPENAI_BASE_URL=f"http://127.0.0.1:{_closed_port()}/v1")
    done = toolwire("demo", env=env)
    assert done.returncode == 0, done.stderr
    assert "fake openai-chat provider" in done.stdout
    assert "OPENAI_API_KEY is set: --provider openai" in done.stdout


def test_demo_with_a_provider_and_no_key_names_the_variable() -> None:
    done = toolwire("demo", "--provider", "anthropic")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "toolwire: No API key for 'anthropic': set ANTHROPIC_API_KEY in the environment, or pass --api-key."]


def test_demo_provider_runs_the_conversation_against_that_provider(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from toolwire.testing import AutoResponder, FakeProviderServer

    with FakeProviderServer("anthropic", AutoResponder(), api_key="sk-ant-test") as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        assert main(["demo", "--provider", "anthropic:claude-test"]) == 0
        assert server.requests[0].model == "claude-test"
        assert [t.name for t in server.requests[0].tools] == [
            "get_weather", "find_restaurants", "convert_currency", "book_table"]
    out = capsys.readouterr().out
    assert "toolwire demo · anthropic:claude-test" in out
    assert "Here is what the tools returned:" in out


def test_real_model_spec_defaults_and_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    assert real_model_spec("openai") == "openai:gpt-4.1-mini"
    assert real_model_spec("anthropic:claude-opus-4-1") == "anthropic:claude-opus-4-1"
    with pytest.raises(UserError, match="no default model for 'openai-compatible'"):
        real_model_spec("openai-compatible")
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g")
    assert ("gemini", "GOOGLE_API_KEY") in available_providers()
    assert all(name != "openai" for name, _ in available_providers())


@pytest.mark.parametrize("protocol", ["openai-responses", "gemini", "ollama", "mistral", "cohere"])
def test_demo_conversation_over_every_fake_protocol(protocol: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--protocol", protocol, "--delay", "0"]) == 0
    out = capsys.readouterr().out
    assert f"a fake {protocol} provider on http://127.0.0.1:" in out
    finished = sorted(line.split("(")[0] for line in out.splitlines() if line.startswith(("✓ ", "✗ ")))
    assert finished == ["✓ convert_currency", "✓ find_restaurants", "✓ get_weather", "✗ book_table"]
    assert "Here is what the tools returned:" in out and "usage: 2 model requests" in out
