#!/usr/bin/env bash
# The GPU check: one script of at most 10 minutes on one GPU. Each part runs under its own `timeout` and a
# failed part never stops the next; everything goes to $OUT (default results/gpu_check): gpu_check.log,
# gpu_train.jsonl, m30k/.
#
#   A. benchmarks/gpu_train.py (GPU_TRAIN_BUDGET_S, default 250 s of starting new variants; killed at +60 s):
#      every model of config/wmt14_en_{fr,de}.yaml at its paper size and batch, in default_plan's order:
#      RNNsearch-50 and Transformer-base (En-De) first, baseline (bf16 eager; the Transformer's attention
#      before SDPA) then the new paths (graphed steps, chunked loss, compiled), then every model in bf16
#      eager (does it fit one GPU, how fast), the others' graphed steps and chunked loss, then fp32.
#   B. Multi30k En-De end to end on the GPU (config/overlays/multi30k_gpu.yaml; M30K_TIMEOUT_S, default 300 s):
#      wall time, each job's time, BLEU of every model beside the CPU run's intervals (docs/measurements.md).
#      The data come from a folder holding the six published .gz files (nothing is downloaded), named by
#      M30K_MIRROR or the script's first argument; without one, part B says so and is skipped. A folder
#      under results/ (git-ignored) can be copied to the GPU machine with the checkout.
#   legacy: the 2026-12-04 check (config/test.yaml on CUDA and CPU, bf16 steps, search parity, gpu_mfu.py).
#
#     bash benchmarks/gpu_check.sh path/to/multi30k   # PARTS="train m30k"
#     PARTS=m30k M30K_TIMEOUT_S=540 M30K_MIRROR=path/to/multi30k bash benchmarks/gpu_check.sh
#     GPU_TRAIN_ARGS="--device cpu --tiny" M30K_SNAKEMAKE_ARGS=-n bash benchmarks/gpu_check.sh  # the plumbing, on a CPU
#
# A machine whose Python lacks Snakemake and sacremoses (needed here too: configs are validated through
# snakemake.utils): put their wheels in .whl/, copied with the checkout; they are installed to /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu_check}
PARTS=${PARTS:-train m30k}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
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

echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), parts: $PARTS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
nproc

part() { [[ " $PARTS " == *" $1 "* ]]; }

if part train; then
  echo "== A. every model at paper size: benchmarks/gpu_train.py ($(date -u +%T))"
  budget=${GPU_TRAIN_BUDGET_S:-250}
  # shellcheck disable=SC2086  # GPU_TRAIN_ARGS: several arguments
  timeout $((budget + 60)) "$PY" benchmarks/gpu_train.py --warmup 2 --steps 3 --repeats 2 --budget-s "$budget" \
    --out "$OUT/gpu_train.jsonl" ${GPU_TRAIN_ARGS:-} || echo "FAILED or cut: gpu_train.py (exit $?)"
fi

if part m30k; then
  echo "== B. Multi30k En-De end to end on the GPU ($(date -u +%T))"
  mirror=${M30K_MIRROR:-${1:-}}
  if [ -z "$mirror" ] || [ ! -f "$mirror/train.en.gz" ]; then
    echo "FAILED: no Multi30k mirror: name a folder holding train.en.gz etc. (M30K_MIRROR or the first argument)"
  else
    work=$(mktemp -d)
    printf 'data:\n  wmt:\n    mirror: %s\n' "$(realpath "$mirror")" >"$work/mirror.yaml"
    echo "the CPU run (docs/measurements.md, 2026-12-05), test BLEU [95 % CI]: rnnencdec 20.28 [19.09, 21.45]," \
      "rnnsearch 31.19 [29.82, 32.79], seq2seq (2 x 384) 19.79 [18.69, 20.98], transformer 35.05 [33.34, 36.70]"
    start=$(date +%s)
    # shellcheck disable=SC2086  # M30K_SNAKEMAKE_ARGS: several arguments
    timeout "${M30K_TIMEOUT_S:-300}" snakemake --cores "$(nproc)" -d "$work/run" -q ${M30K_SNAKEMAKE_ARGS:-} \
      --configfile config/multi30k_en_de.yaml config/overlays/multi30k_gpu.yaml "$work/mirror.yaml" \
      || echo "FAILED or cut: Multi30k on the GPU (exit $?)"
    echo "Multi30k on the GPU: $(( $(date +%s) - start )) s from the mirror to the last job"
    results=$work/run/results/multi30k_en_de_gpu
    mkdir -p "$OUT/m30k"
    for tsv in "$results"/benchmarks/*.tsv; do
      [ -f "$tsv" ] && echo "  $(basename "$tsv" .tsv): $(tail -1 "$tsv" | cut -f1,3)"  # seconds, max RSS (MB)
    done
    for model in rnnencdec rnnsearch seq2seq transformer; do
      [ -d "$results/$model" ] || continue
      mkdir -p "$OUT/m30k/$model"
      cp "$results/$model"/{bleu.json,train_log.csv,bleu_by_length.csv} "$OUT/m30k/$model/" 2>/dev/null
      "$PY" -c "import json,sys; b=json.load(open(sys.argv[1])); print('  ', sys.argv[2], 'BLEU', b['bleu'], b.get('bleu_ci'))" \
        "$results/$model/bleu.json" "$model" 2>/dev/null || echo "   $model: no BLEU"
      grep -m1 -o 'on cuda[:0-9]*' "$results/logs/train_$model.log" 2>/dev/null | sed "s/^/   $model trained /"
    done
    cp -r "$results/tables" "$results/logs" "$results/benchmarks" "$OUT/m30k/" 2>/dev/null
  fi
fi

if part legacy; then
  echo "== legacy: config/test.yaml on the GPU and the CPU, bf16 steps, search parity, gpu_mfu.py"
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
    timeout 240 snakemake --cores 4 --scheduler greedy --configfile "$work/$device.yaml" -d "$work/run" -q \
      || echo "FAILED: snakemake on $device (exit $?)"
    for bleu in "$work"/run/results/gpu_check_"$device"/*/bleu.json; do
      "$PY" -c "import json,sys; b=json.load(open(sys.argv[1])); print('  ', b['model'], 'BLEU', b['bleu'])" "$bleu"
    done
  done
  timeout 60 "$PY" benchmarks/gpu_bf16_steps.py || echo "FAILED: bf16 training steps (exit $?)"
  timeout 150 "$PY" benchmarks/gpu_search.py --sentences 256 || echo "FAILED or cut: gpu_search.py (exit $?)"
  timeout 150 "$PY" benchmarks/gpu_mfu.py --steps 10 --repeats 2 --out "$OUT/gpu_mfu.jsonl" || echo "FAILED: gpu_mfu.py"
fi
echo "== done $(date -u +%FT%TZ)"
