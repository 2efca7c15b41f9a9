#!/usr/bin/env bash
# The public cross-system benchmark, hardbyte/postgresql-job-queue-benchmarking,
# on this machine with this project's adapter beside the peers that can run
# here, in one command:
#
#   scripts/public-bench.sh            # phases a, b and c
#   scripts/public-bench.sh a          # the throughput sweep only
#   scripts/public-bench.sh setup      # checkouts, venv and builds only
#   scripts/public-bench.sh summary    # the tables of the cells run so far
#
# Phase a: the throughput sweep (4, 16, 64, 128, 256 workers, depth-target
# 4,000); b: the five chaos scenarios; c: the pressure cells (idle-in-tx,
# sustained high load, active readers, event burst). The cells and their
# settings are the harness's own scripts/run_full_sweep.sh, which runs
# them in containers; here Postgres is a Debian cluster of its own on the
# harness's port 15555 (bench/portable/pg-control.sh) and every adapter a
# local process (bench/portable/harness.patch). A cell already in
# run_index.tsv is skipped, so a stopped sweep resumes.
#
# Settings (environment):
#   SYSTEMS         adapters (default queue-rs,awa,pgboss,procrastinate)
#   A_WORKERS       phase a's worker counts (default "4 16 64 128 256")
#   A_SYSTEMS       phase a's adapters (default: SYSTEMS)
#   A_TAG           phase a's cell names end in it (default shared): a
#                   second set of adapters or worker counts needs its own
#   B_SYSTEMS, C_SYSTEMS   the same for phases b and c (default: SYSTEMS)
#   C_SCENARIOS     phase c's cells (default "idle_in_tx sustained_high_load
#                   active_readers event_burst")
#   WARMUP, CLEAN   phase a's durations (default 30s and 180s, as upstream)
#   PUBLIC_BENCH_DIR   where the harness, awa and the results go
#                   (default target/public-bench)
#   HARNESS_SRC, HARNESS_REV   the harness repository (URL or local git
#                   directory) and commit (default the upstream, 93677ca)
#   AWA_SRC, AWA_REV           the same for awa (default upstream, v0.6.5)
#   BENCH_PYTHON    a Python >= 3.12 (default python3.12)
#
# Needs: PostgreSQL's server packages (pg_createcluster; the cluster is
# created and dropped by the harness for every system), Node.js and npm
# (pg-boss), a Python >= 3.12 (the harness, procrastinate), cargo, and the
# network to crates.io, npm and PyPI the first time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${PUBLIC_BENCH_DIR:-$root/target/public-bench}
harness_src=${HARNESS_SRC:-https://github.com/hardbyte/postgresql-job-queue-benchmarking.git}
harness_rev=${HARNESS_REV:-93677ca}
awa_src=${AWA_SRC:-https://github.com/hardbyte/awa.git}
awa_rev=${AWA_REV:-v0.6.5}
systems=${SYSTEMS:-queue-rs,awa,pgboss,procrastinate}
python=${BENCH_PYTHON:-python3.12}
warmup=${WARMUP:-30s}
clean=${CLEAN:-180s}
harness=$work/harness
results=$work/results
index=$results/run_index.tsv

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$results/run.log" >&2; }
die() { echo "public-bench.sh: $*" >&2; exit 2; }

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(a b c)
for p in "${phases[@]}"; do
    case "$p" in a | b | c | setup | summary) ;; *) die "unknown phase '$p' (a, b, c, setup or summary)" ;; esac
done

# checkout SRC REV DEST: the files of REV without the harness's committed
# results (large, and not needed to run).
checkout() {
    local src=$1 rev=$2 dest=$3
    [ -f "$dest/.public-bench-rev" ] && [ "$(cat "$dest/.public-bench-rev")" = "$rev" ] && return
    rm -rf "$dest"
    mkdir -p "$dest"
    if [ -d "$src" ]; then
        # A mirror may lack the blobs of results/; git archive then
        # complains about them although they are not asked for.
        git -C "$src" ls-tree -r "$rev" | awk '$2 == "blob" { print $4 }' | grep -v '^results/' |
            xargs git -C "$src" archive --format=tar "$rev" -- 2>/dev/null | tar -x -C "$dest"
    else
        git clone -q "$src" "$dest"
        git -C "$dest" checkout -q "$rev"
    fi
    echo "$rev" > "$dest/.public-bench-rev"
}

setup() {
    mkdir -p "$work" "$results"
    [ -f "$index" ] || printf 'phase\tcell\tworkers\tsystems\trun_dir\texit_code\tstarted\tended\n' > "$index"
    if [ ! -f "$harness/.public-bench-patched" ]; then
        checkout "$harness_src" "$harness_rev" "$harness"
        (cd "$harness" && patch -s -p1 < "$root/bench/portable/harness.patch")
        mkdir -p "$harness/queue-rs-bench"
        touch "$harness/.public-bench-patched"
    fi
    cp "$root/bench/portable/queue-bench/adapter.json" "$harness/queue-rs-bench/adapter.json"
    if [[ ",$systems," == *,awa,* ]]; then checkout "$awa_src" "$awa_rev" "$work/awa"; fi
    if [ ! -x "$harness/.venv/bin/bench" ]; then
        "$python" -m venv "$harness/.venv"
        "$harness/.venv/bin/pip" install -q -e "$harness"
    fi
    export BENCH_PG_CONTROL=$root/bench/portable/pg-control.sh
    export BENCH_PG_CONF=$harness/postgres.conf
    export BENCH_ADAPTER_RUNTIME=native
    export BENCH_NATIVE_PYTHON=$python
    export QUEUE_RS_REPO=$root
    # Build every adapter once, before any cell is measured.
    (cd "$root" && cargo build --release -q -p queue-bench)
    if [[ ",$systems," == *,awa,* ]]; then
        # awa's build outlives a fresh harness checkout.
        mkdir -p "$work/awa-target"
        ln -sfn "$work/awa-target" "$harness/awa-bench/target"
        (cd "$harness/awa-bench" && SQLX_OFFLINE=true cargo build --release -q)
    fi
}

