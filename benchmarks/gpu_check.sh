#!/usr/bin/env bash
# The GPU check, one script of about 5 minutes on one GPU:
#   1. config/test.yaml (300 updates a model) end to end through Snakemake with train.device: cuda and
#      search.device: cuda (one model in bf16), then the same DAG on the CPU: both BLEU scores, and which device each
#      job trained and searched on (from its log);
#   1b. benchmarks/gpu_bf16_steps.py: one bf16 training step of every architecture;
#   2. benchmarks/gpu_search.py: the search on the GPU gives the CPU's hypotheses (every architecture),
#      validation BLEU on the GPU, paper-size sentences/s by sentence and by token batches;
#   3. benchmarks/gpu_mfu.py: Transformer-base bf16 training throughput and MFU, eager and compiled.
# Everything it prints goes to $OUT/gpu_check.log ($OUT: where the lent machine collects results;
# default results/gpu_check). On a machine whose Python lacks Snakemake or sacremoses, put their
# wheels in .whl/ (benchmarks/README or docs/measurements.md say how): they are installed to /tmp/site.
#
#     bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu_check}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
export PYTHONUNBUFFERED=1
PY=$(command -v python3 || command -v python)

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then  # what the machine's image lacks (no registry there)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
if ! command -v attnrepro >/dev/null; then  # the rules call the console script: a stand-in where not installed
  mkdir -p /tmp/attnrepro-bin
  printf '#!/bin/sh\nexec %s -m attnrepro.cli "$@"\n' "$PY" >/tmp/attnrepro-bin/attnrepro
  chmod +x /tmp/attnrepro-bin/attnrepro
  export PATH=/tmp/attnrepro-bin:$PATH
fi

echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

echo "== 1. config/test.yaml through Snakemake, on the GPU and on the CPU"
work=$(mktemp -d)
for device in cuda cpu; do
  "$PY" - "$device" "$work/$device.yaml" <<'EOF'
import sys, yaml
device, out = sys.argv[1], sys.argv[2]
raw = yaml.safe_load(open("config/test.yaml"))
raw["dataset"] = f"gpu_check_{device}"
for i, m in enumerate(raw["models"].values()):
    m["train"] = {**m["train"], "device": device, "max_steps": 300, "valid_every": 100, "checkpoint_every": 100}
    if device == "cuda" and i == 1:
        m["train"]["precision"] = "bf16"  # one model trained and searched under bf16 autocast
raw["search"] = {**raw.get("search", {}), "device": device}
yaml.safe_dump(raw, open(out, "w"))
EOF
  start=$(date +%s)
  timeout 240 snakemake --cores 4 --scheduler greedy --configfile "$work/$device.yaml" -d "$work/run" -q \
    || echo "FAILED: snakemake on $device (exit $?)"
  echo "$device: DAG in $(( $(date +%s) - start )) s"
  for log in "$work"/run/results/gpu_check_"$device"/logs/{train,translate}_*.log; do
    [ -f "$log" ] && echo "  $(basename "$log"): $(grep -m1 -o ' on [a-z]*[:0-9]*\|([a-z]*[:0-9]*)$' "$log" | head -1)"
  done
  for bleu in "$work"/run/results/gpu_check_"$device"/*/bleu.json; do
    "$PY" -c "import json,sys; b=json.load(open(sys.argv[1])); print('  ', b['model'], 'BLEU', b['bleu'], b.get('bleu_ci'))" "$bleu"
  done
done

echo "== 1b. a bf16 training step of every architecture (benchmarks/gpu_bf16_steps.py)"
timeout 60 "$PY" benchmarks/gpu_bf16_steps.py || echo "FAILED: bf16 training steps (exit $?)"

echo "== 2. beam search on the GPU (benchmarks/gpu_search.py)"
timeout 150 "$PY" benchmarks/gpu_search.py --sentences 256 || echo "FAILED or cut: gpu_search.py (exit $?)"

echo "== 3. Transformer-base training throughput and MFU (benchmarks/gpu_mfu.py)"
timeout 150 "$PY" benchmarks/gpu_mfu.py --steps 10 --repeats 2 --out "$OUT/gpu_mfu.jsonl" || echo "FAILED or cut: gpu_mfu.py (exit $?)"
echo "== done $(date -u +%FT%TZ)"
