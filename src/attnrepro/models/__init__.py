"""The model registry: config `arch` name -> class. train.py and search.py use only this."""

from __future__ import annotations

from typing import Any

from attnrepro.models.base import Seq2SeqModel
from attnrepro.models.rnnenc import RNNEncDec
from attnrepro.models.rnnsearch import RNNSearch

REGISTRY: dict[str, type[Seq2SeqModel]] = {
    "rnnenc": RNNEncDec,
    "rnnsearch": RNNSearch,
}


def build_model(arch: str, src_vocab: int, tgt_vocab: int, params: dict[str, Any]) -> Seq2SeqModel:
    if arch not in REGISTRY:
        raise ValueError(f"unknown arch {arch!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[arch](src_vocab, tgt_vocab, **params)


def count_parameters(model: Seq2SeqModel) -> int:
    """Trainable parameters; `parameters()` yields a tied weight once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
