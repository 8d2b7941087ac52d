#!/usr/bin/env bash
# Two builds side by side, interleaved (odd rounds BEFORE first): the 2,000,000-sample burst
# against the embedded stub (events on), once as the run keeps its rows (the default budget)
# and once with --spill-budget-mib 16 (its rows, table and series in files), and the null
# endpoint's ceiling with events on. One line per run: round, row, build, QPS, wall seconds,
# seconds after the last completion (wall less the summary's duration, so the fork and the
# connects are in it too), max RSS in MB.
#
#   BEFORE=/path/to/old/llm-loadgen AFTER=target/release/llm-loadgen perf/end_and_ceiling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SAMPLES=${SAMPLES:-2000000}
OUT=${OUT:-perf/runs/$(date +%F)-$(hostname)/end-and-ceiling}
: "${BEFORE:?give BEFORE=path of the old binary}"
AFTER=${AFTER:-target/release/llm-loadgen}
mkdir -p "$OUT"
echo "round row build qps wall_s after_last_s rss_mb" > "$OUT/rounds.txt"
one() { # round row build binary args...
  local round=$1 row=$2 build=$3 bin=$4; shift 4
  local dir; dir=$(mktemp -d /tmp/end-ceiling.XXXXXX)
  /usr/bin/time -f "%e %M" -o "$dir/time" "$bin" benchmark offline "$@" \
    --report-dir "$dir/r" --quiet > /dev/null 2>&1
  read -r wall rss < "$dir/time"
  python3 - "$dir/r/performance/result_summary.json" "$round" "$row" "$build" "$wall" "$rss" \
    >> "$OUT/rounds.txt" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
wall = float(sys.argv[5])
print(sys.argv[2], sys.argv[3], sys.argv[4], round(s["qps"]), wall,
      round(wall - s["duration_ns"] / 1e9, 2), int(sys.argv[6]) // 1024)
PY
  rm -rf "$dir"
}
for round in $(seq 1 "$ROUNDS"); do
  if (( round % 2 )); then order="before after"; else order="after before"; fi
  for build in $order; do
    bin=$BEFORE; [[ $build == after ]] && bin=$AFTER
    one "$round" burst "$build" "$bin" --num-samples "$SAMPLES"
    [[ $build == after ]] && one "$round" burst-spilled after "$bin" --num-samples "$SAMPLES" \
      --spill-budget-mib 16
    one "$round" null-events "$build" "$bin" --endpoints null:// --num-samples "$SAMPLES"
  done
done
cat "$OUT/rounds.txt"
