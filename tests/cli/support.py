"""Running the `toolwire` command as a user would: a separate process, a clean environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b[\[\]()#;?0-9]*[A-Za-z@]|\x1b.")

_PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY",
                  "CO_API_KEY", "COHERE_API_KEY", "GROQ_API_KEY", "OPENROUTER_API_KEY", "XAI_API_KEY",
                  "DEEPSEEK_API_KEY", "TOGETHER_API_KEY", "FIREWORKS_API_KEY", "NVIDIA_API_KEY")
_TERMINAL_OVERRIDES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE", "COLUMNS", "LINES")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without provider keys or colour forcing (and `extra` added)."""
    env = {k: v for k, v in os.environ.items()
           if k not in _PROVIDER_KEYS and k not in _TERMINAL_OVERRIDES and not k.endswith("_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def toolwire(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `toolwire ARGS` to the end with no terminal attached (stdin closed, output captured)."""
    return subprocess.run([sys.executable, "-m", "toolwire.cli", *args], cwd=ROOT, env=env or clean_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
