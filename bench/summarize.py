#!/usr/bin/env python3
"""The table and charts of one `scripts/bench.sh` run.

Reads the `result key=value ...` lines that queue-bench printed into
`<run>/<backend>.log` and the run's `<run>/meta.txt`, then

- prints the table of every workload on every backend (markdown);
- with `--docs FILE`, writes it into FILE between the lines
  `<!-- bench-table:begin -->` and `<!-- bench-table:end -->`;
- with `--plots DIR`, draws SVG charts into DIR (needs matplotlib;
  scripts/bench.sh provides it in a virtual environment).

Only figures of this run are shown: a workload a backend did not run is
`-`, never a figure from another day.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BACKENDS = [
    ("postgres", "PostgreSQL"),
    ("mysql", "MySQL / MariaDB"),
    ("sqlite", "SQLite"),
    ("redis", "Redis"),
]

BEGIN = "<!-- bench-table:begin -->"
END = "<!-- bench-table:end -->"


def parse(log: Path) -> list[dict[str, str]]:
    """Every `result` line of a log, as a dict of its fields."""
    rows = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("result "):
            continue
        rows.append(dict(re.findall(r"(\S+?)=(\S+)", line[len("result "):])))
    return rows


def find(rows: list[dict[str, str]], **want: str) -> dict[str, str] | None:
    """The last row whose fields match `want` (a rerun replaces a run)."""
    found = None
    for row in rows:
        if all(row.get(k) == v for k, v in want.items()):
            found = row
    return found


def num(value: str | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    figure = float(value)
    return f"{figure:,.{digits}f}"


def rate(row: dict[str, str] | None) -> str:
    return "-" if row is None else num(row.get("jobs_per_s"))


def pair(row: dict[str, str] | None, lo: str, hi: str) -> str:
    if row is None:
        return "-"
    return f"{num(row.get(lo), 2)} / {num(row.get(hi), 2)} ms"


def drain(rows: list[dict[str, str]], c: str) -> dict[str, str] | None:
    return find(rows, workload="drain", c=c)


def workloads() -> list[tuple[str, callable]]:
    """Each row of the table: its label and how to read a backend's cell."""
    return [
        (
            "enqueue, batch (one producer), jobs/s",
            lambda r: rate(find(r, workload="enqueue", mode="batch")),
        ),
        (
            "enqueue, single (one job per call), jobs/s",
            lambda r: rate(find(r, workload="enqueue", mode="single")),
        ),
        ("drain, 1 handler, jobs/s", lambda r: rate(drain(r, "1"))),
        ("drain, 16 handlers, jobs/s", lambda r: rate(drain(r, "16"))),
        ("drain, 64 handlers, jobs/s", lambda r: rate(drain(r, "64"))),
        (
            "drain, 64 handlers, resident memory of the process",
            lambda r: "-" if drain(r, "64") is None else f"{num(drain(r, '64').get('rss_mib'), 1)} MiB",
        ),
        (
            "latency, enqueue call to handler start, p50 / p99",
            lambda r: pair(find(r, workload="latency"), "call_p50_ms", "call_p99_ms"),
        ),
        (
            "scheduled lag (start after due), p50 / p99",
            lambda r: pair(find(r, workload="scheduled"), "p50_ms", "p99_ms"),
        ),
        (
            "backlog in another queue: drain rate / empty queue's",
            lambda r: ratio(find(r, workload="backlog", variant="other_queue")),
        ),
        (
            "backlog in the same queue: drain rate / empty queue's",
            lambda r: ratio(find(r, workload="backlog", variant="same_queue")),
        ),
    ]


def ratio(row: dict[str, str] | None) -> str:
    return "-" if row is None else num(row.get("ratio"), 2)


