"""`--tool module:function`: what it loads, and the one-line errors for what it cannot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolwire import Tool
from toolwire.cli._tools import check_model, load_tool, load_tools
from toolwire.demo_tools import DEMO_TOOLS, get_weather
from toolwire.exceptions import UserError


def test_a_tool_object_is_used_as_it_is() -> None:
    assert load_tool("toolwire.demo_tools:get_weather") == [get_weather]


def test_a_plain_function_is_wrapped_and_a_list_is_expanded() -> None:
    loaded = load_tools(["tests.cli.chat_tools:plain_function", "toolwire.demo_tools:DEMO_TOOLS"])
    assert isinstance(loaded[0], Tool) and loaded[0].name == "plain_function"
    assert loaded[0].parameters["properties"] == {"x": {"type": "integer"}}
    assert loaded[1:] == DEMO_TOOLS


def test_a_module_in_the_working_directory_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_local_tools.py").write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    monkeypatch.delitem(sys.modules, "my_local_tools", raising=False)
    assert [t.name for t in load_tool("my_local_tools:shout")] == ["shout"]


@pytest.mark.parametrize(("spec", "message"), [
    ("get_weather", "is not of the form module:function"),
    ("no_such_module_here:f", "The module 'no_such_module_here' of the tool 'no_such_module_here:f' was not found"),
    ("toolwire.demo_tools:nope", "The module 'toolwire.demo_tools' has no 'nope'"),
    ("tests.cli.chat_tools:not_a_tool", "is int, not a function or a Tool"),
])
def test_bad_tool_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_tool(spec)


def test_check_model_names_the_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(UserError, match=r"set GEMINI_API_KEY or GOOGLE_API_KEY in the environment, or pass --api-key"):
        check_model("gemini:gemini-2.5-flash", api_key=None)
    check_model("gemini:gemini-2.5-flash", api_key="given")
    check_model("ollama:llama3.2", api_key=None)  # a local provider needs no key
    with pytest.raises(UserError, match="has no provider"):
        check_model("gpt-4.1-mini", api_key=None)
