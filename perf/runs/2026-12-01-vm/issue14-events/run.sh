#!/bin/bash
# Issue 14 item 3 (events.jsonl in time order) and item 4 / issue 13 item 6 (chunk timing):
# 300,000-sample offline bursts on the embedded stub, streaming off and on, three binaries
# interleaved per round, then one 2,000,000-sample burst each before and after:
#   before = 3a95480 (session start), chunks = e9bab10 (chunk timing, arrival-order log),
#   after  = 476c811 (chunk timing + time-ordered log).
# Each run: QPS, wall seconds, max RSS (/usr/bin/time), and wall - Duration (an upper bound on
# the time from the last completion to exit: it also holds the fork and connects).
# usage: run.sh BIN_DIR OUT_DIR
set -u
bins=$1; out=$2; mkdir -p "$out"
one() { # label bin samples streaming
  local label=$1 bin=$2 n=$3 stream=$4 rep=/tmp/issue14-events-report
  rm -rf $rep
  /usr/bin/time -f "%e %M" -o "$out/$label.time" "$bin" benchmark offline --num-samples "$n" \
    --streaming "$stream" --report-dir $rep > "$out/$label.log" 2>&1
  local qps=$(grep -o 'QPS: [0-9.]*' "$out/$label.log" | head -1 | cut -d' ' -f2)
  local dur=$(grep -o 'Duration: [0-9.]*' "$out/$label.log" | head -1 | cut -d' ' -f2)
  read wall rss_kb < "$out/$label.time"
  local lines=$(wc -l < $rep/events.jsonl)
  echo "$label qps=$qps duration_s=$dur wall_s=$wall after_last_s=$(echo "$wall - $dur" | bc) max_rss_mib=$((rss_kb / 1024)) event_lines=$lines"
}
for round in 1 2 3 4; do
  for stream in off on; do
    for which in before chunks after; do
      one "r$round-burst300k-stream_$stream-$which" "$bins/$which" 300000 $stream
    done
  done
done | tee "$out/summary.txt"
# The 2,000,000-sample burst: resident memory and the time to the reports, before and after.
for which in before after; do
  one "burst2m-$which" "$bins/$which" 2000000 off
done | tee -a "$out/summary.txt"
