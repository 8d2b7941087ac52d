#!/usr/bin/env bash
# Issue 30, item 3: the work after the run on every core, before and after, interleaved.
# Per round and binary (old, new, old, new...): (a) a 2,000,000-sample burst against the
# embedded stub with --tokenizer (bpe2k; on 2 cores the default counts after the last sample),
# its wall time less its Duration (the time after the last completion, with the start); then
# (b) `report DIR` of that run's log with the run's tokenizer, by both binaries in turn (the
# order alternating per round), checking the rebuilt files are byte-identical; and (c) the
# same without the tokenizer (run from /tmp, where the log's relative tokenizer path is not
# found: the rebuild leaves the client basis out, saying so), to see the reading alone.
# OLD, NEW: the binaries; ROUNDS (2); OUT: where results.csv goes. Run from the workspace root.
set -euo pipefail
OLD=${OLD:-/tmp/llm-loadgen-before}
NEW=${NEW:-target/release/llm-loadgen}
ROUNDS=${ROUNDS:-2}
N=${N:-2000000}
OUT=${OUT:-perf/runs/2026-12-02-vm/issue30-after-run-cores}
TOK=tests/assets/tokenizers/bpe2k
CSV=$OUT/results.csv
echo "round,step,binary,log_of,samples,wall_s,user_s,sys_s,max_rss_kb,duration_s,after_last_s,pending,identical,load1" > "$CSV"
root=$PWD
load1() { cut -d' ' -f1 /proc/loadavg; }
work=$(mktemp -d /tmp/issue30-cores.XXXXXX)
trap 'rm -rf "$work"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for which in old new; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    dir=$work/run-$which
    rm -rf "$dir"
    /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" "$bin" benchmark offline \
      --num-samples "$N" --report-dir "$dir" --tokenizer "$TOK" -v > "$work/run-$which.out" 2>&1
    python3 - "$work/time.txt" "$dir" "$r" "$which" "$N" >> "$CSV" <<'PY'
import json, sys
t, d, r, which, n = sys.argv[1:]
wall, user, sys_s, rss = open(t).read().split()[-4:]
s = json.load(open(f"{d}/performance/result_summary.json"))
dur = s["duration_ns"] / 1e9
print(",".join(str(x) for x in [r, "run", which, "", n, wall, user, sys_s, rss, round(dur, 3),
    round(float(wall) - dur, 3), s["client_token_tasks_pending"], "", open("/proc/loadavg").read().split()[0]]))
PY
    tail -n 1 "$CSV"
  done
  # (b): each binary rebuilds the new run's log; the order alternates per round.
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for step in report report-no-tokenizer; do
    cwd=$root; [ "$step" = report-no-tokenizer ] && cwd=/tmp
    rm -rf "$work"/rb-*
    for which in $order; do
      bin=$OLD; [ "$which" = new ] && bin=$NEW
      case $bin in /*) ;; *) bin=$root/$bin ;; esac
      (cd "$cwd" && /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" "$bin" report \
        "$work/run-new" --out "$work/rb-$which" > "$work/rb-$which.out" 2>&1)
      read -r wall user sys_s rss < <(tail -n 1 "$work/time.txt")
      same=""
      if [ -d "$work/rb-old" ] && [ -d "$work/rb-new" ]; then
        same=yes
        for f in performance/result_summary.json metrics/final_snapshot.json report.txt; do
          cmp -s "$work/rb-old/$f" "$work/rb-new/$f" || same=no
        done
      fi
      echo "$r,$step,$which,new,$N,$wall,$user,$sys_s,$rss,,,,$same,$(load1)" >> "$CSV"
      tail -n 1 "$CSV"
    done
  done
  rm -rf "$work"/run-* "$work"/rb-*
done
