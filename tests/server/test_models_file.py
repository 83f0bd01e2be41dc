"""`toolwire serve --models-file`: labels and per-model settings reach the picker and the provider; an entry whose
key is missing is left out with a line; a bad file stops the start with one sentence naming the file and entry."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.server.support import REPO, GateServer, read_events, text
from tests.server.test_serve_cli import clean_env, stop
from tests.services import interruptible

pytestmark = pytest.mark.anyio


def models_file(folder: Path, body: str) -> Path:
    path = folder / "models.toml"
    path.write_text(body)
    return path


def start_serve(folder: Path, path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], list[str]]:
    """`toolwire serve --models-file path`, and what it printed up to the URL to open."""
    process = subprocess.Popen([sys.executable, "-m", "toolwire", "serve", "--port", "0", "--fake-delay", "0",
                                "--models-file", str(path)], cwd=folder, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, preexec_fn=interruptible)
    assert process.stdout is not None
    lines: list[str] = []
    while not any(line.startswith("Open ") for line in lines) and process.poll() is None:
        lines.append(process.stdout.readline().decode())
    return process, lines


async def test_a_models_file_gives_labels_settings_and_leaves_out_a_model_without_its_key(
        tmp_path: Path, gate: GateServer) -> None:
    path = models_file(tmp_path, f"""
[[models]]
id = "gate"
label = "Gate model"
model = "openai:gate-model"
base_url = "{gate.url}/v1"
api_key_env = "GATE_TEST_KEY"
temperature = 0.25
max_tokens = 77

[[models]]
label = "Needs a key nobody set"
model = "anthropic:claude-haiku-4-5"
api_key_env = "NO_SUCH_TEST_KEY"

[[models]]
model = "fake"
""")
    process, lines = start_serve(tmp_path, path, {**clean_env(), "GATE_TEST_KEY": "gate-key"})
    try:
        assert any(f"{path}, model 2 (Needs a key nobody set) is left out: NO_SUCH_TEST_KEY is not set." in line
                   for line in lines), lines
        found = re.search(r"Open (http://\S+)/#token=(\S+)", "".join(lines))
        assert found, lines
        url, token = found.groups()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, trust_env=False,
                                     timeout=30) as client:
            assert (await client.get("/api/models")).json() == {"models": [
                {"id": "gate", "label": "Gate model", "default": True},
                {"id": "fake", "label": "Offline demo", "default": False}]}
            gate.script("file", text("From the gate."))
            chat = (await client.post("/api/chats", json={})).json()["id"]
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": "1", "text": "[[file]] hi"}) as response:
                events = [e async for e in read_events(response)]
            assert events[0].data["model"] == "gate" and events[-1].data["status"] == "completed"
            [body] = gate.bodies
            assert (body["model"], body["temperature"], body["max_completion_tokens"]) == ("gate-model", 0.25, 77)

            # The offline model, chosen for another chat, answers without the gate.
            offline = (await client.post("/api/chats", json={"model": "fake"})).json()["id"]
            async with client.stream("POST", f"/api/chats/{offline}/messages",
                                     json={"client_message_id": "2", "text": "Hello!"}) as response:
                events = [e async for e in read_events(response)]
            assert events[0].data["model"] == "fake" and events[-1].data["status"] == "completed"
            assert len(gate.bodies) == 1
    finally:
        stop(process)


@pytest.mark.parametrize(("body", "expected"), [
    ("[[models]]\nmodel = ", "is not valid TOML"),
    ("title = 'x'\n", "has 'title' at its top level"),
    ("[[models]]\nlabel = 'no model'\n", "model 1: it needs model = \"provider:model\""),
    ("[[models]]\nmodel = 'openai:a'\ntemprature = 1\n", "model 1 (openai:a): 'temprature' is not a setting"),
    ("[[models]]\nmodel = 'fake'\n[[models]]\nmodel = 'openai:a'\ntemperature = 3\n",
     "model 2 (openai:a): temperature must be a number from 0 to 2."),
    ("[[models]]\nmodel = 'openai:a'\nmax_tokens = 0\n", "max_tokens must be a whole number"),
    ("[[models]]\nmodel = 'nope:a'\n", "model 1 (nope:a): Unknown provider"),
    ("[[models]]\nmodel = 'fake'\n[[models]]\nmodel = 'fake'\n", "two models with the id 'fake'"),
    ("[[models]]\nmodel = 'anthropic:x'\napi_key_env = 'NO_SUCH_TEST_KEY'\n",
     "None of the models of models.toml has its API key set (NO_SUCH_TEST_KEY)"),
])
def test_a_bad_models_file_stops_the_start_with_one_sentence(tmp_path: Path, body: str, expected: str) -> None:
    models_file(tmp_path, body)
    done = subprocess.run([sys.executable, "-m", "toolwire", "serve", "--port", "0", "--models-file", "models.toml"],
                          cwd=tmp_path, env={**clean_env(), "OPENAI_API_KEY": "k"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("toolwire: ") and expected in done.stderr, done.stderr
    assert "models.toml" in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_models_file_and_model_are_not_given_together(tmp_path: Path) -> None:
    models_file(tmp_path, "[[models]]\nmodel = 'fake'\n")
    done = subprocess.run([sys.executable, "-m", "toolwire", "serve", "--port", "0", "--models-file", "models.toml",
                           "--model", "fake"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "Give --models-file or --model, not both" in done.stderr, done.stderr


def test_the_guides_sample_models_file_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample of docs/guides/models.md is a file `serve` reads as the guide says."""
    from toolwire.cli._models import file_models

    guide = (REPO / "docs" / "guides" / "models.md").read_text()
    [sample] = re.findall(r"^```toml\n(.*?)^```", guide, re.S | re.M)
    path = models_file(tmp_path, sample)
    for variable in ("OPENAI_API_KEY", "TEAM_ANTHROPIC_KEY"):
        monkeypatch.setenv(variable, "k")
    models, left_out = file_models(str(path))
    assert [(m.id, m.label, m.spec) for m in models] == [
        ("fast", "Fast (GPT-4.1 mini)", "openai:gpt-4.1-mini"),
        ("careful", "Careful (Claude Haiku)", "anthropic:claude-haiku-4-5"),
        ("local", "Local Llama", "ollama:llama3.2"),
        ("fake", "Offline demo", "fake")]
    assert models[0].settings == {"temperature": 0.3, "max_tokens": 2048}
    assert models[2].base_url == "http://gpu-box:11434" and left_out == []
    monkeypatch.delenv("TEAM_ANTHROPIC_KEY")
    models, left_out = file_models(str(path))
    assert [m.id for m in models] == ["fast", "local", "fake"]
    assert left_out == [f"toolwire serve: {path}, model 2 (Careful (Claude Haiku)) is left out: TEAM_ANTHROPIC_KEY "
                        "is not set."]
