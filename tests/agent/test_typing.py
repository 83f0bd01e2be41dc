"""The public types as a type checker sees them: `Agent[OutputT, DepsT]`, unions, deps, `RunContext[Deps]`."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

SNIPPET = '''
from dataclasses import dataclass

from pydantic import BaseModel

from toolwire import Agent, RunContext, tool
from toolwire.testing import ScriptedModel


class City(BaseModel):
    name: str


class Country(BaseModel):
    code: str


@dataclass
class Deps:
    user: str


@tool
def whoami(ctx: RunContext[Deps]) -> str:
    """Who."""
    return ctx.deps.user


async def main() -> None:
    model = ScriptedModel()
    plain = Agent(model)
    reveal_type(plain)
    reveal_type((await plain.run("x")).output)
    typed = Agent(model, output_type=City | Country, tools=[whoami], deps_type=Deps)
    reveal_type(typed)
    reveal_type((await typed.run("x", deps=Deps("ada"))).output)
    annotated: Agent[City] = Agent(model, output_type=City)
    reveal_type(annotated)
    listed = Agent(model, output_type=list[int])
    reveal_type((await listed.run("x")).output)
    await typed.run("x", deps="not deps")
    Agent(model, max_stepz=3)
'''


def test_the_agent_types_as_documented(tmp_path: Path) -> None:
    from mypy import api

    source = tmp_path / "snippet.py"
    source.write_text(textwrap.dedent(SNIPPET))
    out, err, _ = api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                           "--config-file", "", str(source)])
    revealed = re.findall(r'Revealed type is "([^"]+)"', out)
    assert revealed == [
        "toolwire.agent._agent.Agent[str, None]",
        "str",
        "toolwire.agent._agent.Agent[snippet.City | snippet.Country, snippet.Deps]",
        "snippet.City | snippet.Country",
        "toolwire.agent._agent.Agent[snippet.City, None]",
        "list[int]",
    ], out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert 'Argument "deps" to "run" of "Agent" has incompatible type "str"; expected "Deps | None"' in errors[0]
    assert 'Unexpected keyword argument "max_stepz"' in errors[1]
    assert len(errors) == 3, out  # the last: no overload matches the misspelt option
