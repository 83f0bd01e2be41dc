"""One download of what the install tests' virtualenvs need, shared by every test worker of a run.

The install tests make fresh virtualenvs and install toolwire into them as a user would, with pip's own
resolver. Asking the package index again for each of those installs cost most of their time (each install
looks up ~35 distributions over the network), so the first test that needs them downloads toolwire's
dependencies for every extra the tests install, and hatchling (the build backend pip needs to build the sdist
and the checkout), into one folder; installs then resolve against that folder only (`PIP_NO_INDEX`,
`PIP_FIND_LINKS`), which is the same resolution against a smaller index.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = "server,otel,postgres,redis"


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this run sees (each worker's base temp is a child of it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of downloaded distributions; the first caller downloads while the others wait on a lock."""
    base = shared_folder(tmp_path_factory)
    folder = base / "wheelhouse"
    with (base / "wheelhouse.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").exists():
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--dest", folder,
                 f"{ROOT}[{EXTRAS}]", "hatchling>=1.27"],
                capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"pip download failed:\n{done.stdout}\n{done.stderr}"
            (folder / ".complete").touch()
    return folder


def offline_pip_env(folder: Path) -> dict[str, str]:
    """The environment for a pip that resolves against `folder` only (build isolation included)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    # No bytecode compiled at install (PIP_NO_COMPILE): Python compiles what a test imports anyway, and compiling
    # every installed module was most of an install's time here.
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(folder), PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_COMPILE="1")
    return env
