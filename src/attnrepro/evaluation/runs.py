"""Readers of a finished run's files (results/{dataset}/{model}/): bleu.json, train_log.csv, checkpoint.pt."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.config import ModelConfig
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


def training_length(model: ModelConfig, log: pd.DataFrame | None = None) -> str:
    """How a model was trained, for legends: sentence-length limit and updates done."""
    steps = int(log["step"].iloc[-1]) if log is not None and len(log) else model.train.max_steps
    return f"trained on ≤{model.train.max_src_len} words, {steps:,} steps"


@dataclass(frozen=True)
class RunCheckpoint:
    """What the tables take from checkpoint.pt: the model it rebuilds."""

    arch: str
    params: dict[str, Any]
    src_vocab: int
    tgt_vocab: int

    def parameter_count(self) -> int:
        """Trainable parameters (counted on the meta device: no weights are read)."""
        from attnrepro.models import parameter_count

        return parameter_count(self.arch, self.src_vocab, self.tgt_vocab, self.params)


def read_checkpoint(path: Path) -> RunCheckpoint:
    """checkpoint.pt's description of its model (memory-mapped: the weights stay on disk)."""
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return RunCheckpoint(*(ckpt[k] for k in ("arch", "params", "src_vocab", "tgt_vocab")))
    except Exception as err:
        raise DataError(f"{path}: cannot read the model's arch/params/vocabularies ({err})") from err
