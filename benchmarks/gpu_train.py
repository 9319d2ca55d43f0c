"""Every model of the WMT'14 configs at its paper size and batch: timed training updates on one GPU.

    python benchmarks/gpu_train.py                          # CUDA: both WMT'14 configs, the default variants
    python benchmarks/gpu_train.py --device cpu --tiny      # seconds: checks the script (tests/test_gpu_train.py)
    python benchmarks/gpu_train.py --device cpu --configs config/config.yaml --variants fp32 fp32+fused

Models: every model of `--configs` (default config/wmt14_en_fr.yaml, config/wmt14_en_de.yaml); a model of a
later config with the same architecture, sizes, vocabularies and batch as one already listed is measured
once (En-De adds only its Transformers: 37 000 pieces, big's dropout 0.3). Each is built at its config's
size; its update is the config's: `train.batch_tokens` padded source + target tokens a batch,
`batches_per_update(1)` batches (the Transformers: 4 x 12 500 for `update_tokens` 50 000), the config's
optimizer, clipping and loss (`attnrepro.training.objective.Objective`), one host synchronisation per
batch (the loop reads each batch's loss). Batches are random tokens, every sentence `--length` tokens on
each side (default min(max_src_len / 2, 27): 80 sentences of 25 + 25 for the -50 models, as Bahdanau's
80-sentence batches; 128 of 27 + 27 for seq2seq; no padding).

Variants: a precision (fp32 | bf16: autocast, as `train.precision`) and options joined by `+`:
`fused` / `graphed` (`train.step_compile`, the 2014 decoders' steps), `compiled` (`train.compile`: the
whole objective), `chunked` (`train.loss_chunk_tokens` 4096), `explicit` (the Transformer's attention
as softmax(QK^T/√d)V without the fused kernel: the code before SDPA, a baseline), `bN` (the Transformer's
batches of N tokens instead of the config's, the update's 50 000 kept by accumulating fewer of them). A
variant that does not apply to a model (graphed for the Transformer) is skipped. Where a batch does not fit
(out of memory), it is split in 2, then 4 micro-batches of the same update, and the result says so.

Each result (one JSON line, appended to `--out`): peak GPU memory; source + target and target tokens/s;
FLOP utilisation by two counts: `counted` = the matmul FLOPs actually executed in one update, forward and
backward, as torch.utils.flop_counter counts them (cuDNN off for that one count, so that the RNNs'
matmuls are seen; element-wise work uncounted), and `6ND` = 6 x parameters x (source + target) tokens,
which sends every token through every parameter and so overcounts an encoder-decoder; each against the
GPU's dense peak for the precision (tensor-core bf16; fp32 without TF32, as the training loop runs it).
`saved_gb`: tensors one batch's fp32 forward keeps for backward, weights not counted (its activation memory;
`--count-only` reports it and the weights' state without timing, on any device: a prediction of fitting).
`measured`: the result as a `models.NAME.resources.measured` entry for the config (attnrepro estimate).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from attnrepro.config import Config, ModelConfig, load_config
from attnrepro.data.tokenize import PAD
from attnrepro.models import REGISTRY, STEP_LOOP_ARCHS, build_model, count_parameters
from attnrepro.models import transformer as transformer_module
from attnrepro.models.step_compile import set_step_compile
from attnrepro.training.estimate import vocab_sizes
from attnrepro.training.objective import Objective
from attnrepro.training.schedule import make_optimizer

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [ROOT / "config/wmt14_en_fr.yaml", ROOT / "config/wmt14_en_de.yaml"]
PEAK_TFLOPS = {  # dense, per GPU: (bf16 tensor cores, fp32 without TF32); the first name that matches
    "H100 PCIe": (756.0, 51.2),
    "H100": (989.4, 66.9),
    "H200": (989.4, 66.9),
    "A100": (312.0, 19.5),
    "L40S": (362.05, 91.6),
}
STEP_ARCHS = STEP_LOOP_ARCHS
OPTIONS = {"fused", "graphed", "compiled", "chunked", "explicit"}  # and bN: batches of N tokens


def batch_option(options: set[str]) -> int | None:
    """N of an option `bN` (batches of N tokens, the update kept by accumulating more or fewer of them)."""
    return next((int(o[1:]) for o in options if o[:1] == "b" and o[1:].isdigit()), None)


CHUNK_TOKENS = 4096


YARDSTICKS = (("wmt14_en_fr", "rnnsearch50"), ("wmt14_en_de", "transformer_base"))  # the two goals


def default_plan(models: list[tuple[str, Config, str]], device: str) -> list[tuple[str, tuple[str, Config, str]]]:
    """(variant, model) in the order a time budget should cut: the two yardsticks, baseline then new paths;
    every model in bf16 eager (does it fit, how fast); the new paths of the others; fp32 (what the configs run)."""
    if device == "cpu":
        return [(v, m) for v in ("fp32", "bf16") for m in models]
    key = [m for m in models if (m[0], m[2]) in YARDSTICKS]
    rest = [m for m in models if (m[0], m[2]) not in YARDSTICKS]
    first = ["bf16", "bf16+explicit", "bf16+graphed", "bf16+chunked", "bf16+chunked+b50000", "fp32",
             "bf16+compiled+chunked", "bf16+compiled+chunked+b25000", "bf16+fused"]  # fmt: skip
    plan = [(v, m) for m in key for v in first]
    plan += [(v, m) for v in ("bf16", "bf16+graphed", "bf16+chunked", "fp32") for m in rest]
    return [(v, m) for v, m in plan if applies(m[1].model(m[2]).arch, set(v.split("+")[1:]))]


def applies(arch: str, options: set[str]) -> bool:
    if options & {"fused", "graphed"} and arch not in STEP_ARCHS:
        return False
    if options & {"chunked", "explicit"} and arch != "transformer" or batch_option(options) and arch != "transformer":
        return False
    return not ("compiled" in options and arch in STEP_ARCHS)  # the unrolled loop: minutes of compiling a shape


def cost_free(arch: str) -> set[str]:
    """The arch's parameters that are rates, ratios or schemes (a float or a string in the registry), not sizes."""
    return {key for key, p in REGISTRY[arch].params.items() if isinstance(p.default, (float, str))}


