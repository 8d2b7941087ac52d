#!/usr/bin/env bash
# The live view's cost, measured: the release binary with the view drawn (default) and off
# (--quiet), side by side and interleaved (ABBA: odd rounds draw first, even rounds quiet
# first), at the burst row and the c=1,000 row, each run under a real pty (`script`, 120x40)
# so the terminal view is really drawn. Writes one line per run (round, row, mode, QPS, the
# frames drawn) and the spread per row and mode to $OUT.
#
#   perf/live_view.sh                      # 4 rounds, 1,000,000-sample burst, 8 s c=1,000
#   ROUNDS=6 BURST_SAMPLES=2000000 perf/live_view.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-4}
BURST_SAMPLES=${BURST_SAMPLES:-1000000}
C1000_MS=${C1000_MS:-8000}
OUT=${OUT:-perf/runs/$(date +%F)-$(hostname)/live-view}
BIN=${BIN:-target/release/llm-loadgen}

if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release --bin llm-loadgen
fi
command -v script >/dev/null || { echo "live_view.sh needs script(1) (util-linux)" >&2; exit 2; }
mkdir -p "$OUT"
{
  echo "perf/live_view.sh ROUNDS=$ROUNDS BURST_SAMPLES=$BURST_SAMPLES C1000_MS=$C1000_MS"
  echo "revision: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!perf/runs' || echo ' (dirty)')"
  echo "burst: $BIN benchmark offline --num-samples $BURST_SAMPLES [--quiet]"
  echo "c1000: $BIN benchmark online --load-pattern concurrency --concurrency 1000" \
       "--duration ${C1000_MS}ms --runtime.max-duration-ms $((C1000_MS + 2000))" \
       "--num-samples 10000000 [--quiet]"
  echo "each under: script -qfec 'stty cols 120 rows 40; exec <command>' (embedded stub)"
} > "$OUT/command.txt"
lscpu > "$OUT/cpu.txt" 2>/dev/null || cat /proc/cpuinfo > "$OUT/cpu.txt"
uname -a > "$OUT/uname.txt"
echo "round row mode qps frames" > "$OUT/rounds.txt"

row_args() {
  case "$1" in
    burst) echo "benchmark offline --num-samples $BURST_SAMPLES" ;;
    c1000) echo "benchmark online --load-pattern concurrency --concurrency 1000" \
                "--duration ${C1000_MS}ms --runtime.max-duration-ms $((C1000_MS + 2000))" \
                "--num-samples 10000000" ;;
  esac
}

one_run() {
  local round=$1 row=$2 mode=$3 dir quiet=""
  dir=$(mktemp -d /tmp/live-view-XXXXXX)
  [ "$mode" = off ] && quiet="--quiet"
  # stdout (the console summary) to a file; stderr stays on the pty, where the view draws.
  script -qfec "stty cols 120 rows 40; exec $BIN $(row_args "$row") --report-dir $dir/report \
    $quiet > $dir/stdout" /dev/null > "$dir/pty.txt"
  local qps frames
  qps=$(python3 -c "import json,sys; print('%.0f' % json.load(open(sys.argv[1]))['qps'])" \
    "$dir/report/performance/result_summary.json")
  frames=$({ grep -o 'QPS now' "$dir/pty.txt" || true; } | wc -l)
  echo "$round $row $mode $qps $frames" | tee -a "$OUT/rounds.txt"
  rm -rf "$dir"
}

for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then modes="on off"; else modes="off on"; fi
  for row in burst c1000; do
    for mode in $modes; do
      one_run "$round" "$row" "$mode"
    done
  done
done

python3 - "$OUT/rounds.txt" > "$OUT/summary.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
for row in ("burst", "c1000"):
    by = {m: [float(r[3]) for r in rows if r[1] == row and r[2] == m] for m in ("on", "off")}
    for m in ("on", "off"):
        v = by[m]
        print(f"{row} view {m:3}: mean {statistics.mean(v):8.0f} QPS  min {min(v):8.0f}"
              f"  max {max(v):8.0f}  spread {100 * (max(v) - min(v)) / statistics.mean(v):4.1f}%"
              f"  ({len(v)} runs)")
    paired = [a / b for a, b in zip(by["on"], by["off"])]
    print(f"{row} on/off: ratio of means {statistics.mean(by['on']) / statistics.mean(by['off']):.3f},"
          f" per round {', '.join(f'{p:.3f}' for p in paired)}")
EOF
cat "$OUT/summary.txt"
