#!/bin/sh
# Regenerates the committed PyTorch profiler traces (tests/data/torch_runs/<run>/rank{r}_trace.json.gz)
# from real torch.distributed.pipelining runs on the CPU (gloo), one torchrun per schedule.
# Needs torch (PYTHON, default: python3); CI reads the committed files and needs no torch.
# usage: make_traces.sh [OUTPUT_FOLDER]   (default: this script's folder)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
python=${PYTHON:-python3}
torchrun="$python -m torch.distributed.run --standalone"

# run name, schedule, P, M
runs="gpipe-p2-m4 gpipe 2 4
gpipe-p4-m4 gpipe 4 4
1f1b-p2-m4 1f1b 2 4
interleaved-1f1b-p2-m4 interleaved-1f1b 2 4
interleaved-1f1b-p4-m4 interleaved-1f1b 4 4
looped-bfs-p2-m4 looped-bfs 2 4
interleaved-zb-p2-m4 interleaved-zb 2 4
zb-v-p2-m4 zb-v 2 4
dualpipev-p2-m4 dualpipev 2 4
dualpipev-p4-m8 dualpipev 4 8
no-pipeline none 1 4"

echo "$runs" | while read -r name schedule pp microbatches; do
  dir="$out/$name"
  rm -rf "$dir"
  echo "== $name" >&2
  OMP_NUM_THREADS=1 $torchrun --nproc-per-node "$pp" "$here/make_traces.py" \
    --schedule "$schedule" --microbatches "$microbatches" --steps 2 --out "$dir" >/dev/null
  gzip -9n "$dir"/rank*_trace.json
done