def models_to_measure(configs: list[Path], names: list[str] | None, tiny: bool) -> list[tuple[str, Config, str]]:
    """(config stem, config, model) for every model, once per distinct architecture, sizes, vocabularies, batch."""
    seen, found = {}, []
    for path in configs:
        cfg = load_config(path)
        for name, mc in cfg.models.items():
            if names and name not in names:
                continue
            sizes = {k: v for k, v in mc.params.items() if k not in cost_free(mc.arch)} | {
                "dropout": mc.params.get("dropout", 0) > 0  # its rate costs nothing
            }
            key = json.dumps([mc.arch, sizes, vocab_sizes(cfg, name), mc.train.batch_tokens, mc.train.update_tokens,
                              mc.train.max_src_len, mc.train.optimizer], sort_keys=True)  # fmt: skip
            if key in seen:
                print(f"# {path.stem}/{name}: as {seen[key]}, measured once", flush=True)
                continue
            seen[key] = f"{path.stem}/{name}"
            found.append((path.stem, cfg, name))
    return found


@contextlib.contextmanager
def explicit_attention():
    """The Transformer's attention as before the fused kernel: softmax(QK^T/√d_k)V with its weights (a baseline)."""
    attend = transformer_module.MultiHeadAttention.attend

    def explicit(self, x, k, v, mask, need_weights=True, causal=False):
        if causal:
            mask = torch.ones(x.size(1), k.size(2), dtype=torch.bool, device=x.device).tril()
        return attend(self, x, k, v, mask, True, False)

    transformer_module.MultiHeadAttention.attend = explicit
    try:
        yield
    finally:
        transformer_module.MultiHeadAttention.attend = attend


