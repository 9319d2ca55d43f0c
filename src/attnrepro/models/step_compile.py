"""How the step-by-step decoders of the 2014 models run their teacher-forced loop (`train.step_compile`).

Training RNNencdec, RNNsearch, the diagonal, the Graves heads and MemN2N runs one decoder step per
target position in a Python loop. On a GPU at the papers' 80 sentences a step is a handful of small
kernels, so the loop is bound by launching them, not by arithmetic. Each model keeps the work of one
position in one method (its `teacher_step`) and fetches it through `step_function`, which returns:

- `none`: the method itself (eager PyTorch, one kernel per operation);
- `fused`: the method compiled by `torch.compile` (TorchInductor fuses the element-wise work of a
  step, the GRU gates, tanh, the masked softmax, into a few kernels; one compilation serves every
  position, and every batch shape after the second, through automatic dynamic shapes);
- `graphed`: compiled with `mode="reduce-overhead"`: each step is also captured in a CUDA graph and
  replayed, one launch per step instead of one per kernel (PyTorch's CUDA-graph trees record one graph
  per position and batch shape; `attnrepro.training.objective.pad_to_buckets` rounds batch shapes up
  so that few shapes occur). CUDA graphs need CUDA: elsewhere `graphed` runs as `fused`, and
  `set_step_compile` says so.

What a step computes does not change: compiled steps give the eager step's loss and gradients up to
float rounding (tests/test_step_compile.py states the tolerance). Only training compiles: without
gradients (validation loss, beam search, whose batches shrink from step to step) the steps run eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attnrepro.errors import ConfigError

STEP_COMPILE_MODES = ("none", "fused", "graphed")
_TORCH_MODE = {"fused": "default", "graphed": "reduce-overhead"}


def effective_mode(mode: str, device: torch.device) -> str:
    """The mode that runs on `device`: `graphed` needs CUDA graphs, so it is `fused` anywhere but on a GPU."""
    if mode not in STEP_COMPILE_MODES:
        raise ConfigError(f"train.step_compile: {mode!r} is not one of {', '.join(STEP_COMPILE_MODES)}")
    return "fused" if mode == "graphed" and device.type != "cuda" else mode


def set_step_compile(model: nn.Module, mode: str, device: torch.device) -> str:
    """Make `model`'s teacher-forced steps run in `mode` on `device`; returns the mode in effect, and says
    when it is not the one asked for. A model without a step loop (seq2seq's cuDNN LSTM, the Transformer)
    ignores it."""
    effective = effective_mode(mode, device)
    if effective != mode:
        print(f"train.step_compile: {mode} needs CUDA graphs, not available on {device.type}: running {effective}")
    object.__setattr__(model, "_step_compile", effective)  # a plain attribute: not in state_dict
    object.__setattr__(model, "_compiled_steps", {})
    return effective


def step_compile_of(model: nn.Module) -> str:
    return getattr(model, "_step_compile", "none")


def step_function(model: nn.Module, method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` (a bound method of `model` doing one position's work), as `model`'s step_compile runs it."""
    mode = step_compile_of(model)
    if mode == "none" or not torch.is_grad_enabled():
        return method
    compiled = model.__dict__["_compiled_steps"]
    name = method.__func__.__name__
    if name not in compiled:  # the unbound function: the cache holds no reference to the model
        compiled[name] = torch.compile(method.__func__, mode=_TORCH_MODE[mode], fullgraph=True)
    function = compiled[name]
    return lambda *args: function(model, *args)
