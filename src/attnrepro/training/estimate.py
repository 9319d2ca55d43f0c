"""What a configuration costs before it is submitted: parameters, training FLOPs and GPU-hours.

Training compute is the usual dense-model estimate C = 6 N D (Kaplan et al. 2020, §2.1:
2 N D forward, 4 N D backward) with N the trainable parameters and D the tokens of the whole
schedule: max_steps updates of `tokens_per_update` padded source + target tokens. It ignores
attention's length-dependent term and counts every token through every parameter (an
encoder-decoder sends source tokens through the encoder only), so for these models it is an
upper bound. GPU-hours = C / (throughput_tflops x 10^12) / 3600 at the stated sustained
throughput (`resources.throughput_tflops`); the wall time of a job divides that by its GPUs.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from attnrepro.config import Config, ResourcesConfig

RUNTIME_MARGIN = 1.25  # the estimate's runtime: 25 % over the compute estimate ...
RUNTIME_OVERHEAD_MIN = 10  # ... plus start-up, data loading, validation and checkpoints


@dataclass(frozen=True)
class Budget:
    model: str
    label: str
    arch: str
    parameters: int
    gpus: int
    updates: int
    tokens_per_update: int
    tokens: int
    train_flops: float
    throughput_tflops: float
    gpu_hours: float
    wall_hours: float
    runtime_min: int  # the time limit a train job asks SLURM for


def vocab_sizes(cfg: Config, model: str) -> tuple[int, int]:
    """(source, target) vocabulary of `model` as its tokenizer's config gives them, without data."""
    from attnrepro.data.tokenize import SPECIALS

    spec = cfg.tokenizer_of(model)
    specials = len(SPECIALS) if spec.kind == "word" else 0  # a word shortlist adds them; spm counts them
    return spec.side_vocab_size("src") + specials, spec.side_vocab_size("tgt") + specials


def count_model_parameters(cfg: Config, model: str) -> int:
    """Trainable parameters of `model`, built on the meta device (shapes only, no memory)."""
    from attnrepro.models import parameter_count

    mc = cfg.model(model)
    return parameter_count(mc.arch, *vocab_sizes(cfg, model), mc.params)


def runtime_minutes(resources: ResourcesConfig, wall_hours: float) -> int:
    """The configured runtime, else the estimate with margin and overhead, at most max_runtime."""
    if resources.runtime is not None:
        return resources.runtime
    estimated = math.ceil(wall_hours * 60 * RUNTIME_MARGIN) + RUNTIME_OVERHEAD_MIN
    return min(estimated, resources.max_runtime)


def estimate(cfg: Config, model: str) -> Budget:

    mc = cfg.model(model)
    res, tc = mc.resources, mc.train
    gpus = max(res.gpu, 1)  # a CPU job is costed as one device at the stated throughput
    parameters = count_model_parameters(cfg, model)
    tokens_per_update = tc.batches_per_update(gpus) * tc.batch_tokens
    tokens = tc.max_steps * tokens_per_update
    flops = 6.0 * parameters * tokens  # C = 6 N D
    gpu_hours = flops / (res.throughput_tflops * 1e12) / 3600
    wall_hours = gpu_hours / gpus
    return Budget(
        model=model,
        label=mc.label,
        arch=mc.arch,
        parameters=parameters,
        gpus=res.gpu,
        updates=tc.max_steps,
        tokens_per_update=tokens_per_update,
        tokens=tokens,
        train_flops=flops,
        throughput_tflops=res.throughput_tflops,
        gpu_hours=gpu_hours,
        wall_hours=wall_hours,
        runtime_min=runtime_minutes(res, wall_hours),
    )


def write_budget(rows: list[Budget], path: Path) -> None:
    """budget.csv, one row per model (atomic: written beside and renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        for row in rows:
            values = asdict(row)
            values["train_flops"] = f"{row.train_flops:.4g}"
            values["gpu_hours"] = f"{row.gpu_hours:.2f}"
            values["wall_hours"] = f"{row.wall_hours:.2f}"
            writer.writerow(values)
    tmp.replace(path)


def _count(n: int) -> str:
    return f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def format_budget(rows: list[Budget]) -> str:
    """A Markdown table of the rows and their total, as the README shows it."""
    lines = [
        "| model | parameters | GPUs | updates | tokens | training FLOPs | GPU-hours | time limit (min) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.model}` | {_count(r.parameters)} | {r.gpus} | {r.updates:,} | {r.tokens:.3g} "
            f"| {r.train_flops:.3g} | {r.gpu_hours:,.1f} | {r.runtime_min:,} |"
        )
    total = sum(r.gpu_hours for r in rows)
    lines.append(f"| **total** | | | | | {sum(r.train_flops for r in rows):.3g} | **{total:,.1f}** | |")
    return "\n".join(lines)