def peak_tflops(device: torch.device, precision: str) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    peaks = next((p for key, p in PEAK_TFLOPS.items() if key in name), None)
    return None if peaks is None else peaks[0 if precision == "bf16" else 1]


class Setup:
    """One model at its config's size (or --tiny), its optimizer, objective and one random update's batches."""

    def __init__(self, cfg: Config, name: str, args: argparse.Namespace, options: set[str], micro: int):
        mc: ModelConfig = cfg.model(name)
        tc = mc.train if batch_option(options) is None else replace(mc.train, batch_tokens=batch_option(options))
        self.mc, self.tc, self.device = mc, tc, torch.device(args.device)
        src_vocab, tgt_vocab = (200, 200) if args.tiny else vocab_sizes(cfg, name)
        params = dict(mc.params) | (REGISTRY[mc.arch].tiny if args.tiny else {})
        torch.manual_seed(0)
        with torch.device(self.device):
            self.model = build_model(mc.arch, src_vocab, tgt_vocab, params).train()
        self.step_compile = "graphed" if "graphed" in options else "fused" if "fused" in options else "none"
        effective = set_step_compile(self.model, self.step_compile, self.device)
        chunk = CHUNK_TOKENS if "chunked" in options else 0
        self.objective = Objective(self.model, self.tc.label_smoothing, chunk, bucket=effective == "graphed")
        self.forward = torch.compile(self.objective) if "compiled" in options else self.objective
        self.optimizer = make_optimizer(self.model.parameters(), self.tc)
        self.length = args.length or min(self.tc.max_src_len // 2, 27)
        batch_tokens = 160 if args.tiny else self.tc.batch_tokens
        self.batches = self.tc.batches_per_update(1) * micro  # out of memory: the same update in more pieces
        self.sentences = args.sentences or max(1, batch_tokens // (2 * self.length) // micro)
        g = torch.Generator(device="cpu").manual_seed(1)
        shape = (self.batches, self.sentences, self.length + 1)
        src = torch.randint(4, src_vocab, shape[:2] + (self.length,), generator=g).to(self.device)
        tgt = torch.randint(4, tgt_vocab, shape, generator=g).to(self.device)
        self.data = [(s, s != PAD, t[:, :-1], t[:, 1:]) for s, t in zip(src, tgt)]
        self.tokens = self.batches * self.sentences * 2 * self.length  # source + target per update
        self.autocast = torch.autocast(self.device.type, dtype=torch.bfloat16) if "bf16" in options else None

    def update(self) -> float:
        """One update as attnrepro.training.loop runs it (without the learning-rate schedule)."""
        loss = self.gradients()
        self.step()
        return loss

    def gradients(self) -> float:
        """The update's forward and backward passes over its batches; their mean loss."""
        self.optimizer.zero_grad(set_to_none=True)
        norm = self.batches * self.sentences * (self.length if self.tc.loss_norm == "token" else 1)
        loss_sum = 0.0
        for batch in self.data:
            with self.autocast or contextlib.nullcontext():
                loss = self.forward(*batch)
            (loss * (self.sentences * self.length / norm)).backward()
            loss_sum += float(loss.detach()) / self.batches  # the loop's one synchronisation per batch
        return loss_sum

    def step(self) -> None:
        """The update's clipping and optimizer step, on the gradients in place."""
        if self.tc.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.clip_norm)
        self.optimizer.step()

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def count_update(setup: Setup) -> tuple[float, float]:
    """(matmul FLOPs of one fp32 eager update, cuDNN off so that the RNNs' are counted; GB of the tensors one
    batch's forward saves for backward, the weights not counted: the activation memory of a batch)."""
    cudnn = torch.backends.cudnn.flags(enabled=False) if setup.device.type == "cuda" else contextlib.nullcontext()
    with cudnn, FlopCounterMode(display=False) as counter:
        setup.update()
    weights = {p.untyped_storage().data_ptr() for p in setup.model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = setup.forward(*setup.data[0])
    del loss
    return float(counter.get_total_flops()), sum(saved.values()) / 2**30


STATE_BYTES = {"adam": 16, "adadelta": 16, "sgd": 8}  # fp32 weights + gradients + the optimizer's state, a parameter


def count_only(setup: Setup, counted: tuple[float, float]) -> dict:
    """What one update needs without running it on a GPU: weights, gradients and optimizer state (exact), and
    the tensors saved for backward (counted in the fp32 eager update, for `sentences` a batch)."""
    parameters = count_parameters(setup.model)
    state_gb = parameters * STATE_BYTES[setup.tc.optimizer] / 2**30
    return {"parameters": parameters, "sentences": setup.sentences, "length": setup.length,
            "counted_flops_per_update": counted[0], "saved_gb": round(counted[1], 4),
            "state_gb": round(state_gb, 3)}  # fmt: skip


def measure(stem: str, cfg: Config, name: str, variant: str, args: argparse.Namespace, counts: dict) -> dict:
    precision, *rest = variant.split("+")
    options = set(rest) | {precision}
    device = torch.device(args.device)
    result = {"config": stem, "model": name, "arch": cfg.model(name).arch, "variant": variant}
    for micro in (1, 2, 4):
        try:
            torch._dynamo.reset()
            setup = Setup(cfg, name, args, options, micro)
            if name not in counts:  # FLOPs and saved tensors do not depend on the variant: counted once, eager fp32
                plain = Setup(cfg, name, args, {"fp32"}, micro)
                counts[name] = count_update(plain)
                del plain
            if args.count_only:
                return result | count_only(setup, counts[name])
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            compiling = options & {"fused", "graphed", "compiled"}
            started = time.perf_counter()
            first_loss = setup.update()  # from the same weights and batches in every variant: comparable
            for _ in range(args.warmup - 1 + (3 if compiling else 0)):  # CUDA graphs: warm-up, record, replay
                setup.update()
            setup.sync()
            result["warmup_s"] = round(time.perf_counter() - started, 2)
            seconds = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                for _ in range(args.steps):
                    loss = setup.update()
                setup.sync()
                seconds.append((time.perf_counter() - start) / args.steps)
            break
        except torch.OutOfMemoryError as err:
            result.setdefault("out_of_memory", []).append(f"{micro} batch(es) a batch: {str(err)[:120]}")
            setup = plain = None  # noqa: F841  (free the memory before the next try)
    else:
        return result
    step_s = statistics.median(seconds)
    flops, saved_gb = counts[name]
    parameters = count_parameters(setup.model)
    tokens_per_s = setup.tokens / step_s
    peak = peak_tflops(device, precision)

    def utilisation(flops_per_update: float) -> float | None:
        return None if peak is None else round(flops_per_update / step_s / (peak * 1e12), 4)

    result |= {
        "parameters": parameters,
        "micro_batches_per_batch": micro,
        "sentences": setup.sentences,
        "length": setup.length,
        "tokens_per_update": setup.tokens,
        "update_s": float(f"{step_s:.6g}"),  # six significant digits: tokens_per_s follows from it to 1e-5
        "tokens_per_s": round(tokens_per_s),
        "tgt_tokens_per_s": round(tokens_per_s / 2),
        "first_loss": first_loss,  # the first update's: every variant of a model starts from the same state
        "loss": round(loss, 4),
        "counted_flops_per_update": flops,
        "mfu_counted": utilisation(flops),
        "mfu_6nd": utilisation(6 * parameters * setup.tokens),
        "peak_tflops": peak,
        "saved_gb": round(saved_gb, 3),
        "peak_memory_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
        "measured": {
            "tokens_per_s": round(tokens_per_s),
            "gpu": result_device(device),
            "source": f"benchmarks/gpu_train.py {args.date} {args.commit}",
            "train": {
                "precision": precision,
                "compile": "compiled" in options,
                "step_compile": setup.step_compile,
                "loss_chunk_tokens": setup.objective.chunk_tokens,
                "batch_tokens": setup.tc.batch_tokens // micro,
            },  # fmt: skip
        },
    }
    return result


def result_device(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def summary(results: list[dict]) -> str:
    lines = ["| model | variant | tokens/s | target tokens/s | update (ms) | MFU counted | MFU 6ND | peak GB |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        if "state_gb" in r:  # --count-only
            what = f"{r['sentences']} sentences: {r['saved_gb']} GB saved for backward, {r['state_gb']} GB of state"
            lines.append(f"| {r['config']}/{r['model']} | {r['variant']} | {what} |||||")
            continue
        if "tokens_per_s" not in r:
            lines.append(f"| {r['config']}/{r['model']} | {r['variant']} | {r.get('error') or 'out of memory'} |||||")
            continue
        lines.append(
            f"| {r['config']}/{r['model']} | {r['variant']} | {r['tokens_per_s']:,} | {r['tgt_tokens_per_s']:,} "
            f"| {r['update_s'] * 1e3:.1f} | {r['mfu_counted']} | {r['mfu_6nd']} | {r['peak_memory_gb']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--configs", nargs="+", type=Path, default=CONFIGS)
    ap.add_argument("--models", nargs="+", help="model names of the configs (default: every model)")
    ap.add_argument("--variants", nargs="+", help="precision[+option...] (default: default_plan's order)")
    ap.add_argument("--tiny", action="store_true", help="every model at a few units, 160-token batches")
    ap.add_argument("--length", type=int, help="tokens per sentence on each side")
    ap.add_argument("--sentences", type=int, help="sentences per batch (default: batch_tokens / (2 x length))")
    ap.add_argument("--count-only", action="store_true", help="no timing: FLOPs, saved tensors, weight state")
    ap.add_argument("--warmup", type=int, help="updates before timing, +3 where something compiles (3; --tiny 1)")
    ap.add_argument("--steps", type=int, help="updates per timed repeat (5; --tiny 2)")
    ap.add_argument("--repeats", type=int, help="timed repeats, the median reported (3; --tiny 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (the embedded default trains on 1)")
    ap.add_argument("--budget-s", type=float, default=float("inf"), help="start no variant after this many seconds")
    ap.add_argument("--keep-denormals", action="store_true", help="CPU: compute with subnormal floats, as training "
                    "did before it flushed them to zero (the difference is the measurement)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "gpu_train.jsonl")
    args = ap.parse_args(argv)
    for key, full, tiny in (("warmup", 3, 1), ("steps", 5, 2), ("repeats", 3, 1)):
        if getattr(args, key) is None:
            setattr(args, key, tiny if args.tiny else full)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
        torch.set_flush_denormal(not args.keep_denormals)  # as training does (training/loop.py)
    args.date = datetime.now(timezone.utc).date().isoformat()
    args.commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip() or "(commit unknown)"  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    models = models_to_measure(args.configs, args.models, args.tiny)
    if args.variants:  # variant by variant, each over every model it applies to
        tasks = [(v, m) for v in args.variants for m in models if applies(m[1].model(m[2]).arch, set(v.split("+")[1:]))]
    else:
        tasks = default_plan(models, args.device)
    started, counts, results = time.perf_counter(), {}, []
    for variant, (stem, cfg, name) in tasks:
        if time.perf_counter() - started > args.budget_s:
            print(f"# budget of {args.budget_s:g} s spent: {stem}/{name} {variant} not measured", flush=True)
            continue
        try:
            with explicit_attention() if "explicit" in variant.split("+") else contextlib.nullcontext():
                result = measure(stem, cfg, name, variant, args, counts)
        except Exception as err:  # a failed compilation must not lose the other numbers
            result = {"config": stem, "model": name, "variant": variant, "error": f"{type(err).__name__}: {err}"[:400]}
        result = {"device": result_device(torch.device(args.device)), "torch": torch.__version__} | result
        results.append(result)
        print(json.dumps(result), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(result) + "\n")
    print(summary(results), flush=True)


if __name__ == "__main__":
    main()
