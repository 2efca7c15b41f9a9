"""Tables of a public-benchmark sweep, in the shape of the harness's own
published summaries (results/2026-05-09-full-sweep/SUMMARY.md upstream).

    python bench/portable/summarize.py RUN_INDEX.tsv [--plots DIR]

RUN_INDEX.tsv is the index scripts/public-bench.sh writes: one row per cell
with its run directory and exit code. Each run directory holds the
harness's summary.json. Prints Markdown:

- throughput sweep: the median completion rate of the `clean` phase per
  system and worker count, and each system's peak;
- chaos: the recovery phase's median completion rate over the baseline's,
  the harness's estimate of jobs lost, and its recovery time;
- pressure: the stressed phase's median completion rate over the clean
  phase's, or the exit code of a cell that did not complete (137: the
  cell's timeout killed it).

The tables need only the standard library. `--plots DIR` also writes
`throughput_scaling.svg` (completion rate over worker count, per system)
and `chaos_recovery.svg` (recovery / baseline per scenario and system)
with matplotlib, which the harness's own environment has.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

CHAOS = [
    ("chaos_postgres_restart", "postgres_restart"),
    ("chaos_pg_backend_kill", "pg_backend_kill"),
    ("chaos_pool_exhaustion", "pool_exhaustion"),
    ("chaos_crash_recovery", "crash_recovery"),
    ("chaos_repeated_kills", "repeated_kills"),
]
PRESSURE = [
    ("idle_in_tx", "idle_1"),
    ("sustained_high_load", "pressure_1"),
    ("active_readers", "readers_1"),
    ("event_burst", "pressure_1"),
]


def phase_value(summary: dict, system: str, label: str, key: str):
    block = summary.get("systems", {}).get(system, {}).get("phases", {}).get(label)
    if not block:
        return None
    if key in block:
        return block[key]
    return block.get("metrics", {}).get(key)


def load(index_path: Path) -> list[dict]:
    cells = []
    with index_path.open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            summary = None
            run_dir = row.get("run_dir") or ""
            if run_dir and (Path(run_dir) / "summary.json").exists():
                summary = json.loads((Path(run_dir) / "summary.json").read_text())
            cells.append({**row, "summary": summary})
    return cells


def fmt_rate(value) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def fmt_pct(num, den) -> str:
    if num is None or not den:
        return "—"
    return f"{100.0 * num / den:.0f}%"


def sweep_tag(cell: dict) -> str:
    """What follows `perf_w<N>_` in a throughput cell's name."""
    prefix = f"perf_w{cell['workers']}_"
    return cell["cell"][len(prefix):] if cell["cell"].startswith(prefix) else ""


def throughput_rates(cells: list[dict]) -> dict[str, dict[int, float | None]]:
    """Median completion rate per row and worker count. A row is a system;
    a system run in throughput cells of several tags (A_TAG) gets one row
    per tag, labelled `system [tag]`."""
    rows: dict[tuple[str, str], dict[int, float | None]] = {}
    for cell in cells:
        if cell["phase"] != "A":
            continue
        w = int(cell["workers"])
        for system in cell["systems"].split(","):
            value = None
            if cell["summary"]:
                value = phase_value(cell["summary"], system, "clean", "median_throughput_per_s")
            rows.setdefault((system, sweep_tag(cell)), {})[w] = value
    tags: dict[str, int] = {}
    for system, _ in rows:
        tags[system] = tags.get(system, 0) + 1
    return {
        (f"{system} [{tag}]" if tags[system] > 1 else system): by_w
        for (system, tag), by_w in rows.items()
    }


def claim_p99(cells: list[dict], row: str, workers: int):
    """Median pickup p99 (ms) of a row's clean phase at `workers`."""
    system, _, tag = row.partition(" [")
    tag = tag.rstrip("]")
    for cell in cells:
        if cell["phase"] == "A" and int(cell["workers"]) == workers and cell["summary"]:
            if system in cell["systems"].split(",") and (not tag or sweep_tag(cell) == tag):
                return phase_value(cell["summary"], system, "clean", "median_claim_p99_ms")
    return None


def throughput(cells: list[dict]) -> list[str]:
    rates = throughput_rates(cells)
    if not rates:
        return []
    ws = sorted({w for by_w in rates.values() for w in by_w})
    out = [
        "### Throughput sweep: median completion rate (jobs/s)",
        "",
        "| System | " + " | ".join(f"W={w}" for w in ws) + " | Peak (at) | pickup p99 at peak |",
        "|---|" + "---:|" * len(ws) + "---|---:|",
    ]
    for system, by_w in rates.items():
        known = [(v, w) for w, v in by_w.items() if v is not None]
        peak, p99 = "—", "—"
        if known:
            rate, at = max(known)
            peak = f"**{fmt_rate(rate)}** (1×{at} w)"
            value = claim_p99(cells, system, at)
            p99 = f"{value:,.0f} ms" if value is not None else "—"
        out.append(
            f"| {system} | "
            + " | ".join(fmt_rate(by_w.get(w)) for w in ws)
            + f" | {peak} | {p99} |"
        )
    return out + [""]


def by_system(cells: list[dict], phase: str) -> dict[str, dict[str, dict]]:
    found: dict[str, dict[str, dict]] = {}
    for cell in cells:
        if cell["phase"] != phase:
            continue
        system = cell["systems"]
        name = cell["cell"][: -(len(system) + 1)] if cell["cell"].endswith("_" + system) else cell["cell"]
        found.setdefault(system, {})[name] = cell
    return found


