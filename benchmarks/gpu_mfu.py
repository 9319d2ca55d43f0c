"""Transformer-base training-step throughput in bf16 and its model FLOP utilisation, on one GPU.

    python benchmarks/gpu_mfu.py                       # CUDA, Transformer base, eager and compiled
    python benchmarks/gpu_mfu.py --device cpu --tiny   # a seconds-long check of the script itself

The model is ours (attnrepro.models.transformer, Vaswani et al. 2017 base: 6 + 6 post-norm
layers, d_model 512, d_ff 2048, 8 heads, dropout 0.1, one shared 37 000-token vocabulary), the
step is attnrepro.training.loop's (label-smoothed cross-entropy, Adam (0.9, 0.98, 1e-9), clip-free,
as Vaswani §5.3), under `torch.autocast(dtype=torch.bfloat16)`. Batches are random tokens of
fixed length (the step's cost does not depend on the values), `--sentences` x `--length` on
each side. MFU = 6 x parameters x target tokens/s / the GPU's peak dense bf16 FLOP/s
(Kaplan et al. 2020's 6N FLOPs per token for forward + backward).

Prints one JSON line per variant and appends them to results/benchmarks/gpu_mfu.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from attnrepro.config import TrainConfig
from attnrepro.models import build_model, count_parameters
from attnrepro.training.loop import loss_fn, make_optimizer

ROOT = Path(__file__).resolve().parent.parent
BASE = {"d_model": 512, "d_ff": 2048, "heads": 8, "layers": 6, "dropout": 0.1, "share_embeddings": True}
TINY = {"d_model": 32, "d_ff": 64, "heads": 4, "layers": 2, "dropout": 0.1, "share_embeddings": True}
PEAK_BF16_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.05, "A10": 125.0}  # dense


def peak_tflops(device: torch.device, given: float | None) -> float | None:
    if given is not None:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tflops for key, tflops in PEAK_BF16_TFLOPS.items() if key in name), None)


def measure(args: argparse.Namespace, compiled: bool) -> dict:
    device = torch.device(args.device)
    vocab = 1000 if args.tiny else 37000
    torch.manual_seed(0)
    model = build_model("transformer", vocab, vocab, TINY if args.tiny else BASE).to(device)
    n_params = count_parameters(model)
    tc = TrainConfig(optimizer="adam", lr=1e-4, betas=(0.9, 0.98), eps=1e-9, label_smoothing=0.1)
    optimizer = make_optimizer(model.parameters(), tc)
    forward = torch.compile(model) if compiled else model
    src = torch.randint(4, vocab, (args.sentences, args.length), device=device)
    tgt = torch.randint(4, vocab, (args.sentences, args.length + 1), device=device)
    src_mask = torch.ones_like(src, dtype=torch.bool)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    model.train()

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = forward(src, src_mask, tgt_in)
        loss = loss_fn(logits.float(), tgt_out, tc.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    sync()
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        seconds.append((time.perf_counter() - start) / args.steps)
    tokens_per_s = args.sentences * args.length / statistics.median(seconds)
    peak = peak_tflops(device, args.peak_tflops)
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "model": "transformer-tiny" if args.tiny else "transformer-base",
        "params": n_params,
        "compiled": compiled,
        "tgt_tokens_per_step": args.sentences * args.length,
        "step_s_median": statistics.median(seconds),
        "tgt_tokens_per_s": round(tokens_per_s, 1),
        "model_tflops": round(6 * n_params * tokens_per_s / 1e12, 2),
        "peak_bf16_tflops": peak,
        "mfu": None if peak is None else round(6 * n_params * tokens_per_s / (peak * 1e12), 4),
        "peak_memory_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer d_model 32 model: checks the script on a CPU")
    ap.add_argument("--sentences", type=int, default=128)
    ap.add_argument("--length", type=int, default=128, help="tokens per sentence on each side")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", nargs="+", choices=["eager", "compiled"], default=["eager", "compiled"])
    ap.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, if not in PEAK_BF16_TFLOPS")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "gpu_mfu.jsonl")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:
        try:
            result = measure(args, compiled=variant == "compiled")
        except Exception as err:  # a failed torch.compile must not lose the eager number
            result = {"compiled": variant == "compiled", "error": f"{type(err).__name__}: {err}"[:500]}
        print(json.dumps(result), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
