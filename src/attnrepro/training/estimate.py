"""What a configuration costs before it is submitted: parameters, training FLOPs and GPU-hours.

Training compute is the usual dense-model estimate C = 6 N D (Kaplan et al. 2020, §2.1:
2 N D forward, 4 N D backward) with N the trainable parameters and D the tokens of the whole
schedule: max_steps updates of `tokens_per_update` padded source + target tokens. It ignores
attention's length-dependent term and counts every token through every parameter (an
encoder-decoder sends source tokens through the encoder only), so for these models it is an
upper bound.

GPU-hours come from a measurement where the model has one (`models.NAME.resources.measured`:
source + target tokens per second on one GPU, at the model's batch, from benchmarks/gpu_train.py):
D / tokens_per_s / 3600. Elsewhere they are a guess, C / (throughput_tflops x 10^12) / 3600 at the
stated sustained throughput (`resources.throughput_tflops`). The wall time of a job divides that by
its GPUs (linear scaling assumed). A run longer than one job's time limit continues across jobs:
SLURM signals it `signal_s` before the limit, it checkpoints, requeues and resumes
(docs/cluster.md); `jobs` counts them.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from attnrepro.config import Config, MeasuredThroughput, ResourcesConfig, TrainConfig
from attnrepro.errors import ConfigError

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
    throughput_tflops: float  # what it was priced at: the guess, or C / the measured time
    gpu_hours: float
    wall_hours: float
    runtime_min: int  # the time limit a train job asks SLURM for
    jobs: int  # train jobs of at most runtime_min (each checkpoints signal_s early) the run needs
    priced_from: str  # "measured on <gpu>" or "<throughput_tflops> TFLOP/s (not measured)"
    notes: tuple[str, ...] = ()  # the measurement's settings that differ from the model's


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


def jobs_needed(resources: ResourcesConfig, runtime_min: int, wall_hours: float) -> int:
    """Train jobs of `runtime_min` minutes that `wall_hours` of training take, each stopped `signal_s` early."""
    per_job_min = max(runtime_min - resources.signal_s / 60, 1.0)
    return max(1, math.ceil(wall_hours * 60 / per_job_min))


def measured_differences(measured: MeasuredThroughput, tc: TrainConfig) -> tuple[str, ...]:
    """'train.KEY: measured with A, configured B' for each setting of the measurement the model does not share."""
    return tuple(
        f"train.{key}: measured with {value!r}, configured {getattr(tc, key)!r}"
        for key, value in sorted(measured.train.items())
        if getattr(tc, key) != value
    )


def estimate(cfg: Config, model: str) -> Budget:
    mc = cfg.model(model)
    res, tc = mc.resources, mc.train
    gpus = max(res.gpu, 1)  # a CPU job is costed as one device at the stated throughput
    parameters = count_model_parameters(cfg, model)
    tokens_per_update = tc.batches_per_update(gpus) * tc.batch_tokens
    tokens = tc.max_steps * tokens_per_update
    flops = 6.0 * parameters * tokens  # C = 6 N D
    if res.measured is not None:
        gpu_hours = tokens / res.measured.tokens_per_s / 3600
        tflops = flops / (gpu_hours * 3600) / 1e12
        rate = f"{res.measured.tokens_per_s / 1e3:,.0f} k tokens/s"
        priced_from, notes = f"measured: {rate} on {res.measured.gpu}", measured_differences(res.measured, tc)
    else:
        gpu_hours, tflops = flops / (res.throughput_tflops * 1e12) / 3600, res.throughput_tflops
        priced_from, notes = f"{res.throughput_tflops:g} TFLOP/s (not measured)", ()
    wall_hours = gpu_hours / gpus
    runtime_min = runtime_minutes(res, wall_hours)
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
        throughput_tflops=tflops,
        gpu_hours=gpu_hours,
        wall_hours=wall_hours,
        runtime_min=runtime_min,
        jobs=jobs_needed(res, runtime_min, wall_hours),
        priced_from=priced_from,
        notes=notes,
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
            values["throughput_tflops"] = f"{row.throughput_tflops:.4g}"
            values["notes"] = "; ".join(row.notes)
            writer.writerow(values)
    tmp.replace(path)


def _count(n: int) -> str:
    return f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def format_budget(rows: list[Budget]) -> str:
    """A Markdown table of the rows and their total, as docs/cluster.md shows it."""
    lines = [
        "| model | parameters | GPUs | updates | tokens | training FLOPs | priced from | GPU-hours "
        "| time limit (min) | jobs |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.model}` | {_count(r.parameters)} | {r.gpus} | {r.updates:,} | {r.tokens:.3g} "
            f"| {r.train_flops:.3g} | {r.priced_from} | {r.gpu_hours:,.1f} | {r.runtime_min:,} | {r.jobs} |"
        )
    total = sum(r.gpu_hours for r in rows)
    lines.append(f"| **total** | | | | | {sum(r.train_flops for r in rows):.3g} | | **{total:,.1f}** | | |")
    return "\n".join(lines)


def budget_notes(rows: list[Budget]) -> list[str]:
    """One line per model that runs longer than one job, and per setting its measurement does not share."""
    lines = []
    for r in rows:
        if r.jobs > 1:
            gpus = f"{max(r.gpus, 1)} GPU" + ("s" if r.gpus > 1 else "")
            lines.append(
                f"{r.model}: {r.wall_hours:,.1f} h on {gpus} exceed one job's {r.runtime_min:,}-min time limit: "
                f"the run continues across about {r.jobs} requeued jobs"
            )
        lines.extend(f"{r.model}: {note}" for note in r.notes)
    return lines


def _pair(a: str, b: str) -> str:
    """One value where both grids agree, else `a / b`."""
    return a if a == b else f"{a} / {b}"


def grid_bill(first: Config, second: Config) -> str:
    """docs/cluster.md's bill of two grids of the same models (WMT'14 En-Fr and En-De): a row per model with
    each grid's value where they differ, the totals, and both grids' GPU-hours together (Markdown)."""
    if list(first.models) != list(second.models):
        only = sorted(set(first.models) ^ set(second.models)) or ["(the same models in another order)"]
        raise ConfigError(
            f"models: {first.dataset} and {second.dataset} must train the same models for one bill; {only[0]} differs"
        )
    a_lang, b_lang = (cfg.dataset.rsplit("_", 2)[-2:] for cfg in (first, second))
    a_name, b_name = "-".join(a_lang), "-".join(b_lang)
    lines = [
        f"| model | parameters ({a_name} / {b_name}) | updates ({a_name} / {b_name}) | tokens D "
        f"| C = 6 N D ({a_name}) | priced from ({a_name} / {b_name}) | GPU-hours {a_name} | GPU-hours {b_name} "
        "| time limit (min) | jobs |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    rows = [(estimate(first, name), estimate(second, name)) for name in first.models]
    for a, b in rows:
        lines.append(
            f"| `{a.model}` | {_pair(_count(a.parameters), _count(b.parameters))} "
            f"| {_pair(f'{a.updates:,}', f'{b.updates:,}')} | {_pair(f'{a.tokens:.2g}', f'{b.tokens:.2g}')} "
            f"| {a.train_flops:.2g} | {_pair(a.priced_from, b.priced_from)} | {a.gpu_hours:,.1f} | {b.gpu_hours:,.1f} "
            f"| {_pair(f'{a.runtime_min:,}', f'{b.runtime_min:,}')} | {_pair(str(a.jobs), str(b.jobs))} |"
        )
    hours = [sum(row[i].gpu_hours for row in rows) for i in (0, 1)]
    flops = sum(a.train_flops for a, _ in rows)
    lines.append(f"| **total** | | | | {flops:.2g} | | **{hours[0]:,.1f}** | **{hours[1]:,.1f}** | | |")
    measured = sum(r.priced_from.startswith("measured") for row in rows for r in row)
    lines += [
        "",
        f"Both grids together: **{sum(hours):,.0f} GPU-hours**; {measured} of the {2 * len(rows)} trainings priced "
        "from a measurement, the others from the guess.",
    ]
    return "\n".join(lines)
