"""Setup item 13: the wheel builds, installs into a fresh virtualenv with lean dependencies, and runs.

One venv: first the bare library (no extras: `import toolwire` works, rich and uvicorn are not
installed, `toolwire` names the missing extra), then the `cli` extra added and the offline demo run
from outside the source tree. Packages come from PyPI through pip's cache.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.timeout(600)
def test_item13_wheel_installs_lean_and_runs_the_demo(tmp_path: Path) -> None:
    """Setup item 13: wheel build + install into a fresh venv, import, then the demo with the cli extra."""
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("toolwire-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--disable-pip-version-check", "-q", wheel, cwd=tmp_path)

    check = textwrap.dedent("""
        import asyncio, importlib.util
        import toolwire
        from toolwire import Agent
        from toolwire.testing import ScriptedModel
        assert importlib.util.find_spec("rich") is None and importlib.util.find_spec("uvicorn") is None
        assert toolwire.__file__.find("site-packages") > 0
        # The mcp and otel extras are optional: without them, a clear line says which to install.
        assert importlib.util.find_spec("mcp") is None and importlib.util.find_spec("opentelemetry") is None
        try:
            import toolwire.mcp
        except ImportError as exc:
            assert "pip install 'toolwire[mcp]'" in str(exc)
        else:
            raise AssertionError("toolwire.mcp imported without the mcp extra")
        from toolwire import UserError, telemetry
        try:
            telemetry.instrument()
        except UserError as exc:
            assert "pip install 'toolwire[otel]'" in str(exc)
        else:
            raise AssertionError("instrument() worked without the otel extra")
        print(asyncio.run(Agent(ScriptedModel(["installed"])).run("hi")).output)
    """)
    assert run(python, "-c", check, cwd=tmp_path).stdout == "installed\n"
    bare = subprocess.run([venv / "bin" / "toolwire", "demo"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert bare.returncode == 1 and "pip install 'toolwire[cli]'" in bare.stderr

    run(python, "-m", "pip", "install", "--disable-pip-version-check", "-q", f"toolwire[cli] @ {wheel.as_uri()}",
        cwd=tmp_path)
    demo = run(venv / "bin" / "toolwire", "demo", "--delay", "0", cwd=tmp_path, timeout=120)
    assert "book_table failed" in demo.stdout and "get_weather returned" in demo.stdout
    assert run(venv / "bin" / "toolwire", "--version", cwd=tmp_path).stdout.startswith("toolwire ")
