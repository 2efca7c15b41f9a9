#!/usr/bin/env bash
# Every workload of queue-bench on one backend, at the sizes of
# docs/benchmarks.md, in a release build. Output: the `result` lines and
# each run's table.
#
#   scripts/bench.sh postgres [URL]
#   scripts/bench.sh mysql [URL]
#   scripts/bench.sh redis [URL]
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:?usage: scripts/bench.sh postgres|mysql|sqlite|redis [URL]}
url=${2:-}
cargo build --release -q -p queue-bench
bench() {
    if [ -n "$url" ]; then
        target/release/queue-bench --backend "$backend" --url "$url" "$@"
    else
        target/release/queue-bench --backend "$backend" "$@"
    fi
}
bench enqueue
bench drain --concurrency 1,16,64
bench --prefetch 16 drain --concurrency 16
bench latency
bench scheduled
bench backlog
