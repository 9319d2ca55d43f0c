"""Readers of a finished run's files (results/{dataset}/{model}/): bleu.json, train_log.csv, checkpoint.pt."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.config import ModelConfig


def read_bleu(path: Path) -> dict[str, Any]:
    """A model's bleu.json; an old one without the tokenized scores raises naming the file."""
    scores = json.loads(path.read_text(encoding="utf-8"))
    if "bleu_tokenized" not in scores or "no_unk" not in scores:
        raise ValueError(f"{path}: no bleu_tokenized/no_unk (written by an older `attnrepro score`; rerun score)")
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


def parameter_count(checkpoint: Path) -> int:
    """Trainable parameters of the model a checkpoint rebuilds (counted on the meta device, no weights read)."""
    import torch

    from attnrepro.models import build_model, count_parameters

    try:
        ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        arch, params, src_vocab, tgt_vocab = (ckpt[k] for k in ("arch", "params", "src_vocab", "tgt_vocab"))
    except Exception as err:
        raise ValueError(f"{checkpoint}: cannot read the model's arch/params/vocabularies ({err})") from err
    with torch.device("meta"):
        return count_parameters(build_model(arch, src_vocab, tgt_vocab, params))
