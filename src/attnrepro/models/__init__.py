"""The model registry: config `arch` name -> class. train.py and search.py use only this."""

from __future__ import annotations

from typing import Any

from attnrepro.models.base import Seq2SeqModel
from attnrepro.models.diagonal import DiagonalSearch
from attnrepro.models.graves import GravesNTM, GravesWindow
from attnrepro.models.memnet import MemNet
from attnrepro.models.rnnenc import RNNEncDec
from attnrepro.models.rnnsearch import RNNSearch
from attnrepro.models.seq2seq import Seq2Seq
from attnrepro.models.transformer import Transformer

REGISTRY: dict[str, type[Seq2SeqModel]] = {
    "rnnenc": RNNEncDec,
    "seq2seq": Seq2Seq,
    "rnnsearch": RNNSearch,
    "diagonal": DiagonalSearch,
    "graves_window": GravesWindow,
    "graves_ntm": GravesNTM,
    "memnet": MemNet,
    "transformer": Transformer,
}


def build_model(arch: str, src_vocab: int, tgt_vocab: int, params: dict[str, Any]) -> Seq2SeqModel:
    if arch not in REGISTRY:
        raise ValueError(f"unknown arch {arch!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[arch](src_vocab, tgt_vocab, **params)


def count_parameters(model: Seq2SeqModel) -> int:
    """Trainable parameters; `parameters()` yields a tied weight once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_count(arch: str, src_vocab: int, tgt_vocab: int, params: dict[str, Any]) -> int:
    """Trainable parameters of the model `build_model` makes, built on the meta device: shapes only, so a
    paper-scale model is counted without allocating it."""
    import torch

    with torch.device("meta"):
        return count_parameters(build_model(arch, src_vocab, tgt_vocab, params))
