#!/usr/bin/env bash
# Issue 11, item 1: QPS with and without --tokenizer (the project's bpe2k BPE), side by side,
# interleaved rounds, release build, embedded max-throughput stub, run from the workspace root.
# Modes: none (no tokenizer), default (--tokenizer; on 2 cores the default counts after the run),
# live1 (--tokenizer --metrics-tokenizer-workers 1: counting beside the load, for contrast).
# ROUNDS (3) and MODES ("none default live1") choose what runs; OUT where results.csv goes.
set -euo pipefail
BIN=${BIN:-target/release/llm-loadgen}
OUT=${OUT:-perf/runs/2026-12-01-vm/issue11-tokenizer}
ROUNDS=${ROUNDS:-3}
TOK=tests/assets/tokenizers/bpe2k
CSV=$OUT/results.csv
echo "round,streaming,mode,samples,qps,wall_s,user_s,sys_s,max_rss_kb,exit,complete,pending,counting,osl_count,tpot_count,tps" > "$CSV"
read -r -a modes <<< "${MODES:-none default live1}"
for r in $(seq 1 "$ROUNDS"); do
  for stream in off on; do
    if [ "$stream" = off ]; then n=200000; else n=300000; fi
    # Rotate the order each round so no mode always runs first.
    for k in "${!modes[@]}"; do
      mode=${modes[$(( (k + r - 1) % ${#modes[@]} ))]}
      case $mode in
        none) extra=() ;;
        default) extra=(--tokenizer "$TOK") ;;
        live1) extra=(--tokenizer "$TOK" --metrics-tokenizer-workers 1) ;;
      esac
      dir=$(mktemp -d /tmp/issue11-tok.XXXXXX)
      set +e
      /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$BIN" benchmark offline \
        --num-samples "$n" --streaming "$stream" --report-dir "$dir/r" "${extra[@]}" \
        > "$dir/out.txt" 2>&1
      code=$?
      set -e
      python3 - "$dir" "$r" "$stream" "$mode" "$n" "$code" >> "$CSV" <<'PY'
import json, sys
d, r, stream, mode, n, code = sys.argv[1:]
wall, user, sys_s, rss = open(f"{d}/time.txt").read().split()[-4:]
s = json.load(open(f"{d}/r/performance/result_summary.json"))
snap = json.load(open(f"{d}/r/metrics/final_snapshot.json"))
count = {m["name"]: m.get("count") for m in snap["metrics"] if m["type"] == "series"}
print(",".join(str(x) for x in [r, stream, mode, n, round(s["qps"], 1), wall, user, sys_s, rss, code,
    s["complete"], s["client_token_tasks_pending"], s.get("client_token_counting"),
    count.get("osl"), count.get("tpot_ns"), s["tps"] and round(s["tps"], 1)]))
PY
      tail -n 1 "$CSV"
      rm -rf "$dir"
    done
  done
done
