"""Readers of a finished run's files (results/{dataset}/{model}/): bleu.json, train_log.csv, checkpoint.pt,
bleu_by_length.csv; files from before a column or key existed read with it empty."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.config import Config, ModelConfig
from attnrepro.errors import DataError


def read_bleu(path: Path) -> dict[str, Any]:
    """A model's bleu.json; an old one without the tokenized scores raises naming the file."""
    scores = json.loads(path.read_text(encoding="utf-8"))
    if "bleu_tokenized" not in scores or "no_unk" not in scores:
        raise DataError(f"{path}: no bleu_tokenized/no_unk (written by an older `attnrepro score`; rerun score)")
    return scores


def read_train_log(path: Path) -> pd.DataFrame:
    """train_log.csv; columns a run did not log (older logs) come back empty."""
    log = pd.read_csv(path)
    for column in ("valid_loss", "src_tokens", "tgt_tokens", "valid_bleu"):
        if column not in log:
            log[column] = math.nan
    return log


def divergence(valid_losses: Sequence[float]) -> str | None:
    """Why a run's training diverged, or None: a validation loss that is not finite, or a best validation loss
    no lower than the first (training never improved on its first validation). One validation says nothing."""
    losses = [float(x) for x in valid_losses if not pd.isna(x)]  # empty in the log's rows without a validation
    if any(not math.isfinite(x) for x in losses):
        return "a validation loss is not finite"
    if len(losses) >= 2 and min(losses) >= losses[0]:
        return f"its best validation loss, {min(losses):g}, is no lower than its first, {losses[0]:g}"
    return None


def read_bleu_by_length(cfg: Config, results: Path) -> pd.DataFrame:
    """Every run's bleu_by_length.csv, one row per run x bucket: model (the run), base, seed, label, then the
    file's columns (bucket_lo, bucket_hi, n_sentences, bleu, bleu_ci_lo, bleu_ci_hi; the interval empty
    in a file scored without one)."""
    frames = []
    for name, m in cfg.models.items():
        frame = pd.read_csv(results / name / "bleu_by_length.csv")
        for column in ("bleu_ci_lo", "bleu_ci_hi"):
            if column not in frame:
                frame[column] = math.nan
        run = {"model": name, "base": m.base, "seed": m.train.seed, "label": m.label}
        frames.append(pd.concat([pd.DataFrame([run] * len(frame)), frame], axis=1))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class RunCheckpoint:
    """What the tables and legends take from checkpoint.pt: the model it rebuilds and when training stopped."""

    arch: str
    params: dict[str, Any]
    src_vocab: int
    tgt_vocab: int
    step: int  # the step whose weights it holds: the best one when training stopped early
    stopped_at: int | None = None  # the last step trained; None in a checkpoint from before early stopping
    stop_reason: str | None = None  # plateau | max_steps

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
        return RunCheckpoint(*model, stopped_at=ckpt.get("stopped_at"), stop_reason=ckpt.get("stop_reason"))
    except Exception as err:
        raise DataError(f"{path}: cannot read the model's arch/params/vocabularies/step ({err})") from err


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
