#!/usr/bin/env bash
# TLS cost on the roofline: each burst and c=1,000 row runs against the plain stub, then at
# once against a TLS stub (--roofline-tls), streaming and not; PASSES passes for the spread.
# Release build first: cargo build --release -p llm-loadgen -p loadgen-perf
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
passes=${PASSES:-3}
for i in $(seq 1 "$passes"); do
  "$root/target/release/loadgen-perf" roofline --rows burst,c1000 --scale 0.3 --no-ceiling \
    --roofline-tls --out "$here/pass$i" > "$here/pass$i.txt" 2> "$here/pass$i.log"
  cp "$here/pass$i/table.txt" "$here/table$i.txt"
  cp "$here/pass$i/roofline.json" "$here/roofline$i.json"
  rm -rf "$here/pass$i"
done
