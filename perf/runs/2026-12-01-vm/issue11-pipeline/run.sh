#!/bin/bash
# The null-endpoint pipeline ceiling, before (5cd617c + null endpoint only) and after (issue 11),
# interleaved: 2,000,000-sample bursts, events on and off, three rounds. Per-thread CPU from
# /proc/<pid>/task/*/stat (10 ms ticks, last sample before exit), the same for both binaries.
# usage: run.sh BEFORE_BIN AFTER_BIN OUT_DIR
set -u
before=$1; after=$2; out=$3; mkdir -p "$out"
threads() { # label bin args...
  local label=$1; shift
  local rep=/tmp/issue11-pipeline-report
  rm -rf $rep
  "$@" --report-dir $rep > "$out/$label.log" 2>&1 &
  local pid=$!
  declare -A last
  while kill -0 $pid 2>/dev/null; do
    for t in /proc/$pid/task/*; do
      s=$(cat $t/stat 2>/dev/null) || continue
      name=$(echo "$s" | sed 's/^[0-9]* (\(.*\)) .*/\1/')
      set -- $(echo "$s" | sed 's/^.*) //')
      last["$name:$(basename $t)"]="${12} ${13}"
    done
    sleep 0.05
  done
  wait $pid
  for k in "${!last[@]}"; do echo "$k ${last[$k]}"; done | sort > "$out/$label.threads"
  cp $rep/performance/result_summary.json "$out/$label.summary.json" 2>/dev/null
  local qps=$(grep -o 'QPS: [0-9.]*' "$out/$label.log")
  echo "$label $qps $(tr '\n' ';' < "$out/$label.threads")"
}
for round in 1 2 3; do
  for ev in events noevents; do
    flag=""; [ $ev = noevents ] && flag="--no-events"
    for which in before after; do
      bin=$before; [ $which = after ] && bin=$after
      threads "r$round-$ev-$which" $bin benchmark offline --endpoints null:// --num-samples 2000000 $flag
    done
  done
done | tee "$out/summary.txt"
