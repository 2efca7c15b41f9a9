#!/usr/bin/env bash
# Batch enqueue on PostgreSQL across batch sizes: one or more builds of
# queue-bench and awa 0.6.9's COPY (bench/peers/awa-enqueue), alternated in
# every round, so that a before/after comparison sees the same machine.
#
#   scripts/enqueue-sweep.sh ROUNDS N SIZE...
#
# BINS: the builds to compare, as label=path pairs (default: this
# checkout's target/release/queue-bench as "ours"); AWA: awa-enqueue's
# binary ("" to leave awa out). Each build writes to its own schema,
# bench_<label>, dropped and recreated by queue-bench before each run.
# Prints one "size=S round=R bin=B jobs_per_s=X" line per run, then the
# medians per size and build.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: scripts/enqueue-sweep.sh ROUNDS N SIZE..." >&2; exit 2; }
rounds=$1 n=$2
shift 2
bins=${BINS:-ours=target/release/queue-bench}
awa=${AWA-bench/peers/awa-enqueue/target/release/awa-enqueue}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for size in "$@"; do
    for round in $(seq 1 "$rounds"); do
        for pair in $bins; do
            label=${pair%%=*} bin=${pair#*=}
            rate=$("$bin" --backend postgres --schema "bench_$label" enqueue --n "$n" --batch "$size" \
                --single-n 1 --producers 1 | grep 'mode=batch' | head -n 1 | sed 's/.*jobs_per_s=\([0-9]*\).*/\1/')
            echo "size=$size round=$round bin=$label jobs_per_s=$rate" | tee -a "$out"
        done
        if [ -n "$awa" ]; then
            rate=$("$awa" queue-storage-copy "$n" "$size" | grep -o 'jobs_per_s=[0-9.]*' | cut -d= -f2)
            echo "size=$size round=$round bin=awa jobs_per_s=$rate" | tee -a "$out"
        fi
    done
done
echo "medians, jobs/s:"
python3 - "$out" <<'PY'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    m = re.match(r"size=(\d+) round=\d+ bin=(\S+) jobs_per_s=([\d.]+)", line)
    if m:
        key = (int(m[1]), m[2])
        if key not in runs:
            order.append(key)
        runs[key].append(float(m[3]))
for size, label in order:
    print(f"size={size} bin={label} median={statistics.median(runs[(size, label)]):.0f} runs={len(runs[(size, label)])}")
PY
