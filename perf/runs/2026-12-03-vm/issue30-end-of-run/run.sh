#!/usr/bin/env bash
# Issue 30, the end of a run: the 2 M burst's seconds after its last completion, before
# (02ffa51) and after, interleaved; burst and c=1,000 QPS; the null endpoint's ceiling with
# events on; max RSS of the 10 M null runs. BEFORE and AFTER are release binaries.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
HERE=perf/runs/2026-12-03-vm/issue30-end-of-run
: "${BEFORE:?}" "${AFTER:?}"
ROUNDS=${END_ROUNDS:-4} OUT=$HERE/end-and-ceiling BEFORE=$BEFORE AFTER=$AFTER perf/end_and_ceiling.sh
ROUNDS=${QPS_ROUNDS:-3} BURST_SAMPLES=2000000 OUT=$HERE/before-after BEFORE=$BEFORE AFTER=$AFTER \
  perf/before_after.sh
for events in --no-events ""; do
  d=$(mktemp -d /tmp/rss.XXXXXX)
  /usr/bin/time -f "%e s wall, %M kB max RSS" "$AFTER" benchmark offline --endpoints null:// \
    --num-samples 10000000 $events --report-dir "$d/r" --quiet > /dev/null 2> "$d/err"
  echo "null 10M ${events:-events on}: $(tail -1 "$d/err")" >> "$HERE/rss.txt"
  rm -rf "$d"
done
cat "$HERE/rss.txt"
