"""The results table (results.md) and plot (plot.png) from one run's measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["targets", "write_report"]

_TITLES = {"openai-chat": "OpenAI Chat Completions", "anthropic": "Anthropic Messages",
           "openai-responses": "OpenAI Responses"}
_TARGET_PROTOCOLS = ("openai-chat", "anthropic")


def _index(data: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(m["protocol"], m["size"], m["contender"]): m for m in data["measurements"]}


def _us(m: dict[str, Any] | None) -> float | None:
    return None if m is None else m.get("us_per_event")


def _cell(m: dict[str, Any] | None) -> str:
    if m is None:
        return "-"
    value = m.get("us_per_event")
    if value is None:
        return {"skipped": "skipped", "stopped": "stopped", "mismatch": "MISMATCH", "error": "error"}[m["status"]]
    text = f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return text + ("¹" if m.get("note") == "one run" else "")


def _ratio(a: float | None, b: float | None, digits: int = 2) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.{digits}f}x"


def _x_limit(index: dict[tuple[str, str, str], dict[str, Any]], protocol: str, size: str,
             name: str) -> float | None:
    """Cost over the limit's: the median of same-round ratios where measured in rounds, else of medians."""
    m = index.get((protocol, size, name))
    if m is None:
        return None
    if m.get("limit_ratio") is not None:
        return float(m["limit_ratio"])
    lim = _us(index.get((protocol, size, "limit")))
    value = _us(m)
    return None if value is None or lim is None else value / lim


def _fastest_peer(index: dict[tuple[str, str, str], dict[str, Any]], protocol: str, size: str,
                  contenders: list[str]) -> tuple[str, float] | None:
    best: tuple[str, float] | None = None
    for name in contenders:
        m = index.get((protocol, size, name))
        if m is None or m["kind"] != "peer" or m.get("us_per_event") is None:
            continue
        if best is None or m["us_per_event"] < best[1]:
            best = (name, m["us_per_event"])
    return best


