"""The protocols' own client code in Node (`node/clients.mjs`), driven from the tests one JSON line at a time.

`NodeClients` starts `node clients.mjs` once per test session. `call` sends a command and waits for its
reply; `start` sends one and returns at once (a request that streams while the test acts), and
`Pending.result()` waits for it. Event lines (every chunk a chat receives, errors) are kept in order,
and `wait_event` waits for one a predicate accepts.

The Node packages are the ones pinned by `node/package-lock.json`, installed by `scripts/test-node-clients`
(run by `scripts/test`). Without `node` or those packages the tests skip, saying why, except under
`CI=true`, where that is a failure.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
SCRIPT = NODE_DIR / "clients.mjs"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true, but {reason}; scripts/test installs it (scripts/test-browser, scripts/test-node-clients).")
    pytest.skip(f"The protocol client tests need {reason} (scripts/test installs it).")


class NodeError(AssertionError):
    """A command failed inside the Node process."""


class Pending:
    def __init__(self, clients: NodeClients, number: int, what: str) -> None:
        self._clients = clients
        self.number = number
        self.what = what

    def done(self) -> bool:
        return self.number in self._clients.replies

    def result(self, timeout: float = 30.0) -> Any:
        reply = self._clients.wait(lambda: self._clients.replies.get(self.number), timeout, self.what)
        if not reply["ok"]:
            raise NodeError(f"{self.what} failed in Node:\n{reply['error']}")
        return reply["result"]


class NodeClients:
    def __init__(self) -> None:
        node = shutil.which("node")
        if node is None:
            missing("Node.js (`node`)")
        if not (NODE_DIR / "node_modules" / "ai" / "package.json").is_file():
            missing(f"the npm packages of {NODE_DIR} (`npm ci` there)")
        self.replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._numbers = itertools.count(1)
        self._changed = threading.Condition()
        self.process = subprocess.Popen([str(node), str(SCRIPT)], cwd=NODE_DIR, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._readers = [threading.Thread(target=self._read, daemon=True, name="node-clients"),
                         threading.Thread(target=self._read_stderr, daemon=True, name="node-clients-stderr")]
        for reader in self._readers:
            reader.start()
        self.wait_event(lambda e: e.get("event") == "ready", timeout=30)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = orjson.loads(line)
            with self._changed:
                if "reply" in message:
                    self.replies[message["reply"]] = message
                else:
                    self.events.append(message)
                self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def wait(self, found: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = found()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise AssertionError(f"Timed out waiting for {what}; Node said: {''.join(self.stderr)[-2000:]}")
                self._changed.wait(min(left, 0.5))

    def wait_event(self, accept: Callable[[dict[str, Any]], bool], timeout: float = 15.0,
                   what: str = "an event") -> dict[str, Any]:
        return self.wait(lambda: next((e for e in self.events if accept(e)), None), timeout, what)  # type: ignore[no-any-return]

    def wait_chunk(self, name: str, accept: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> dict[str, Any]:
        return self.wait_event(lambda e: e.get("event") == "chunk" and e["name"] == name and accept(e["chunk"]),
                               timeout, f"a chunk of {name}")["chunk"]  # type: ignore[no-any-return]

    def start(self, cmd: str, **args: Any) -> Pending:
        number = next(self._numbers)
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps({"id": number, "cmd": cmd, **args}) + b"\n")
        self.process.stdin.flush()
        return Pending(self, number, f"{cmd} {args.get('name', '')}")

    def call(self, cmd: str, timeout: float = 30.0, **args: Any) -> Any:
        return self.start(cmd, **args).result(timeout)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
