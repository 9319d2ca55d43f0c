"""Models by `arch` name: build one from the registry (`attnrepro.archs`, which holds every parameter's
default), count its parameters.

Importing this package loads no torch: the workflow asks `has_attention` while Snakemake parses
the DAG. `build_model` imports a model's module when it is called; code that needs the model
interface itself imports `Seq2SeqModel` from `attnrepro.models.base`.
"""

from __future__ import annotations

import functools
import json
from importlib import import_module
from typing import TYPE_CHECKING, Any

from attnrepro.archs import ATTENTION_ARCHS, REGISTRY, STEP_LOOP_ARCHS, Arch
from attnrepro.errors import ConfigError

if TYPE_CHECKING:
    from attnrepro.models.base import Seq2SeqModel

__all__ = [
    "ATTENTION_ARCHS", "REGISTRY", "STEP_LOOP_ARCHS", "Arch",
    "build_model", "count_parameters", "has_attention", "model_class", "parameter_count", "tiny_model",
]  # fmt: skip


def has_attention(arch: str) -> bool:
    """Whether models of `arch` return attention weights (the alignment figures draw them)."""
    return _arch(arch).attention


def model_class(arch: str) -> type[Seq2SeqModel]:
    """The class of `arch`, its module imported now (and torch with it)."""
    spec = _arch(arch)
    return getattr(import_module(f"attnrepro.models.{spec.module}"), spec.cls)


def build_model(arch: str, src_vocab: int, tgt_vocab: int, params: dict[str, Any]) -> Seq2SeqModel:
    """A model of `arch` with `params` over the registry's defaults (the constructors have none of their own)."""
    spec = _arch(arch)
    unknown = sorted(set(params) - set(spec.params))
    if unknown:  # a validated config never has one; a checkpoint or a caller might
        raise ConfigError(f"params.{unknown[0]}: not a parameter of arch {arch} ({', '.join(spec.params)})")
    return model_class(arch)(src_vocab, tgt_vocab, **(spec.defaults | params))


def tiny_model(arch: str, src_vocab: int, tgt_vocab: int, seed: int = 0) -> Seq2SeqModel:
    """`arch` at its registry's tiny sizes, in eval mode, each weight moved by N(0, 0.5^2) so that attention is not
    uniform (v_a starts at 0 in the paper): what the shared tests and the benchmarks' self-checks build."""
    import torch

    torch.manual_seed(seed)
    model = build_model(arch, src_vocab, tgt_vocab, _arch(arch).tiny)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return model.eval()


def count_parameters(model: Seq2SeqModel) -> int:
    """Trainable parameters; `parameters()` yields a tied weight once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _arch(arch: str) -> Arch:
    if arch not in REGISTRY:
        raise ValueError(f"unknown arch {arch!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[arch]


def parameter_count(arch: str, src_vocab: int, tgt_vocab: int, params: dict[str, Any]) -> int:
    """Trainable parameters of the model `build_model` makes, built on the meta device without initialising
    its weights: shapes only, so a paper-scale model is counted without allocating it. Counted once per
    process for each (arch, vocabularies, params): the workflow asks for every train job's runtime twice
    while a dry run plans the DAG (docs/measurements.md, "Dry run")."""
    return _parameter_count(arch, src_vocab, tgt_vocab, json.dumps(params, sort_keys=True))


@functools.cache
def _parameter_count(arch: str, src_vocab: int, tgt_vocab: int, params_json: str) -> int:
    """parameter_count of params as JSON (config values are YAML's: JSON types), the hashable cache key."""
    import torch
    from torch.overrides import TorchFunctionMode

    class SkipInit(TorchFunctionMode):
        """torch.nn.init's functions leave their tensor as it is: a count needs shapes, not values, and on
        meta tensors they go through Python references that import torch._dynamo (~1 s)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__module__", None) == "torch.nn.init":
                return args[0] if args else kwargs["tensor"]
            return func(*args, **(kwargs or {}))

    with torch.device("meta"), SkipInit():
        return count_parameters(build_model(arch, src_vocab, tgt_vocab, json.loads(params_json)))
