"""`python -m toolwire serve` for the tests without paying its imports at every start: a fork server.

The server tests start `toolwire serve` a few hundred times per run, and two thirds of a start's CPU time is
importing toolwire, SQLAlchemy, pydantic, Starlette and uvicorn (1.5 s of 2.3 s here). On CI's two cores the
suite is CPU-bound, so those imports were the largest single cost of the run. A fork server is a Python
process (one per test process, started on first use) that imports those modules once and then, for each
start, forks a child that runs `python -m toolwire ARGS` exactly as the interpreter would (`runpy` with
`__main__`, the start's environment, working folder, stdout and stderr files and `sys.argv`). The child is a
real process of its own with the real uvicorn on a real socket; the test stops, kills and waits for it by its
pid as before (`ForkedProcess` answers what the tests ask of `subprocess.Popen`: pid, poll, wait,
send_signal, kill, returncode).

What a forked start shares with its siblings is what the imports made: the modules, and the hash seed of
the fork server (set iteration orders are the same in every server of a test process). Nothing toolwire
imports reads the environment at import time (the tools modules, which do, are imported by the child).
`TOOLWIRE_TEST_FORK_SERVER=0` starts every server with `subprocess.Popen` instead.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

ENABLED = os.environ.get("TOOLWIRE_TEST_FORK_SERVER", "1") != "0"

# What every `toolwire serve` imports before it listens (the tools modules are left to the child: they read
# their environment when imported).
PRELOAD = ("toolwire", "toolwire.cli", "toolwire.cli.serve", "toolwire.server", "toolwire.store",
           "toolwire.store.sql", "uvicorn", "uvicorn.protocols.http.httptools_impl", "uvicorn.lifespan.on",
           "httptools", "aiosqlite", "asyncpg", "alembic", "alembic.runtime.migration", "redis.asyncio")

_SERVER = r'''
import importlib, json, os, runpy, selectors, signal, sys

for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:
        pass

def child(request):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = open(0, "r", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", buffering=1 if unbuffered else -1, closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, closefd=False)
    if unbuffered:
        sys.stdout.reconfigure(write_through=True)
    sys.stderr.reconfigure(write_through=True)
    sys.argv = ["-m", *request["args"]]
    sys.path[0] = os.getcwd()
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # ends by the signal, as the interpreter does
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)

def main():
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin.buffer, selectors.EVENT_READ, "request")
    selector.register(read_end, selectors.EVENT_READ, "child")
    reply = sys.stdout.buffer
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.data == "child":
                try:
                    os.read(read_end, 4096)
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    reply.write(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                    reply.flush()
                continue
            chunk = os.read(sys.stdin.fileno(), 65536)
            if not chunk:
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    os.close(read_end)
                    os.close(write_end)
                    child(request)
                reply.write(json.dumps({"started": pid, "id": request["id"]}).encode() + b"\n")
                reply.flush()

main()
'''


class _ForkServer:
    """The fork server of this test process, and what it said about its children."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _SERVER, orjson.dumps(PRELOAD).decode()],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                        cwd=Path(__file__).resolve().parents[2])
        self.started: dict[int, int] = {}
        self.exited: dict[int, int] = {}
        self._condition = threading.Condition()
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True, name="forkserver")
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = orjson.loads(line)
            with self._condition:
                if "started" in message:
                    self.started[message["id"]] = message["started"]
                else:
                    self.exited[message["exited"]] = message["code"]
                self._condition.notify_all()
        with self._condition:
            self._condition.notify_all()

    def start(self, *, module: str, args: Sequence[str], env: dict[str, str], cwd: Path, stdout: Path,
              stderr: Path) -> int:
        with self._condition:
            self._next += 1
            number = self._next
        request = {"id": number, "module": module, "args": list(args), "env": env, "cwd": str(cwd),
                   "stdout": str(stdout), "stderr": str(stderr)}
        assert self.process.stdin is not None
        with self._condition:
            self.process.stdin.write(orjson.dumps(request) + b"\n")
            self.process.stdin.flush()
            if not self._condition.wait_for(lambda: number in self.started or self.process.poll() is not None,
                                            timeout=60):
                raise RuntimeError("The test fork server did not start a process within 60 s.")
            if number not in self.started:
                raise RuntimeError(f"The test fork server ended ({self.process.returncode}).")
            return self.started.pop(number)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self._condition:
            self._condition.wait_for(lambda: pid in self.exited or self.process.poll() is not None, timeout)
            return self.exited.get(pid)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


_servers: dict[str, _ForkServer] = {}
_lock = threading.Lock()


def _fork_server(python_path: str) -> _ForkServer:
    """The fork server for this PYTHONPATH (the one the servers' imports resolve against)."""
    with _lock:
        server = _servers.get(python_path)
        if server is None or server.process.poll() is not None:
            env = {**os.environ, "PYTHONPATH": python_path}
            server = _servers[python_path] = _ForkServer(env)
            if len(_servers) == 1:
                atexit.register(lambda: [s.close() for s in _servers.values()])
        return server


class ForkedProcess:
    """A `python -m MODULE ARGS` forked by the fork server: what the tests use of `subprocess.Popen`."""

    def __init__(self, *, module: str, args: Sequence[str], env: dict[str, str], cwd: Path, stdout: Path,
                 stderr: Path) -> None:
        self._server = _fork_server(env.get("PYTHONPATH", ""))
        self.args = [sys.executable, "-m", module, *args]
        self.pid = self._server.start(module=module, args=args, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.wait(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.wait(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def popen(command: list[str], *, env: dict[str, str], cwd: Path, stdout: Path, stderr: Path,
          preexec: Any = None) -> ForkedProcess | subprocess.Popen[bytes]:
    """`command` (`[sys.executable, "-m", MODULE, ...]`) forked by the fork server, or with `subprocess.Popen`
    where that is asked for or needed (a `preexec_fn`, another interpreter or form of command)."""
    if ENABLED and preexec is None and command[:2] == [sys.executable, "-m"]:
        stdout.write_bytes(b"")  # there from the start, as with Popen (the child opens them again)
        stderr.write_bytes(b"")
        return ForkedProcess(module=command[2], args=command[3:], env=env, cwd=cwd, stdout=stdout, stderr=stderr)
    with stdout.open("wb") as out, stderr.open("wb") as err:
        return subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=cwd, preexec_fn=preexec)
