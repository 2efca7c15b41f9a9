#!/usr/bin/env bash
# Every workload of queue-bench on each backend named (default: all four),
# at the sizes of docs/benchmarks.md, in a release build; then the table of
# the run (bench/summarize.py).
#
#   scripts/bench.sh [postgres] [mysql] [sqlite] [redis]
#
# Each backend's output goes to <run>/<backend>.log, the machine and
# commit to <run>/meta.txt; <run> is $BENCH_OUT, by default
# target/bench/<UTC time>. Servers: this machine's (as in the README), or
# BENCH_URL_POSTGRES, BENCH_URL_MYSQL, BENCH_URL_REDIS.
#
# BENCH_UPDATE_DOCS=1 writes the table into docs/benchmarks.md ("Today's
# figures") and the charts into docs/plots/bench/; it needs all four
# backends in the run, so that the table never mixes days. The charts need
# matplotlib: a virtual environment under target/bench/venv gets it from
# PyPI when python3 has none.
#
# BENCH_QUICK=1 runs `smoke` (every workload at a tiny size) instead: to
# check the pipeline, never for figures (it refuses BENCH_UPDATE_DOCS).
#
# Take figures on a quiet machine: nothing else building or measuring.
set -euo pipefail
cd "$(dirname "$0")/.."

backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(postgres mysql sqlite redis)
for backend in "${backends[@]}"; do
    case $backend in
        postgres | mysql | sqlite | redis) ;;
        *) echo "usage: scripts/bench.sh [postgres] [mysql] [sqlite] [redis] (not: $backend)" >&2; exit 2 ;;
    esac
done
quick=${BENCH_QUICK:-0}
update=${BENCH_UPDATE_DOCS:-0}
if [ "$update" = 1 ]; then
    [ "$quick" = 1 ] && { echo "BENCH_UPDATE_DOCS=1 with BENCH_QUICK=1: smoke figures never go into the docs" >&2; exit 2; }
    [ ${#backends[@]} -eq 4 ] || { echo "BENCH_UPDATE_DOCS=1 needs all four backends in one run" >&2; exit 2; }
fi
run=${BENCH_OUT:-target/bench/$(date -u +%Y-%m-%dT%H%M%SZ)}
mkdir -p "$run"

cargo build --release -q -p queue-bench
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
    echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$run/meta.txt"

url_of() {
    case $1 in
        postgres) echo "${BENCH_URL_POSTGRES:-}" ;;
        mysql) echo "${BENCH_URL_MYSQL:-}" ;;
        redis) echo "${BENCH_URL_REDIS:-}" ;;
        *) echo "" ;;
    esac
}

for backend in "${backends[@]}"; do
    url=$(url_of "$backend")
    bench() {
        if [ -n "$url" ]; then
            target/release/queue-bench --backend "$backend" --url "$url" "$@"
        else
            target/release/queue-bench --backend "$backend" "$@"
        fi
    }
    echo "== $backend (log: $run/$backend.log)"
    {
        if [ "$quick" = 1 ]; then
            bench smoke
        else
            bench enqueue
            # One handler drains a tenth as many: a minute or two instead
            # of ten, at a rate as steady.
            bench drain --n 10000 --concurrency 1
            bench drain --concurrency 16,64
            bench latency
            bench scheduled
            bench backlog
        fi
    } 2>&1 | tee "$run/$backend.log" | grep '^result ' || true
    if ! grep -q '^result ' "$run/$backend.log"; then
        echo "no results from $backend: see $run/$backend.log" >&2
        exit 1
    fi
    echo "load average after $backend: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$run/meta.txt"
done

summarize=(python3 bench/summarize.py "$run")
if [ "$update" = 1 ]; then
    python=python3
    if ! python3 -c 'import matplotlib' 2>/dev/null; then
        [ -x target/bench/venv/bin/python ] || {
            python3 -m venv target/bench/venv
            target/bench/venv/bin/pip install -q matplotlib
        }
        python=target/bench/venv/bin/python
    fi
    summarize=("$python" bench/summarize.py "$run" --docs docs/benchmarks.md --plots docs/plots/bench)
fi
"${summarize[@]}"
