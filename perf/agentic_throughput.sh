#!/usr/bin/env bash
# Turn throughput of an agentic run against single-turn QPS at the same concurrency, side by
# side (issue 27): ROUNDS interleaved pairs, each an agentic run of CONVERSATIONS conversations
# of TURNS client turns, TARGET conversations in flight, and a closed-loop run of the same
# number of single-turn samples at concurrency TARGET; both on 1 worker against the embedded
# max-throughput stub, so the client is what is measured. Prints each pair's rates and their
# ratio (turns/s ÷ samples/s). Usage: perf/agentic_throughput.sh [BINARY] [OUT_DIR]
set -euo pipefail
BIN=${1:-target/release/llm-loadgen}
OUT=${2:-$(mktemp -d)}
CONVERSATIONS=${CONVERSATIONS:-20000}
TURNS=${TURNS:-10}
TARGET=${TARGET:-1000}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
python3 - "$OUT" "$CONVERSATIONS" "$TURNS" <<'PY'
import json, sys
out, n, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(f"{out}/conversations.jsonl", "w") as f, open(f"{out}/single.jsonl", "w") as g:
    for c in range(n):
        for t in range(1, 2 * turns):
            role = "user" if t % 2 else "assistant"
            text = f"{role} message {t} of conversation {c}"
            row = {"conversation_id": f"conv{c}", "turn": t, "role": role, "content": text}
            if t == 1:
                row["system"] = "You are a test agent."
            f.write(json.dumps(row) + "\n")
            if role == "user":
                g.write(json.dumps({"prompt": text}) + "\n")
PY
SAMPLES=$((CONVERSATIONS * TURNS))
cat > "$OUT/agentic.yaml" <<YAML
type: online
model_params: {name: test-model, streaming: "on", max_new_tokens: 16}
datasets:
  - name: agentic
    path: $OUT/conversations.jsonl
    agentic_inference: {num_trajectories_to_issue: $CONVERSATIONS}
settings:
  warmup: {enabled: false}
  runtime: {min_duration_ms: 0}
  client: {num_workers: 1}
  load_pattern: {type: agentic_inference, target_concurrency: $TARGET}
report_dir: $OUT/agentic
YAML
rate() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(s['qps'])" "$1/performance/result_summary.json"; }
for round in $(seq 1 "$ROUNDS"); do
  rm -rf "$OUT/agentic" "$OUT/single"
  "$BIN" benchmark from-config --config "$OUT/agentic.yaml" --quiet > "$OUT/agentic-$round.txt" 2>&1
  "$BIN" benchmark online --load-pattern concurrency --concurrency "$TARGET" --workers 1 \
    --model test-model --streaming on --max-output-tokens 16 --no-warmup \
    --dataset "$OUT/single.jsonl" --num-samples "$SAMPLES" --duration 0 \
    --report-dir "$OUT/single" --quiet > "$OUT/single-$round.txt" 2>&1
  turns=$(rate "$OUT/agentic"); single=$(rate "$OUT/single")
  python3 -c "import sys; t,s=map(float,sys.argv[1:]); print(f'round $round: agentic {t:,.0f} turns/s, single-turn {s:,.0f} samples/s, ratio {t/s:.3f}')" "$turns" "$single"
done
