"""Where a CPU training update's time goes: every model of a config, one thread, against the core's own peak.

    python benchmarks/cpu_profile.py                                  # config/config.yaml, every model
    python benchmarks/cpu_profile.py --models rnnsearch50 transformer --updates 20
    python benchmarks/cpu_profile.py --tiny --updates 2               # seconds: checks the script

For each model (built at its config's size, its update as `benchmarks/gpu_train.py` builds it: the config's
batch tokens, optimizer, clipping and loss, random tokens of `min(max_src_len / 2, 27)` words a side, the
config's `train.step_compile`): the matmul FLOPs of one update (torch.utils.flop_counter), the median update
time, and their ratio against the **peak of the same core** (a one-thread fp32 matmul of 1024 x 1024 x 1024,
the best of five, measured in the same run: the utilisation of this machine, whatever it is); then one
torch.profiler pass over `--updates` updates, each op's self time put in a class:

- `matmul`: mm, addmm, bmm, baddbmm, linear, matmul (the FLOPs counted above);
- `attention (SDPA)`: the Transformer's fused scaled dot-product attention (its FLOPs counted too);
- `elementwise`: the gates and activations of the cells, additions, products, dropout's masks;
- `recurrence (oneDNN)`: the LSTM's fused kernel (seq2seq; its FLOPs are not counted, so its share of peak
  is a floor);
- `softmax+loss`: softmax, log-softmax, cross-entropy and their backward;
- `memory`: copies, concatenation, stacking, indexing, embedding lookups, zero-filling, new tensors;
- `optimizer`: the update of the weights and the gradient norm (timed apart, outside the profile);
- `other ops`: the rest of ATen's self time;
- `overhead`: what no op accounts for: Python, the autograd engine, the dispatcher (update time minus the rest).

Prints a markdown table and appends one JSON line per model to `--out` (the CPU and commit with it).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_train import Setup, count_update, models_to_measure  # noqa: E402  (a sibling benchmark)

ROOT = Path(__file__).resolve().parent.parent
# fmt: off
CLASSES = {  # by the op's name, without `aten::` and leading underscores; a prefix before `_` counts (`tanh_backward`)
    "matmul": ("mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "addmm_activation"),
    "attention (SDPA)": ("scaled_dot_product",),
    "recurrence (oneDNN)": ("mkldnn_rnn",),  # the LSTM's fused kernel: its FLOPs are not counted
    "softmax+loss": ("softmax", "log_softmax", "nll_loss", "cross_entropy", "logsumexp", "logcumsumexp"),
    "memory": ("copy", "cat", "stack", "index", "embedding", "zero", "fill", "empty", "zeros", "clone", "contiguous",
               "gather", "scatter", "select", "slice", "narrow", "masked_fill", "to_copy", "ones", "new", "full",
               "as_strided", "unbind", "split", "where", "flip", "t", "transpose", "view", "unsafe_view", "reshape",
               "expand", "permute", "unsqueeze", "squeeze", "alias", "detach", "resize", "roll", "pad",
               "constant_pad_nd", "repeat", "chunk", "to", "lift_fresh", "set", "cumsum", "unsafe_split",
               "unsafe_chunk", "flatten", "unflatten", "numpy_T", "resolve_conj", "arange", "scalar_tensor",
               "pack_padded_sequence", "sort"),
    "elementwise": ("add", "mul", "sub", "div", "sigmoid", "tanh", "relu", "exp", "log", "neg", "rsub", "max",
                    "maximum", "min", "minimum", "sum", "mean", "dropout", "bernoulli", "native_layer_norm", "pow",
                    "sqrt", "rsqrt", "threshold", "clamp", "abs", "amax", "fused_dropout", "gelu", "norm", "linalg",
                    "bitwise", "logical", "eq", "ne", "ge", "gt", "le", "lt", "softplus", "addcmul", "addcdiv",
                    "lerp", "foreach", "sign", "reciprocal", "square", "prod", "glu", "isfinite", "isnan",
                    "nan_to_num", "mse_loss", "sin", "cos", "layer_norm"),
}
# fmt: on


def op_class(name: str) -> str:
    """The class of an ATen op by its name (`aten::mm` is matmul; `aten::sigmoid_backward` elementwise)."""
    bare = name.removeprefix("aten::").lstrip("_")
    for cls, keys in CLASSES.items():
        if any(bare == key or bare.startswith(key + "_") for key in keys):
            return cls
    return "other ops"


def core_peak(size: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of the best of `repeats` fp32 (size x size) @ (size x size) on the threads torch is given."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def profile_model(stem, cfg, name, args) -> dict:
    mc = cfg.model(name)
    options = {"fp32"} | ({mc.train.step_compile} if mc.train.step_compile in ("fused", "graphed") else set())
    setup = Setup(cfg, name, args, options, 1)
    flops, _ = count_update(Setup(cfg, name, args, {"fp32"}, 1))
    for _ in range(args.warmup):
        setup.update()
    times = [_timed(setup.update) for _ in range(args.updates)]
    update_s = statistics.median(times)
    optimizer_s = statistics.median(_timed(setup.step) for _ in range(args.updates))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.updates):
            setup.gradients()
    parts: dict[str, float] = defaultdict(float)  # seconds an update
    unclassed: dict[str, float] = {}
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            seconds, cls = event.self_cpu_time_total / 1e6 / args.updates, op_class(event.key)
            parts[cls] += seconds
            if cls == "other ops":
                unclassed[event.key] = seconds
    rest = update_s - optimizer_s  # forward and backward, unprofiled
    ops = sum(parts.values())
    if ops > rest:  # the profiler's own cost inflated the ops: their shares kept, no overhead left to show
        parts = defaultdict(float, {cls: s * rest / ops for cls, s in parts.items()})
    parts["overhead"] = max(0.0, rest - ops)
    parts["optimizer"] = optimizer_s
    return {
        "config": stem,
        "model": name,
        "arch": mc.arch,
        "tokens_per_update": setup.tokens,
        "update_ms": round(update_s * 1e3, 2),
        "counted_gflop": round(flops / 1e9, 3),
        "gflop_per_s": round(flops / update_s / 1e9, 2),
        "share": {cls: round(s / update_s, 3) for cls, s in sorted(parts.items())},
        "other_ops": {op: round(s / update_s, 3) for op, s in sorted(unclassed.items(), key=lambda x: -x[1])[:6]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--updates", type=int, default=10, help="updates timed, and profiled (after --warmup)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tiny", action="store_true", help="the registry's tiny sizes: checks the script")
    ap.add_argument("--out", type=Path, default=ROOT / "results/benchmarks/cpu_profile.jsonl")
    args = ap.parse_args()
    args.device, args.length, args.sentences = "cpu", None, None
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as training runs
    peak = core_peak()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {cpu}, {args.threads} thread(s), fp32 matmul peak {peak / 1e9:.1f} GFLOP/s; {commit}, {when}")
    classes = [*CLASSES, "other ops", "optimizer", "overhead"]
    print("| model | update (ms) | GFLOP | GFLOP/s | of peak | " + " | ".join(classes) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(classes))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for stem, cfg, name in models_to_measure([args.config], args.models, args.tiny):
        row = profile_model(stem, cfg, name, args)
        row |= {"of_peak": round(row["gflop_per_s"] * 1e9 / peak, 3), "peak_gflop_per_s": round(peak / 1e9, 1),
                "cpu": cpu, "threads": args.threads, "commit": commit, "date": when, "tiny": args.tiny}  # fmt: skip
        share = row["share"]
        print(f"| {name} | {row['update_ms']:.1f} | {row['counted_gflop']:.2f} | {row['gflop_per_s']:.1f} | "
              f"{row['of_peak']:.0%} | " + " | ".join(f"{share.get(c, 0):.0%}" for c in classes) + " |",
              flush=True)  # fmt: skip
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