def sizes(runs: dict[str, list[dict[str, str]]]) -> list[str]:
    """What the workloads ran with, read from the first backend that ran each."""
    wanted = [
        ("enqueue, batch", {"workload": "enqueue", "mode": "batch"}, ["n", "batch", "producers"]),
        ("enqueue, single", {"workload": "enqueue", "mode": "single"}, ["n", "producers"]),
        ("drain at 1 handler", {"workload": "drain", "c": "1"}, ["n"]),
        ("drain at 16 and 64", {"workload": "drain", "c": "16"}, ["n"]),
        ("latency", {"workload": "latency"}, ["count", "interval_ms"]),
        ("scheduled", {"workload": "scheduled"}, ["count", "spread_ms", "backlog"]),
        ("backlog", {"workload": "backlog", "variant": "same_queue"}, ["c", "n", "backlog"]),
    ]
    notes = []
    for label, match, fields in wanted:
        row = next((r for rows in runs.values() if (r := find(rows, **match))), None)
        if row is not None:
            notes.append(f"{label}: " + ", ".join(f"{f}={row[f]}" for f in fields if f in row))
    return notes


def table(run: Path) -> tuple[str, dict[str, list[dict[str, str]]]]:
    runs = {}
    for backend, _ in BACKENDS:
        log = run / f"{backend}.log"
        if log.exists():
            runs[backend] = parse(log)
    if not runs:
        raise SystemExit(f"no <backend>.log with result lines in {run}")
    meta = (run / "meta.txt").read_text().strip() if (run / "meta.txt").exists() else ""
    header = "| workload | " + " | ".join(name for b, name in BACKENDS if b in runs) + " |"
    rule = "|---|" + "---|" * len(runs)
    lines = [header, rule]
    for label, cell in workloads():
        lines.append(
            f"| {label} | " + " | ".join(cell(runs[b]) for b, _ in BACKENDS if b in runs) + " |"
        )
    out = [
        f"Generated by `scripts/bench.sh` from the run in `{run.name}`"
        " (release build; figures of this run only).",
        "",
    ]
    if meta:
        out += ["```", meta, "```", ""]
    out += lines
    notes = sizes(runs)
    if notes:
        out += ["", "Sizes: " + "; ".join(notes) + "."]
    return "\n".join(out), runs


def write_docs(doc: Path, text: str) -> None:
    body = doc.read_text()
    if BEGIN not in body or END not in body:
        raise SystemExit(f"{doc} has no {BEGIN} ... {END} block to replace")
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def plots(runs: dict[str, list[dict[str, str]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    names = [(b, name) for b, name in BACKENDS if b in runs]

    def bars(filename, title, ylabel, groups, value):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        width = 0.8 / max(len(names), 1)
        for i, (backend, name) in enumerate(names):
            xs = [j + i * width for j in range(len(groups))]
            ys = [value(runs[backend], g) or 0.0 for g, _ in groups]
            ax.bar(xs, ys, width, label=name)
        ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(groups))])
        ax.set_xticklabels([label for _, label in groups])
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / filename, metadata={"Date": None})
        plt.close(fig)

    def field(row, key):
        return None if row is None or key not in row else float(row[key])

    bars(
        "drain.svg",
        "Drain: no-op jobs completed per second",
        "jobs/s",
        [("1", "1 handler"), ("16", "16 handlers"), ("64", "64 handlers")],
        lambda rows, c: field(drain(rows, c), "jobs_per_s"),
    )
    bars(
        "enqueue.svg",
        "Enqueue: jobs written per second",
        "jobs/s",
        [("batch", "batch, 1 producer"), ("single", "single, 16 producers")],
        lambda rows, mode: field(find(rows, workload="enqueue", mode=mode), "jobs_per_s"),
    )
    bars(
        "latency.svg",
        "Start latency: enqueue call to handler start",
        "ms",
        [("call_p50_ms", "p50"), ("call_p99_ms", "p99")],
        lambda rows, key: field(find(rows, workload="latency"), key),
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run's directory (target/bench/<stamp>)")
    parser.add_argument("--docs", type=Path, help="write the table into this file's block")
    parser.add_argument("--plots", type=Path, help="draw SVG charts into this directory")
    args = parser.parse_args(argv)
    text, runs = table(args.run)
    print(text)
    if args.docs:
        write_docs(args.docs, text)
    if args.plots:
        plots(runs, args.plots)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
