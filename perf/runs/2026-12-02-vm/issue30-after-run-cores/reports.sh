#!/usr/bin/env bash
# Extra rounds of (b) alone: report DIR of one 2M log with the tokenizer, old and new alternating.
# Usage: reports.sh RUN_DIR CSV (from the workspace root; OLD, NEW: the binaries).
set -euo pipefail
LOG=$1; CSV=$2; ROUNDS=${ROUNDS:-4}
OLD=${OLD:-/tmp/llm-loadgen-before}; NEW=${NEW:-/tmp/llm-loadgen-after}
tmp=$(mktemp -d /tmp/issue30-reports.XXXXXX); trap 'rm -rf "$tmp"' EXIT
echo "round,binary,wall_s,user_s,sys_s,max_rss_kb,load1" > "$CSV"
for r in $(seq 1 "$ROUNDS"); do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for which in $order; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    rm -rf "$tmp/x-$which"
    l=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/x.time" "$bin" report "$LOG" --out "$tmp/x-$which" > /dev/null 2>&1
    echo "$r,$which,$(tr ' ' , < "$tmp/x.time"),$l" >> "$CSV"
  done
done
