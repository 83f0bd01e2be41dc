"""`bench/side_by_side --server-cpu`: a process in a capped cgroup gets its share of a core and no more, and the
groups are gone afterwards; where the machine has no cgroup cpu controller (or the user is not root), the cap
refuses with a sentence saying so."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.load.__main__ import cpu_seconds
from bench.side_by_side import cpu_cap
from bench.side_by_side.cpu_cap import CpuCapUnavailable, cpu_capped, cpu_throttled_seconds


def test_a_capped_process_gets_its_share_of_a_core_or_the_cap_says_why_it_cannot() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    refusal: CpuCapUnavailable | None = None
    try:
        try:
            with cpu_capped([busy.pid], 0.2):
                before, started = cpu_seconds(busy.pid), time.monotonic()
                time.sleep(2.0)
                used = (cpu_seconds(busy.pid) - before) / (time.monotonic() - started)
                throttled = cpu_throttled_seconds(busy.pid)
        except CpuCapUnavailable as exc:
            refusal = exc
        if refusal is not None:
            message = str(refusal)
            assert os.geteuid() != 0 or "cgroup cpu controller" in message, message
            assert message.startswith("--server-cpu needs ") and message.endswith(".")
            return
        assert 0.1 < used < 0.3, used  # a spinning process held to a fifth of a core
        assert throttled is not None and throttled > 0.5
        root, _version = cpu_cap._root()
        assert not list(root.glob(f"toolwire-bench-{os.getpid()}-*"))  # the group is removed
        assert cpu_throttled_seconds(busy.pid) is None
    finally:
        busy.kill()
        busy.wait()
