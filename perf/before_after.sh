#!/usr/bin/env bash
# Two builds of llm-loadgen side by side: the burst row and the c=1,000 row against the
# embedded stub, interleaved ABBA (odd rounds run BEFORE first, even rounds AFTER first) so a
# machine that drifts during the rounds moves both alike. Writes one line per run (round, row,
# build, QPS, wall seconds of the whole command, max RSS in MB) and, per row, each build's
# median and range and the after/before ratio of the medians, to $OUT.
#
#   BEFORE=/path/to/old/llm-loadgen AFTER=target/release/llm-loadgen perf/before_after.sh
#   ROUNDS=6 BURST_SAMPLES=2000000 C1000_MS=8000 BEFORE=... AFTER=... perf/before_after.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-4}
BURST_SAMPLES=${BURST_SAMPLES:-1000000}
C1000_MS=${C1000_MS:-8000}
OUT=${OUT:-perf/runs/$(date +%F)-$(hostname)/before-after}
: "${BEFORE:?give BEFORE=path of the old binary}"
AFTER=${AFTER:-target/release/llm-loadgen}

mkdir -p "$OUT"
{
  echo "perf/before_after.sh ROUNDS=$ROUNDS BURST_SAMPLES=$BURST_SAMPLES C1000_MS=$C1000_MS"
  echo "before: $BEFORE ($("$BEFORE" --version 2>/dev/null | head -1))"
  echo "after: $AFTER ($("$AFTER" --version 2>/dev/null | head -1)), revision" \
       "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!perf/runs' || echo ' (dirty)')"
  echo "burst: BIN benchmark offline --num-samples $BURST_SAMPLES --quiet"
  echo "c1000: BIN benchmark online --load-pattern concurrency --concurrency 1000" \
       "--duration ${C1000_MS}ms --runtime.max-duration-ms $((C1000_MS + 2000))" \
       "--num-samples 10000000 --quiet"
} > "$OUT/command.txt"
lscpu > "$OUT/cpu.txt" 2>/dev/null || cat /proc/cpuinfo > "$OUT/cpu.txt"
uname -a > "$OUT/uname.txt"
echo "round row build qps wall_s rss_mb" > "$OUT/rounds.txt"

row_args() {
  case "$1" in
    burst) echo "benchmark offline --num-samples $BURST_SAMPLES --quiet" ;;
    c1000) echo "benchmark online --load-pattern concurrency --concurrency 1000" \
                "--duration ${C1000_MS}ms --runtime.max-duration-ms $((C1000_MS + 2000))" \
                "--num-samples 10000000 --quiet" ;;
  esac
}

one_run() {
  local round=$1 row=$2 build=$3 bin dir
  bin=$BEFORE
  [ "$build" = after ] && bin=$AFTER
  dir=$(mktemp -d /tmp/before-after-XXXXXX)
  # shellcheck disable=SC2046
  /usr/bin/time -f "%e %M" -o "$dir/time" "$bin" $(row_args "$row") \
    --report-dir "$dir/report" > "$dir/stdout" 2> "$dir/stderr"
  local qps wall rss
  qps=$(python3 -c "import json,sys; print('%.0f' % json.load(open(sys.argv[1]))['qps'])" \
    "$dir/report/performance/result_summary.json")
  read -r wall rss < "$dir/time"
  echo "$round $row $build $qps $wall $((rss / 1024))" | tee -a "$OUT/rounds.txt"
  rm -rf "$dir"
}

for round in $(seq 1 "$ROUNDS"); do
  for row in burst c1000; do
    if (( round % 2 )); then order="before after"; else order="after before"; fi
    for build in $order; do one_run "$round" "$row" "$build"; done
  done
done

python3 - "$OUT/rounds.txt" > "$OUT/summary.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
for row in ("burst", "c1000"):
    med = {}
    for build in ("before", "after"):
        qps = [float(r[3]) for r in rows if r[1] == row and r[2] == build]
        wall = [float(r[4]) for r in rows if r[1] == row and r[2] == build]
        rss = [int(r[5]) for r in rows if r[1] == row and r[2] == build]
        med[build] = statistics.median(qps)
        print(f"{row} {build}: QPS median {med[build]:.0f} (range {min(qps):.0f}-{max(qps):.0f}),"
              f" wall median {statistics.median(wall):.2f} s, max RSS {max(rss)} MB")
    print(f"{row}: after/before QPS ratio {med['after'] / med['before']:.3f}")
EOF
cat "$OUT/summary.txt"