# cell PHASE ID WORKERS SYSTEMS TIMEOUT ENV -- BENCH-RUN-ARGS...
cell() {
    local phase=$1 id=$2 workers=$3 cell_systems=$4 limit=$5 extra_env=$6
    shift 7
    if awk -F '\t' -v id="$id" '$2 == id { found = 1 } END { exit !found }' "$index"; then
        log "skip $id (in run_index.tsv)"
        return
    fi
    local logfile=$results/logs/$id.log started rc=0
    mkdir -p "$results/logs"
    started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    log "start $id systems=$cell_systems workers=$workers"
    # shellcheck disable=SC2086
    (cd "$harness" && timeout --signal=KILL "$limit" env $extra_env .venv/bin/bench run \
        --systems "$cell_systems" --skip-build "$@") > "$logfile" 2>&1 || rc=$?
    # A cell killed by its timeout leaves its cluster and adapters behind.
    if [ "$rc" = 137 ]; then
        pkill -f 'queue-bench portable' || true
        pkill -f 'awa-bench' || true
        pkill -f 'pgboss-bench|node main.js' || true
        pkill -f 'procrastinate-bench' || true
        (cd "$harness" && "$BENCH_PG_CONTROL" down) || true
    fi
    local run_dir
    run_dir=$(grep -oE '/[^[:space:]]*/results/[A-Za-z0-9_]+-[0-9TZ]+-[a-f0-9]+' "$logfile" | tail -1 || true)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$id" "$workers" "$cell_systems" \
        "$run_dir" "$rc" "$started" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$index"
    log "end $id rc=$rc ${run_dir##*/}"
}

phase_a() {
    local w
    for w in ${A_WORKERS:-4 16 64 128 256}; do
        cell A "perf_w${w}_${A_TAG:-shared}" "$w" "${A_SYSTEMS:-$systems}" 60m "" -- \
            --producer-rate 50000 --producer-mode depth-target --target-depth 4000 \
            --worker-count "$w" --phase "warmup=warmup:$warmup" --phase "clean=clean:$clean"
    done
}

phase_b() {
    local scenario sys
    for sys in ${B_SYSTEMS:-${systems//,/ }}; do
        for scenario in chaos_postgres_restart chaos_pg_backend_kill chaos_pool_exhaustion; do
            cell B "${scenario}_$sys" 32 "$sys" 15m "" -- \
                --scenario "$scenario" --producer-rate 600 --replicas 1
        done
        for scenario in chaos_crash_recovery chaos_repeated_kills; do
            cell B "${scenario}_$sys" 32 "$sys" 15m "" -- \
                --scenario "$scenario" --producer-rate 300 --replicas 2
        done
    done
}

phase_c() {
    local sys mode scenario
    local idle='--phase warmup=warmup:30s --phase clean_1=clean:60s --phase idle_1=idle-in-tx:240s --phase recovery_1=clean:180s'
    local load='--phase warmup=warmup:30s --phase clean_1=clean:60s --phase pressure_1=high-load:240s --phase recovery_1=clean:120s'
    local readers='--phase warmup=warmup:30s --phase clean_1=clean:60s --phase readers_1=active-readers:240s --phase recovery_1=clean:120s'
    local burst='--phase warmup=warmup:30s --phase clean_1=clean:60s --phase pressure_1=high-load:300s --phase recovery_1=clean:240s'
    for sys in ${C_SYSTEMS:-${systems//,/ }}; do
        # awa runs depth-target in these cells upstream; the others fixed.
        mode=(--producer-mode fixed)
        [ "$sys" = awa ] && mode=(--producer-mode depth-target --target-depth 2000)
        for scenario in ${C_SCENARIOS:-idle_in_tx sustained_high_load active_readers event_burst}; do
            # shellcheck disable=SC2086
            case "$scenario" in
            idle_in_tx) cell C "${scenario}_$sys" 32 "$sys" 15m "" -- "${mode[@]}" --producer-rate 800 --worker-count 32 $idle ;;
            sustained_high_load) cell C "${scenario}_$sys" 32 "$sys" 15m "" -- "${mode[@]}" --producer-rate 800 --worker-count 32 $load ;;
            active_readers) cell C "${scenario}_$sys" 32 "$sys" 15m "" -- "${mode[@]}" --producer-rate 800 --worker-count 32 $readers ;;
            event_burst) cell C "${scenario}_$sys" 64 "$sys" 15m "" -- "${mode[@]}" --producer-rate 1200 --worker-count 64 $burst ;;
            *) die "unknown pressure scenario '$scenario'" ;;
            esac
        done
    done
}

if [ "${phases[*]}" != summary ]; then setup; fi
for p in "${phases[@]}"; do
    case "$p" in
    a) phase_a ;;
    b) phase_b ;;
    c) phase_c ;;
    setup | summary) ;;
    esac
done
# The charts need the harness's environment (matplotlib); the tables do not.
if [ -x "$harness/.venv/bin/python" ]; then
    "$harness/.venv/bin/python" "$root/bench/portable/summarize.py" "$index" --plots "$results/plots"
else
    python3 "$root/bench/portable/summarize.py" "$index"
fi
