#!/usr/bin/env bash
# The two waits of an agentic run, from its own events.jsonl: between a turn's completion and
# the next turn of its conversation (the worker chains them, no coordinator in between), and
# between a conversation's end and the start of the next one on the freed place (a round trip
# through the aggregator and the scheduler). Against the embedded max-throughput stub, so the
# server adds nearly nothing. Usage: perf/agentic_gaps.sh [BINARY] [OUT_DIR]
set -euo pipefail
BIN=${1:-target/release/llm-loadgen}
OUT=${2:-$(mktemp -d)}
CONVERSATIONS=${CONVERSATIONS:-400}
TURNS=${TURNS:-10}
CONCURRENCY=${CONCURRENCY:-16}
mkdir -p "$OUT"
python3 - "$OUT/conversations.jsonl" "$CONVERSATIONS" "$TURNS" <<'PY'
import json, sys
path, n, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f:
    for c in range(n):
        for t in range(1, 2 * turns):
            role = "user" if t % 2 else "assistant"
            row = {"conversation_id": f"conv{c}", "turn": t, "role": role,
                   "content": f"{role} message {t} of conversation {c}"}
            if t == 1:
                row["system"] = "You are a test agent."
            f.write(json.dumps(row) + "\n")
PY
cat > "$OUT/agentic.yaml" <<YAML
type: online
model_params: {name: test-model, streaming: "on", max_new_tokens: 16}
datasets:
  - name: agentic
    path: $OUT/conversations.jsonl
    agentic_inference: {num_trajectories_to_issue: $CONVERSATIONS}
settings:
  warmup: {enabled: false}
  load_pattern: {type: agentic_inference, target_concurrency: $CONCURRENCY}
report_dir: $OUT/run
YAML
rm -rf "$OUT/run"
"$BIN" benchmark from-config --config "$OUT/agentic.yaml" --quiet > "$OUT/stdout.txt" 2>&1
python3 - "$OUT/run/events.jsonl" <<'PY'
import json, sys
from collections import defaultdict
samples = defaultdict(dict)
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["sample_uuid"] and e["event_type"] in ("sample.issued", "sample.complete"):
        s = samples[e["sample_uuid"]]
        s["conv"], s["turn"] = e["conversation_id"], e["turn"]
        s[e["event_type"]] = e["timestamp_ns"]
convs = defaultdict(list)
for s in samples.values():
    convs[s["conv"]].append(s)
turn_gaps, spans = [], []
for turns in convs.values():
    turns.sort(key=lambda s: s["turn"])
    for a, b in zip(turns, turns[1:]):
        turn_gaps.append(b["sample.issued"] - a["sample.complete"])
    spans.append((turns[0]["sample.issued"], turns[-1]["sample.complete"]))
starts = sorted(s for s, _ in spans)
ends = sorted(e for _, e in spans)
# Each start after the first wave takes the place the latest end before it freed.
handoffs, j = [], 0
for start in starts:
    while j < len(ends) and ends[j] <= start:
        j += 1
    if j > 0 and start > starts[0]:
        handoffs.append(start - ends[j - 1])
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] / 1000 if xs else float("nan")
for name, xs in (("turn -> next turn (worker)", turn_gaps), ("conversation end -> next start (coordinator)", handoffs)):
    print(f"{name}: n={len(xs)} p50={pct(xs, .5):.1f} us p90={pct(xs, .9):.1f} us p99={pct(xs, .99):.1f} us")
PY
