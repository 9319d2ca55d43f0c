"""Readers of a finished run's files (results/{dataset}/{model}/): bleu.json, checkpoint.pt, bleu_by_length.csv;
files from before a column or key existed read with it empty. train_log.csv is training's own file: its verb
reads it (`attnrepro.training.log`) and hands it here as `TrainingLogs`.

Each reader checks that the file belongs to the config it is read with, as far as the file records what made
it: the checkpoint's model (arch, params) and training settings, the scores' length buckets and bootstrap, the
log's last step against the checkpoint's. A file of another config is a `DataError` naming the file and both
values, never a table whose labels describe one run and whose numbers another.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.config import Config, EvaluateConfig, ModelConfig
from attnrepro.errors import DataError

SCORES = ("bleu", "bleu_tokenized", "bleu_lc_tok")  # bleu.json's scores, each with its interval `{score}_ci`


@dataclass(frozen=True)
class TrainingLogs:
    """Every run's train_log.csv (`training.log.read_train_log`) and training's verdict on each
    (`training.log.run_divergence`): the runs whose training diverged, with why."""

    logs: dict[str, pd.DataFrame]
    diverged: dict[str, str] = field(default_factory=dict)


def read_bleu(path: Path, ev: EvaluateConfig | None = None) -> dict[str, Any]:
    """A model's bleu.json; an old one without the tokenized scores, a score that is not a finite number, or
    (given the config's `ev`) scores of other length buckets or another bootstrap raise naming the file."""
    scores = json.loads(path.read_text(encoding="utf-8"))
    if "bleu_tokenized" not in scores or "no_unk" not in scores:
        raise DataError(f"{path}: no bleu_tokenized/no_unk (written by an older `attnrepro score`; rerun score)")
    for key in SCORES:
        values = [scores.get(key), *(scores.get(f"{key}_ci") or ())]
        bad = [v for v in values if v is not None and not math.isfinite(float(v))]
        if bad:
            raise DataError(f"{path}: {key} holds {bad[0]}, not a finite number; score this run again")
    if ev is not None:
        _check_scored_with(scores, path, ev)
    return scores


def _check_scored_with(scores: dict[str, Any], path: Path, ev: EvaluateConfig) -> None:
    """bleu.json's record of the evaluate settings that made it (`evaluate`, written by `attnrepro score`;
    `bootstrap`) against the config's; a file from before the record is not checked."""
    recorded = dict(scores.get("evaluate") or {})
    bootstrap = scores.get("bootstrap") or {}
    recorded |= {f"bootstrap_{k}": bootstrap[k] for k in ("resamples", "seed") if k in bootstrap}
    now = asdict(ev)
    for key, value in recorded.items():
        if key in now and value != now[key]:
            raise DataError(f"{path}: scored with evaluate.{key}={value}, but the config has evaluate.{key}="
                            f"{now[key]}: score again with this config, or read the run with the config it was "
                            "scored with")  # fmt: skip


def read_bleu_by_length(cfg: Config, results: Path) -> pd.DataFrame:
    """Every run's bleu_by_length.csv, one row per run x bucket: model (the run), base, seed, label, then the
    file's columns (bucket_lo, bucket_hi, n_sentences, bleu, bleu_ci_lo, bleu_ci_hi; the interval empty
    in a file scored without one). A file whose buckets are not the config's (evaluate.bucket_width, max_len),
    or that gives a bucket twice, raises naming the file."""
    frames = []
    for name, m in cfg.models.items():
        path = results / name / "bleu_by_length.csv"
        frame = pd.read_csv(path)
        check_buckets(frame, path, cfg.evaluate)
        for column in ("bleu_ci_lo", "bleu_ci_hi"):
            if column not in frame:
                frame[column] = math.nan
        if cfg.evaluate.length_bleu == "tokenized":  # the score the by-length tables and Fig. 2 show, as `bleu`
            if "bleu_tokenized" not in frame:
                raise DataError(f"{path}: no bleu_tokenized column (evaluate.length_bleu: tokenized); score again")
            for suffix in ("", "_ci_lo", "_ci_hi"):  # sacreBLEU kept beside it, under its name
                frame[f"bleu_sacrebleu{suffix}"] = frame[f"bleu{suffix}"]
                frame[f"bleu{suffix}"] = frame[f"bleu_tokenized{suffix}"]
        run = {"model": name, "base": m.base, "seed": m.train.seed, "label": m.label}
        frames.append(pd.concat([pd.DataFrame([run] * len(frame)), frame], axis=1))
    return pd.concat(frames, ignore_index=True)


def check_buckets(frame: pd.DataFrame, path: Path, ev: EvaluateConfig) -> None:
    """A DataError naming the file when a bucket is given twice or is not one of the config's (lo, hi]
    buckets of evaluate.bucket_width words up to evaluate.max_len."""
    edges = list(zip(frame["bucket_lo"].astype(int), frame["bucket_hi"].astype(int)))
    for i, edge in enumerate(edges):
        if edge in edges[:i]:
            first = edges.index(edge) + 2
            raise DataError(f"{path}:{i + 2}: bucket {edge[0] + 1}–{edge[1]} is given twice (lines {first} and "
                            f"{i + 2}); score this run again")  # fmt: skip
    width, top = ev.bucket_width, max(ev.max_len, ev.bucket_width)
    expected = {(lo, lo + width) for lo in range(0, top, width)}
    foreign = [edge for edge in edges if edge not in expected]
    if foreign:
        lo, hi = foreign[0]
        raise DataError(f"{path}: bucket {lo + 1}–{hi} ({hi - lo} words wide) is not one of the config's "
                        f"(evaluate.bucket_width={width}, max_len={ev.max_len}): score again with this config, or "
                        "read the run with the config it was scored with")  # fmt: skip


@dataclass(frozen=True)
class RunCheckpoint:
    """What the tables and legends take from checkpoint.pt: the model it rebuilds, how it was trained, when
    training stopped, and the code that trained it."""

    arch: str
    params: dict[str, Any]
    src_vocab: int
    tgt_vocab: int
    step: int  # the step whose weights it holds: the best one when training stopped early
    stopped_at: int | None = None  # the last step trained; None in a checkpoint from before early stopping
    stop_reason: str | None = None  # plateau | max_steps
    train: dict[str, Any] | None = None  # the settings that decide the weights (the run's fingerprint's)
    commit: str | None = None  # the package's git commit at training, "+modified" when its files differed

    @property
    def last_step(self) -> int:
        return self.step if self.stopped_at is None else self.stopped_at

    def parameter_count(self) -> int:
        """Trainable parameters (counted on the meta device: no weights are read)."""
        from attnrepro.models import parameter_count

        return parameter_count(self.arch, self.src_vocab, self.tgt_vocab, self.params)


def read_checkpoint(path: Path) -> RunCheckpoint:
    """checkpoint.pt's description of its model and its stopping (memory-mapped: the weights stay on disk)."""
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        model = (ckpt[k] for k in ("arch", "params", "src_vocab", "tgt_vocab", "step"))
        train = (ckpt.get("fingerprint") or {}).get("train")
        return RunCheckpoint(*model, stopped_at=ckpt.get("stopped_at"), stop_reason=ckpt.get("stop_reason"),
                             train=train, commit=ckpt.get("commit"))  # fmt: skip
    except Exception as err:
        raise DataError(f"{path}: cannot read the model's arch/params/vocabularies/step ({err})") from err


def check_checkpoint(run: RunCheckpoint, path: Path, mc: ModelConfig) -> None:
    """A DataError naming the file and both values when the checkpoint is not of model `mc`: another arch or
    params, or (where it records them) other training settings."""
    if (run.arch, dict(run.params)) != (mc.arch, dict(mc.params)):
        raise DataError(f"{path}: a checkpoint of {run.arch} {dict(run.params)}, but models.{mc.base} is {mc.arch} "
                        f"{dict(mc.params)}: read it with the config it was trained with, or train this model"
                        )  # fmt: skip
    now = asdict(mc.train)
    differ = [key for key, value in (run.train or {}).items() if key in now and _as_config(value) != now[key]]
    if differ:
        key = differ[0]
        raise DataError(f"{path}: trained with train.{key}={_as_config(run.train[key])!r}, but the config's "
                        f"{mc.name} has train.{key}={now[key]!r}: read it with the config it was trained with, or "
                        "train this model")  # fmt: skip


def _as_config(value: Any) -> Any:
    """A value as the config's dataclasses hold it (lists are tuples there)."""
    return tuple(value) if isinstance(value, list) else value


def check_log(log: pd.DataFrame, log_path: Path, run: RunCheckpoint, ckpt_path: Path) -> None:
    """A DataError naming both files when the log does not end where the checkpoint says training stopped."""
    if len(log) and int(log["step"].iloc[-1]) != run.last_step:
        raise DataError(f"{log_path}: ends at step {int(log['step'].iloc[-1])}, but {ckpt_path} says training "
                        f"stopped after step {run.last_step}: the two files are of different runs")  # fmt: skip


def read_checkpoints(cfg: Config, results: Path, training: TrainingLogs | None = None) -> dict[str, RunCheckpoint]:
    """Every run's checkpoint.pt, checked against the config (`check_checkpoint`) and, given the logs, against
    its train_log.csv (`check_log`)."""
    checkpoints = {}
    for name in cfg.models:
        path = results / name / "checkpoint.pt"
        checkpoints[name] = run = read_checkpoint(path)
        check_checkpoint(run, path, cfg.model(name))
        if training is not None:
            check_log(training.logs[name], results / name / "train_log.csv", run, path)
    return checkpoints


def training_length(model: ModelConfig, runs: Sequence[RunCheckpoint]) -> str:
    """How a model was trained, for legends: sentence-length limit, the step training stopped at (the range
    over its runs) and why, and the step whose weights were kept when it is another."""
    steps = sorted(r.last_step for r in runs)
    span = f"{steps[0]:,}" if steps[0] == steps[-1] else f"{steps[0]:,}–{steps[-1]:,}"
    text = f"trained on ≤{model.train.max_src_len} words"
    reasons = ", ".join(dict.fromkeys(r.stop_reason for r in runs if r.stop_reason is not None))
    seeds = f"{len(runs)} seeds, " if len(runs) > 1 else ""
    if not reasons:  # a checkpoint from before early stopping: the updates done
        return f"{seeds}{text}, {span} steps"
    if seeds:
        return f"{seeds}{text}, stopped at steps {span}: {reasons}"
    best = f", best {runs[0].step:,}" if runs[0].step != runs[0].last_step else ""
    return f"{text}, stopped at step {span}: {reasons}{best}"
