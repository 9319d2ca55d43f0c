"""The training loop's state as one object: where it is (step, epoch, batch position), what it
has trained on (tokens), the metric sums of the next log row, the validation record (early
stopping), and the random-number generators of every rank. `to_checkpoint()` /
`from_checkpoint()` are what `resume/last.pt` holds besides the model and optimizer, so a
resumed run continues bit-identically, early stopping included.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from attnrepro.config import TrainConfig


@dataclass(frozen=True)
class Cadence:
    """When the loop logs, validates and checkpoints: on its multiples, and always at the last step."""

    log_every: int
    valid_every: int
    checkpoint_every: int
    max_steps: int

    @classmethod
    def of(cls, tc: TrainConfig) -> Cadence:
        return cls(tc.log_every, tc.valid_every, tc.checkpoint_every, tc.max_steps)

    def validates(self, step: int) -> bool:
        return self.on_cadence(step) or step == self.max_steps

    def on_cadence(self, step: int) -> bool:
        """A validation every run with these settings makes, whatever its max_steps: the ones that count
        towards the plateau rule (the one at an off-cadence max_steps does not)."""
        return step % self.valid_every == 0

    def logs(self, step: int) -> bool:
        """A validation always gets its log row."""
        return step % self.log_every == 0 or self.validates(step)

    def checkpoints(self, step: int) -> bool:
        """A regular checkpoint (the ones kept for averaging); signals add others."""
        return step % self.checkpoint_every == 0 or step == self.max_steps


@dataclass
class MetricWindow:
    """Sums over the updates since the last log row.

    Loss and non-pad fraction are checkpointed, so the first row after a resume averages the
    same updates as an uninterrupted run's; tokens/s counts from the resume.
    """

    loss: float = 0.0  # sum over updates of the update's mean loss per target token
    nonpad: float = 0.0  # sum over updates of the mean real / padded token fraction
    steps: int = 0
    tokens: int = 0  # target tokens (not checkpointed)
    seconds: float = 0.0  # time spent in updates (not checkpointed)

    def add(self, loss: float, nonpad: float, tokens: int, seconds: float) -> None:
        self.loss += loss
        self.nonpad += nonpad
        self.steps += 1
        self.tokens += tokens
        self.seconds += seconds

    def to_checkpoint(self) -> dict[str, Any]:
        return {"loss": self.loss, "nonpad": self.nonpad, "steps": self.steps}

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any]) -> MetricWindow:
        return cls(loss=saved["loss"], nonpad=saved["nonpad"], steps=saved["steps"])


@dataclass
class EarlyStopping:
    """The validation record: the lowest loss and its step (the weights translated), and the plateau rule.

    A validation improves when its perplexity exp(loss) is below the reference's by at least
    `min_delta` of it, i.e. its loss at least -ln(1 - min_delta) nats below (0.01005 for 1 %): the
    same gain in the probability of each token whatever the loss, where a fraction of the loss
    itself asks ever less of a model as its loss nears 0. The reference is the loss of the last such
    validation (as PyTorch's ReduceLROnPlateau and Keras' EarlyStopping count). After `patience` validations in a row
    without one, the plateau is ended by a lower learning rate while `decays` remain (`lr_scale`,
    the factor on the schedule, is multiplied by `decay` and the count starts again), else
    training stops. Losses are compared as logged (5 decimals).
    """

    last_loss: float = math.inf  # of the last validation
    best_loss: float = math.inf
    best_step: int = 0
    reference: float = math.inf
    without_improvement: int = 0
    stopped: bool = False  # on a plateau (else training ran to max_steps)
    decays_done: int = 0  # plateaus ended by a lower learning rate
    lr_scale: float = 1.0  # decay ** decays_done

    def record(
        self, loss: float, step: int, min_delta: float, patience: int, decay: float = 1.0, decays: int = 0
    ) -> None:
        """Count a validation; with patience 0 the record is kept but never stops training."""
        self.last_loss = loss
        if loss < self.best_loss:
            self.best_loss, self.best_step = loss, step
        # perplexity down by >= min_delta, relative; strictly down, so that min_delta 0 stops on a flat loss
        if loss < self.reference and loss <= self.reference + math.log1p(-min_delta):
            self.reference, self.without_improvement = loss, 0
        else:
            self.without_improvement += 1
        plateau = 0 < patience <= self.without_improvement
        if plateau and self.decays_done < decays:  # a lower learning rate instead of the stop
            self.decays_done, self.lr_scale, self.without_improvement = self.decays_done + 1, self.lr_scale * decay, 0
            plateau = False
        self.stopped = plateau

    def to_checkpoint(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any]) -> EarlyStopping:
        return cls(**saved)


@dataclass
class TrainState:
    """Everything of a run that changes from update to update, except the weights and optimizer."""

    step: int = 0  # updates done
    epoch: int = 0  # batches of epoch e come from token_batches(seed=train.seed, epoch=e)
    position: int = 0  # batches of this epoch already trained on
    src_tokens: int = 0  # real tokens trained on so far (for FLOP estimates: 6 x params x tokens)
    tgt_tokens: int = 0
    window: MetricWindow = field(default_factory=MetricWindow)
    early: EarlyStopping = field(default_factory=EarlyStopping)
    rngs: list[dict[str, Any]] = field(default_factory=list)  # every rank's generators, as last saved

    def finished(self, max_steps: int) -> bool:
        return self.step >= max_steps or self.early.stopped

    def record_update(self, src_tokens: int, tgt_tokens: int, loss: float, nonpad: float, started: float) -> None:
        """Count an update that began at `started` (time.perf_counter) and just ended."""
        self.src_tokens += src_tokens
        self.tgt_tokens += tgt_tokens
        self.window.add(loss, nonpad, tgt_tokens, time.perf_counter() - started)

    def log_row(self, lr: float) -> dict[str, Any]:
        """The train_log.csv row of this step, from the window (which starts again)."""
        window, self.window = self.window, MetricWindow()
        return {
            "step": self.step,
            "epoch": self.epoch,
            "loss": round(window.loss / window.steps, 5),  # per target token, whatever train.loss_norm
            "lr": lr,
            "tokens_per_s": round(window.tokens / max(window.seconds, 1e-9), 1),
            "nonpad_fraction": round(window.nonpad / window.steps, 4),
            "valid_loss": "",
            "src_tokens": self.src_tokens,
            "tgt_tokens": self.tgt_tokens,
            "valid_bleu": "",
        }

    def to_checkpoint(self, rngs: list[dict[str, Any]]) -> dict[str, Any]:
        """What last.pt holds of the state; `rngs`: every rank's generators now (gather_to_all)."""
        return {
            "step": self.step,
            "epoch": self.epoch,
            "position": self.position,
            "tokens_seen": {"src": self.src_tokens, "tgt": self.tgt_tokens},
            "log_window": self.window.to_checkpoint(),
            "early_stopping": self.early.to_checkpoint(),
            "rng": rngs,
        }

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any]) -> TrainState:
        return cls(
            step=saved["step"],
            epoch=saved["epoch"],
            position=saved["position"],
            src_tokens=saved["tokens_seen"]["src"],
            tgt_tokens=saved["tokens_seen"]["tgt"],
            window=MetricWindow.from_checkpoint(saved["log_window"]),
            early=EarlyStopping.from_checkpoint(saved["early_stopping"]),
            rngs=list(saved["rng"]),
        )
