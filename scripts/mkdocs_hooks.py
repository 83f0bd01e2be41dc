"""MkDocs hooks for the docs site (mkdocs.yml `hooks:`).

- Guides not named in the nav are added to its Guides section, sorted by their first heading: pages written on
  other branches (docs/guides/<topic>.md) join the site by existing, with no edit of mkdocs.yml to merge.
- The benchmark plots live with the results that bench/run writes (bench/results/); they are added to the
  site from there rather than copied into docs/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PLOTS = {"bench/results/plot.png": "benchmarks/plot.png", "bench/results/load.png": "benchmarks/load.png"}


def _named(nav: list[Any]) -> set[str]:
    found: set[str] = set()
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            found |= _named(value)
        elif isinstance(value, str):
            found.add(value)
    return found


def _title(path: Path) -> str:
    heading = re.search(r"^# (.+)$", path.read_text(), re.M)
    return heading.group(1).strip() if heading else path.stem


def on_config(config: Any) -> Any:
    nav = config["nav"]
    docs = Path(config["docs_dir"])
    named = _named(nav)
    extra = sorted((p for p in (docs / "guides").glob("*.md") if f"guides/{p.name}" not in named), key=_title)
    for section in nav:
        if isinstance(section, dict) and "Guides" in section:
            section["Guides"].extend(f"guides/{p.name}" for p in extra)
    return config


def on_files(files: Files, config: Any) -> Files:
    for source, destination in PLOTS.items():
        if (ROOT / source).exists():
            files.append(File.generated(config, destination, abs_src_path=str(ROOT / source)))
    return files
