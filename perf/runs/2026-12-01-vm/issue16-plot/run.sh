#!/bin/bash
# Issue 16 item 2: what `plot DIR` costs beside `report DIR` on the same run, both replaying
# its events.jsonl: a 100,000-sample streamed burst on the embedded stub (char tokenizer, so
# both token bases exist), then report and plot interleaved, three rounds, from the
# workspace root (config.yaml names the tokenizer by a relative path). With the tokenizer
# both replays count every output; run from another folder the tokenizer is not found and
# the difference is the drawing alone (14 files: 7 pictures as SVG and PNG).
# usage: run.sh BIN (a release llm-loadgen)
set -u
bin=$1; dir=/tmp/issue16-plot-run
rm -rf $dir
"$bin" benchmark offline --dataset tests/assets/datasets/dummy_1k.jsonl,parser.prompt=text_input \
  --tokenizer tests/assets/tokenizers/char --num-samples 100000 --streaming on --report-dir $dir \
  > /dev/null 2>&1
for where in . /tmp; do
  for round in 1 2 3; do
    (cd $where && /usr/bin/time -f "report from=$where %e s %M KB" "$bin" report $dir --out $dir-report) 2>&1 >/dev/null | tail -1
    (cd $where && /usr/bin/time -f "plot   from=$where %e s %M KB" "$bin" plot $dir) 2>&1 >/dev/null | tail -1
  done
done