def chaos_ratios(cells: list[dict]) -> dict[str, dict[str, float]]:
    """Recovery / baseline completion rate per system and scenario."""
    ratios: dict[str, dict[str, float]] = {}
    for system, by_scenario in by_system(cells, "B").items():
        for scenario, short in CHAOS:
            cell = by_scenario.get(scenario)
            if cell is None:
                continue
            s = cell["summary"]
            ratio = 0.0
            if cell["exit_code"] == "0" and s is not None:
                base = phase_value(s, system, "baseline", "median_throughput_per_s")
                rec = phase_value(s, system, "recovery", "median_throughput_per_s")
                ratio = (rec or 0.0) / base if base else 0.0
            ratios.setdefault(system, {})[short] = ratio
    return ratios


def plots(cells: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rates = throughput_rates(cells)
    if rates:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for system, by_w in rates.items():
            points = sorted((w, v) for w, v in by_w.items() if v is not None)
            if points:
                ax.plot([w for w, _ in points], [v for _, v in points], marker="o", label=system)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("workers (WORKER_COUNT)")
        ax.set_ylabel("median completion rate, jobs/s")
        ax.set_title("Throughput sweep (depth-target 4,000)")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "throughput_scaling.svg", metadata={"Date": None})
        plt.close(fig)
    ratios = chaos_ratios(cells)
    if ratios:
        scenarios = [short for _, short in CHAOS]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        width = 0.8 / len(ratios)
        for i, (system, by_scenario) in enumerate(ratios.items()):
            xs = [j + i * width for j in range(len(scenarios))]
            ax.bar(xs, [100 * by_scenario.get(sc, 0.0) for sc in scenarios], width, label=system)
        ax.axhline(90, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xticks([j + width * (len(ratios) - 1) / 2 for j in range(len(scenarios))])
        ax.set_xticklabels(scenarios, rotation=15)
        ax.set_ylabel("recovery / baseline completion rate, %")
        ax.set_title("Chaos scenarios (dashed: 90%)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "chaos_recovery.svg", metadata={"Date": None})
        plt.close(fig)


def scenario_table(cells, phase, title, scenarios, judge, tally) -> list[str]:
    """One row per scenario, one column per system of `phase`'s cells.
    `judge(system, summary, key)` gives a completed cell's text and whether
    it counts towards the last row, `tally` (e.g. "recovered")."""
    found = by_system(cells, phase)
    if not found:
        return []
    systems = list(found)
    out = [
        title,
        "",
        "| scenario | " + " | ".join(systems) + " |",
        "|---|" + "---:|" * len(systems) + "",
    ]
    counted = {s: 0 for s in systems}
    for scenario, label, key in scenarios:
        row = []
        for system in systems:
            cell = found[system].get(scenario)
            if cell is None:
                row.append("not run")
            elif cell["exit_code"] != "0" or cell["summary"] is None:
                row.append(f"(rc={cell['exit_code']})")
            else:
                text, counts = judge(system, cell["summary"], key)
                counted[system] += counts
                row.append(text)
        out.append(f"| {label} | " + " | ".join(row) + " |")
    out.append(
        f"| **{tally}** | "
        + " | ".join(f"{counted[s]}/{len(found[s])}" for s in systems)
        + " |"
    )
    return out + [""]


def chaos_cell(system: str, s: dict, _key) -> tuple[str, bool]:
    base = phase_value(s, system, "baseline", "median_throughput_per_s")
    rec = phase_value(s, system, "recovery", "median_throughput_per_s")
    lost = phase_value(s, system, "recovery", "jobs_lost")
    secs = phase_value(s, system, "recovery", "chaos_recovery_time_s")
    detail = []
    if lost is not None:
        detail.append(f"lost {lost:,.0f}")
    if secs is not None:
        detail.append(f"{secs:.0f} s")
    text = fmt_pct(rec, base) + (f" ({', '.join(detail)})" if detail else "")
    return text, bool(rec and base and rec >= 0.9 * base)


def pressure_cell(system: str, s: dict, stress_label: str) -> tuple[str, bool]:
    clean = phase_value(s, system, "clean_1", "median_throughput_per_s")
    stressed = phase_value(s, system, stress_label, "median_throughput_per_s")
    p99 = phase_value(s, system, stress_label, "median_claim_p99_ms")
    extra = f" (p99 {p99:,.0f} ms)" if p99 is not None else ""
    return fmt_pct(stressed, clean) + extra, True


# The chaos and pressure tables: (phase, title, scenarios, judge, tally).
SCENARIO_TABLES = [
    (
        "B",
        "### Chaos: recovery / baseline completion rate, jobs lost, recovery time",
        [(scenario, short, None) for scenario, short in CHAOS],
        chaos_cell,
        "recovered (≥ 90% of baseline)",
    ),
    (
        "C",
        "### Pressure: stressed / clean completion rate (cells that completed)",
        [(scenario, scenario, label) for scenario, label in PRESSURE],
        pressure_cell,
        "completed",
    ),
]


def main(argv: list[str]) -> int:
    plot_dir = None
    if len(argv) == 4 and argv[2] == "--plots":
        plot_dir = Path(argv[3])
        argv = argv[:2]
    if len(argv) != 2:
        print("usage: summarize.py RUN_INDEX.tsv [--plots DIR]", file=sys.stderr)
        return 2
    index = Path(argv[1])
    if not index.exists():
        print(f"summarize.py: no run index at {index}", file=sys.stderr)
        return 2
    cells = load(index)
    lines = throughput(cells)
    for table in SCENARIO_TABLES:
        lines += scenario_table(cells, *table)
    print("\n".join(lines) if lines else "no cell has run yet")
    if plot_dir is not None:
        plots(cells, plot_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
