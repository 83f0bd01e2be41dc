"""The recorded event sequences (tests/web/sequences/*.json), shared by the Node and browser tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SEQUENCES = Path(__file__).resolve().parent / "sequences"
NAMES = sorted(p.stem for p in SEQUENCES.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SEQUENCES / f"{name}.json").read_text())
    return data


def run_frames(frames: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [f for f in frames if f["data"]["run_id"] == run_id]