def targets(data: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """`(target, measured, met)` rows; `met` is None where the run has no number for it."""
    index = _index(data)
    names = _contender_order(data)
    rows: list[tuple[str, str, bool | None]] = []
    for protocol in _TARGET_PROTOCOLS:
        if not any(k[0] == protocol for k in index):
            continue
        title = _TITLES.get(protocol, protocol)
        for size in ("M", "L"):
            tw = _us(index.get((protocol, size, "toolwire")))
            lim = _us(index.get((protocol, size, "limit")))
            ratio = _x_limit(index, protocol, size, "toolwire")
            if tw is not None and lim is not None and ratio is not None:
                rows.append((f"{title} {size}: toolwire (previews on) ≤ 2x the limit",
                             f"{ratio:.2f}x ({tw:.2f} vs {lim:.2f} µs/event)", ratio <= 2.0))
            best = _fastest_peer(index, protocol, size, names)
            if tw is not None and best is not None:
                rows.append((f"{title} {size}: ≥ 10x faster than the fastest peer",
                             f"{best[1] / tw:.1f}x faster than {best[0]} ({best[1]:.1f} µs/event)",
                             best[1] / tw >= 10.0))
        m_cost = _us(index.get((protocol, "M", "toolwire")))
        l_cost = _us(index.get((protocol, "L", "toolwire")))
        m_x = _x_limit(index, protocol, "M", "toolwire")
        l_x = _x_limit(index, protocol, "L", "toolwire")
        if m_cost is not None and l_cost is not None:
            # The machine's speed drifts between the M and L measurements; the cost relative to the limit
            # measured alongside shows the growth without that drift.
            relative = f" ({l_x / m_x:.2f}x relative to the limit)" if m_x and l_x else ""
            rows.append((f"{title}: per-event cost on L ≤ 1.25x M", f"{l_cost / m_cost:.2f}x{relative}",
                         l_cost / m_cost <= 1.25))
    for row in data["memory"]:
        if row["contender"] == "toolwire":
            title = _TITLES.get(row["protocol"], row["protocol"])
            rows.append((f"{title} L: peak memory ≤ 3x the stream's size",
                         f"{row['ratio']:.2f}x ({row['peak_bytes'] / 1e6:.1f} MB for {row['body_bytes'] / 1e6:.1f} MB)",
                         row["ratio"] <= 3.0))
    for row in data["latency"]:
        title = _TITLES.get(row["protocol"], row["protocol"])
        rows.append((f"{title}: first text delta ≤ 0.2 ms over a raw httpx read",
                     f"{row['overhead_us'] / 1000:.3f} ms", row["overhead_us"] <= 200.0))
    return rows


def _contender_order(data: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for m in data["measurements"]:
        if m["contender"] not in seen:
            seen.append(m["contender"])
    return seen


def _protocol_table(data: dict[str, Any], protocol: str) -> list[str]:
    index = _index(data)
    sizes = [s for s in ("S", "M", "L") if s in data["sizes"]]
    events = {s: next((m["events"] for m in data["measurements"] if m["protocol"] == protocol and m["size"] == s), 0)
              for s in sizes}
    body = {s: next((m["body_bytes"] for m in data["measurements"]
                     if m["protocol"] == protocol and m["size"] == s), 0) for s in sizes}
    head = ["contender", *[f"{s} µs/event" for s in sizes]]
    big = [s for s in ("M", "L") if s in sizes]
    head += [f"x limit ({s})" for s in big] + [f"toolwire faster ({s})" for s in big]
    if "M" in sizes and "L" in sizes:
        head.append("L/M per event")
    lines = [
        f"### {_TITLES.get(protocol, protocol)}",
        "",
        "Streams: " + ", ".join(f"{s} = {events[s]:,} events / {body[s] / 1e6:.2f} MB" for s in sizes) + ".",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
    ]
    notes: list[str] = []
    for name in _contender_order(data):
        row_ms = {s: index.get((protocol, s, name)) for s in sizes}
        if all(v is None for v in row_ms.values()):
            continue
        cells = [name if not name.startswith("toolwire") else f"**{name}**"]
        cells += [_cell(row_ms[s]) for s in sizes]
        for s in big:
            x = _x_limit(index, protocol, s, name)
            cells.append("-" if x is None else f"{x:.2f}x")
        for s in big:
            m = row_ms[s]
            cells.append(_ratio(_us(m), _us(index.get((protocol, s, "toolwire"))), 1)
                         if m is not None and m["kind"] == "peer" else "")
        if "M" in sizes and "L" in sizes:
            cells.append(_ratio(_us(row_ms["L"]), _us(row_ms["M"])))
        lines.append("| " + " | ".join(cells) + " |")
        for s in sizes:
            m = row_ms[s]
            if m is not None and m["status"] != "ok":
                notes.append(f"- {name}, {s}: {m['status']} - {m['note']}")
    lines.append("")
    if notes:
        lines.extend(notes)
        lines.append("")
    return lines


def write_report(data: dict[str, Any], out: Path) -> None:
    """Write `results.md` and `plot.png` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    protocols = list(dict.fromkeys(m["protocol"] for m in data["measurements"]))
    v = data["versions"]
    lines = [
        "# toolwire benchmark results",
        "",
        f"One run of `bench/run`{' --quick' if data['quick'] else ''} on {data['when']}: "
        f"{data['machine']['cpus']} CPUs ({data['machine']['processor']}), Python {v['python']}, "
        f"{data['chunk_size']:,}-byte network reads, seed {data['seed']}, {data['elapsed_s']:.0f} s in all.",
        "",
        "Each figure is the median time to turn the response bytes into the final message with parsed tool "
        "calls, divided by the number of wire events. *limit* is SSE framing plus `orjson.loads` of each "
        "payload and nothing else; *httpx read* only reads the body through the mock transport. "
        "The limit, *httpx read* and toolwire are measured together in interleaved rounds (the machine is "
        "shared, and a slow spell then hits all of them alike), and their *x limit* is the median of the "
        "same-round ratios; a peer's is the ratio of medians. *toolwire faster* is how many times a peer's "
        "cost toolwire's (previews on) is. ¹ one run (peers on L run once, in a child process with a deadline).",
        "",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if k != "python") + ".",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|:-:|",
    ]
    for target, measured, met in targets(data):
        lines.append(f"| {target} | {measured} | {'yes' if met else 'no' if met is not None else '-'} |")
    lines += ["", "## µs per event", ""]
    for protocol in protocols:
        lines += _protocol_table(data, protocol)
    if data["memory"]:
        lines += ["## Peak memory on L (tracemalloc)", "", "| stream | contender | peak | stream size | ratio |",
                  "|---|---|---:|---:|---:|"]
        for row in data["memory"]:
            lines.append(f"| {_TITLES.get(row['protocol'], row['protocol'])} L | {row['contender']} | "
                         f"{row['peak_bytes'] / 1e6:.1f} MB | {row['body_bytes'] / 1e6:.1f} MB | {row['ratio']:.2f}x |")
        lines.append("")
    if data["latency"]:
        lines += ["## Time to the first text delta", "",
                  "From the transport handing over the chunk that holds the first text delta to the caller "
                  "holding it: toolwire's `text_delta` event against a raw httpx `aiter_bytes()` read of the "
                  "same chunk (medians).", "",
                  "| protocol | raw httpx read | toolwire | overhead | trials |", "|---|---:|---:|---:|---:|"]
        for row in data["latency"]:
            lines.append(f"| {_TITLES.get(row['protocol'], row['protocol'])} | {row['raw_us']:.1f} µs | "
                         f"{row['toolwire_us']:.1f} µs | {row['overhead_us']:.1f} µs | {row['trials']} |")
        lines.append("")
    if data["fixtures"]:
        lines += ["## Recorded streams", "",
                  "The real recordings in the shared fixtures, replayed through the same path. They are "
                  "short (a few to a few hundred events), so toolwire's figure is dominated by the cost of one "
                  "request (building it, the client's send, the context manager), not by parsing.", "",
                  "| folder | recordings | events | limit µs/event | toolwire µs/event | x limit |",
                  "|---|---:|---:|---:|---:|---:|"]
        for folder, rows in data["fixtures"].items():
            usable = [r for r in rows if r.get("limit") is not None and r.get("toolwire") is not None]
            if not usable:
                continue
            events = sum(r["events"] for r in usable)
            lim = sum(r["limit"] * r["events"] for r in usable) / max(events, 1)
            tw = sum(r["toolwire"] * r["events"] for r in usable) / max(events, 1)
            lines.append(f"| {folder} | {len(usable)} | {events} | {lim:.2f} | {tw:.2f} | {tw / lim:.1f}x |")
        lines.append("")
    if data["broken"]:
        lines += ["## Peers not measured", ""]
        lines += [f"- {name}: {why}" for name, why in data["broken"].items()]
        lines.append("")
    (out / "results.md").write_text("\n".join(lines))
    _plot(data, protocols, out / "plot.png")


def _plot(data: dict[str, Any], protocols: list[str], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    index = _index(data)
    names = _contender_order(data)
    sizes = [s for s in ("M", "L") if s in data["sizes"]] or list(data["sizes"])
    fig, axes = plt.subplots(1, len(protocols), figsize=(6.5 * len(protocols), 5.2), squeeze=False)
    colors = {"S": "#9ecae1", "M": "#4292c6", "L": "#08306b"}
    for ax, protocol in zip(axes[0], protocols, strict=True):
        shown = [n for n in names if any(index.get((protocol, s, n)) for s in sizes)]
        width = 0.8 / len(sizes)
        for k, size in enumerate(sizes):
            values = [_us(index.get((protocol, size, n))) for n in shown]
            xs = [i + (k - (len(sizes) - 1) / 2) * width for i in range(len(shown))]
            bars = ax.bar(xs, [v or 0 for v in values], width, label=size, color=colors.get(size, "#888"))
            for bar, value, name in zip(bars, values, shown, strict=True):
                if value is None:
                    m = index.get((protocol, size, name))
                    label = m["status"] if m is not None else "-"
                else:
                    label = f"{value:.2g}" if value < 1 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
                ax.annotate(label, (bar.get_x() + bar.get_width() / 2, max(bar.get_height(), 0.01)),
                            ha="center", va="bottom", fontsize=7, rotation=90, xytext=(0, 2),
                            textcoords="offset points")
        ax.set_yscale("log")
        ax.set_ylim(0.01, None)
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(shown, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("µs per event (log scale, lower is better)")
        ax.set_title(_TITLES.get(protocol, protocol))
        ax.legend(title="stream size")
        ax.grid(axis="y", which="both", alpha=0.25)
    fig.suptitle("Response bytes → final message with parsed tool calls")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
