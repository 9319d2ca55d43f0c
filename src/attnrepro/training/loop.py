"""One training loop for every model: optimizer and schedule from config, token-bucketed
batches, data-parallel updates, atomic checkpoints and bit-identical resume.

Data order. Batches of epoch e come from `token_batches(..., seed=train.seed + e)`, so the
data position is just (epoch, batch index). An update takes the next `per_update` batches
(enough for `train.update_tokens`); rank r of N trains on batches r, r + N, ... of them
(DistributedSampler's split) and DDP sums the gradients, each micro-batch's summed token losses
divided by the update's target tokens or sentences (`train.loss_norm`), so one update is the
same on any number of ranks.

Resume. `{out}/resume/` is not a declared Snakemake output, so a failed job's cleanup never
deletes it: `last.pt` holds model, optimizer and the `TrainState` (step, data position, tokens
seen, the log window, every rank's RNG state); `train_log.csv` the log rows up to that step.
Rerunning the same command continues bit-identically. `last.pt` also holds the fingerprint of
its run (`checkpoint.run_fingerprint`): a rerun whose model, train settings, data, vocabulary or
batches per update differ, or whose max_steps is below the saved step, sets `resume/` aside as
`resume.stale-<time>/` and trains from step 0, saying which keys differed.

Stops. SIGTERM or SIGUSR1 (what SLURM sends before a time limit or a preemption) makes the
loop write a checkpoint at the end of the current update and exit with
`PREEMPTED_EXIT_CODE`. A non-finite loss, or non-finite weights at a checkpoint, stops
training naming the step, before anything overwrites the last good checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from attnrepro.config import ModelConfig, TrainConfig
from attnrepro.data.batching import Corpus, collate, token_batches
from attnrepro.errors import ConfigError, DataError
from attnrepro.models import Seq2SeqModel, build_model, count_parameters
from attnrepro.training.checkpoint import (  # noqa: F401  (build_from_checkpoint: re-exported for the CLI)
    RESUME_KEYS,
    atomic_save,
    build_from_checkpoint,
    fingerprint_differences,
    keep_for_averaging,
    load_checkpoint,
    rng_state,
    run_fingerprint,
    set_aside,
    set_rng_state,
)
from attnrepro.training.distributed import Ranks, barrier, gather_to_all, pick_device, process_group, sum_over_ranks
from attnrepro.training.log import TrainLog
from attnrepro.training.state import Cadence, TrainState
from attnrepro.training.validation import loss_fn, scorable_pairs, valid_loss


class Preempted(Exception):
    """SIGTERM/SIGUSR1 arrived; the checkpoint of `step` is written."""

    def __init__(self, name: str, step: int, path: Path):
        super().__init__(f"{name}: stopped by a signal after step {step}; resume state in {path}")
        self.step = step


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


def batches_per_update(tc: TrainConfig, world_size: int) -> int:
    """Batches in one update: one per rank, or enough for `update_tokens`, rounded up to a multiple of ranks."""
    wanted = max(1, math.ceil(tc.update_tokens / tc.batch_tokens))
    return math.ceil(wanted / world_size) * world_size


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


@contextlib.contextmanager
def stop_requests() -> Iterator[dict[str, bool]]:
    """{'requested': bool} that turns True on SIGTERM or SIGUSR1 while training runs."""
    flag = {"requested": False}
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield flag
        return

    def handler(signum, frame):
        flag["requested"] = True
        print(f"received {signal.Signals(signum).name}: checkpointing at the end of this update", flush=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def filter_pairs(corpus: Corpus, tc: TrainConfig) -> tuple[np.ndarray, dict[str, Any]]:
    """Indices of the pairs trained on, and a record of how many pairs each filter removed.

    Bahdanau's -30/-50 models were trained on sentence pairs of at most 30/50 words on both sides.
    A pair can fail several filters: each count is of the pairs that fail that one.
    """
    src, tgt = corpus.src_lens, corpus.tgt_lens
    failed = {
        "empty_source": src < 1,
        "empty_target": tgt < 1,
        "long_source": src > tc.max_src_len,
        "long_target": tgt > tc.max_tgt_len,
    }
    kept = np.flatnonzero(~np.logical_or.reduce(list(failed.values())))
    record = {"pairs": len(src), "kept": len(kept), "max_src_len": tc.max_src_len, "max_tgt_len": tc.max_tgt_len}
    return kept, record | {"removed": {name: int(mask.sum()) for name, mask in failed.items()}}


def describe_filter(record: dict[str, Any]) -> str:
    """One line for the train log: pairs kept and removed by each filter."""
    removed = record["removed"]
    return (
        f"{record['kept']:,} of {record['pairs']:,} training pairs kept; removed: {removed['empty_source']:,} with an"
        f" empty source, {removed['empty_target']:,} with an empty target, {removed['long_source']:,} with more than"
        f" {record['max_src_len']} source tokens, {removed['long_target']:,} with more than {record['max_tgt_len']}"
        " target tokens (a pair can fail several)"
    )


def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _finite(model: nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def train(
    mc: ModelConfig,
    train_path: Path,
    valid_path: Path,
    src_vocab: int,
    tgt_vocab: int,
    out_dir: Path,
    threads: int = 1,
    progress: bool = True,
    ranks: Ranks | None = None,
    valid_bleu: Callable[[Seq2SeqModel], float] | None = None,
) -> Path:
    """Train `mc` to `mc.train.max_steps`, resuming from `out_dir/resume/last.pt`; returns checkpoint.pt.

    Raises `Preempted` after checkpointing on SIGTERM/SIGUSR1, FloatingPointError on bad numbers.
    """
    ranks = ranks or Ranks()  # one process unless torchrun/srun started several
    torch.set_num_threads(threads)
    device = pick_device(mc.train.device, ranks)
    with process_group(ranks, device), stop_requests() as stop:
        trainer = Trainer(mc, train_path, valid_path, (src_vocab, tgt_vocab), out_dir, ranks, device, valid_bleu)
        return trainer.run(stop, progress)


class Trainer:
    """One model's training: set up (model, data, resumed state), then one update at a time."""

    def __init__(
        self,
        mc: ModelConfig,
        train_path: Path,
        valid_path: Path,
        vocab: tuple[int, int],
        out_dir: Path,
        ranks: Ranks,
        device: torch.device,
        valid_bleu: Callable[[Seq2SeqModel], float] | None,
    ):
        self.mc, self.tc, self.vocab, self.out_dir = mc, mc.train, vocab, out_dir
        self.ranks, self.device, self.valid_bleu = ranks, device, valid_bleu
        self.resume_path = out_dir / "resume" / "last.pt"
        if ranks.is_main:
            self.resume_path.parent.mkdir(parents=True, exist_ok=True)
        self.cadence = Cadence.of(self.tc)

        seed_everything(self.tc.seed + ranks.rank)  # DDP copies rank 0's initial weights to every rank
        self.model = build_model(mc.arch, *vocab, mc.params).to(device)
        self.optimizer = make_optimizer(self.model.parameters(), self.tc)
        self.d_model = getattr(self.model, "d_model", None)

        self.corpus = Corpus.load(train_path)
        self.valid = Corpus.load(valid_path)
        self.valid_pairs, valid_note = scorable_pairs(self.valid, valid_path)
        if valid_note and ranks.is_main:
            print(valid_note, flush=True)
        self.kept, kept_record = filter_pairs(self.corpus, self.tc)
        if ranks.is_main:
            print(f"{mc.name}: {describe_filter(kept_record)}", flush=True)
            (out_dir / "filter.json").write_text(json.dumps(kept_record, indent=1) + "\n")
        if len(self.kept) == 0:
            raise DataError(f"{train_path}: no training pair is left ({describe_filter(kept_record)})")
        self.per_update = batches_per_update(self.tc, ranks.world_size)
        fingerprint = run_fingerprint(mc, (train_path, valid_path), vocab, self.per_update) if ranks.is_main else {}
        self.fingerprint = fingerprint  # written into last.pt by rank 0

        self.state = self._resume()
        self.log = TrainLog(self.resume_path.parent / "train_log.csv", out_dir / "tb", self.state.step, ranks.is_main)
        self.ddp = self.model
        if ranks.world_size > 1:
            device_ids = [device.index] if device.type == "cuda" else None
            self.ddp = nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        self.forward = torch.compile(self.ddp) if self.tc.compile else self.ddp
        self.autocast = _autocast(device, self.tc.precision)

    def _saved_state(self) -> dict[str, Any] | None:
        """`resume/last.pt` if this run wrote it (same fingerprint, not past max_steps), else None.

        Rank 0 decides; another run's state is set aside (never deleted), with a line saying why."""
        main, path = self.ranks.is_main, self.resume_path
        saved, differences = None, []
        if main and path.exists():
            saved = load_checkpoint(path, RESUME_KEYS)
            differences = fingerprint_differences(saved.get("fingerprint"), self.fingerprint)
            if saved["step"] > self.tc.max_steps:
                differences.append(f"train.max_steps: {self.tc.max_steps} is below its step {saved['step']}")
        (stale,) = sum_over_ranks([float(bool(differences))], self.ranks, self.device)
        if stale and main:
            aside = set_aside(path.parent)
            print(f"{self.mc.name}: {path} is another run's state ({'; '.join(differences)}); "
                  f"moved to {aside}, training from step 0", flush=True)  # fmt: skip
        barrier(self.ranks)  # no rank looks for last.pt before rank 0 has set it aside
        if stale or not path.exists():
            return None
        return saved if main else load_checkpoint(path, RESUME_KEYS)

    def _resume(self) -> TrainState:
        """The state of this run's `resume/last.pt` (weights, optimizer and generators restored), or a fresh one."""
        main, path = self.ranks.is_main, self.resume_path
        saved = self._saved_state()
        if saved is None:
            if main:
                print(f"{self.mc.name}: {self.mc.arch}, {count_parameters(self.model):,} parameters", flush=True)
            return TrainState()
        try:  # the fingerprint matched: only a change of the model's code can make this fail
            self.model.load_state_dict(saved["model"])
            self.optimizer.load_state_dict(saved["optimizer"])
        except (RuntimeError, ValueError, KeyError) as err:
            raise DataError(f"{path}: does not fit model {self.mc.name} ({err}); delete {path.parent} to start over"
                            ) from err  # fmt: skip
        state = TrainState.from_checkpoint(saved)
        if len(state.rngs) == self.ranks.world_size:
            set_rng_state(state.rngs[self.ranks.rank])
        elif main:
            print(f"{path}: saved by {len(state.rngs)} rank(s), now {self.ranks.world_size}: not bit-exact")
        if main:
            print(f"resuming {self.mc.name} from step {state.step} (epoch {state.epoch}, batch {state.position})",
                  flush=True)  # fmt: skip
        return state

    def run(self, stop: dict[str, bool], progress: bool) -> Path:
        """Train to max_steps: each update, then its validation, log row and checkpoint as they fall due."""
        self.model.train()
        self.bar = tqdm(total=self.tc.max_steps, initial=self.state.step, desc=self.mc.name,
                        disable=not (progress and self.ranks.is_main), mininterval=5)  # fmt: skip
        for update, updates_per_epoch in self.updates():
            lr, stop_votes = self.run_update(update, updates_per_epoch, stop)
            self.maybe_log(lr, self.maybe_validate())
            self.maybe_checkpoint(stop_votes)
        self.bar.close()
        self.log.close()
        return self.finish()

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        batches = token_batches(
            self.corpus.src_lens[self.kept], self.corpus.tgt_lens[self.kept], self.tc.batch_tokens, self.tc.seed + epoch
        )
        if len(batches) < self.per_update:
            raise ConfigError(
                f"models.{self.mc.name}.train.update_tokens={self.tc.update_tokens} needs {self.per_update} batches"
                f" per update on {self.ranks.world_size} rank(s), but an epoch has only {len(batches)}"
            )
        return batches

    def updates(self) -> Iterator[tuple[list[np.ndarray], int]]:
        """Each update's batches (corpus indices) and its epoch's number of updates; advances the state.

        An epoch's last batches that cannot fill an update are skipped.
        """
        state = self.state
        batches = self.epoch_batches(state.epoch)
        while state.step < self.tc.max_steps:
            if state.position + self.per_update > len(batches):
                state.epoch, state.position = state.epoch + 1, 0
                batches = self.epoch_batches(state.epoch)
            update = [self.kept[b] for b in batches[state.position : state.position + self.per_update]]
            state.position += self.per_update
            state.step += 1
            yield update, len(batches) // self.per_update

    def run_update(self, update: list[np.ndarray], updates_per_epoch: int, stop: dict[str, bool]) -> tuple[float, int]:
        """One optimizer step over the update's batches, this rank's share of them; returns (lr, stop votes)."""
        started, ranks, corpus = time.perf_counter(), self.ranks, self.corpus
        lr = lr_at(self.tc, self.state.step, self.d_model, updates_per_epoch)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        n_tgt = sum(int(corpus.tgt_lens[b].sum()) + len(b) for b in update)  # + </s> per sentence
        # the update's summed token losses over its sentences (Sutskever 2014, §3.4; dl4mt) or its tokens (Vaswani)
        norm = n_tgt if self.tc.loss_norm == "token" else sum(len(b) for b in update)
        mine = update[ranks.rank :: ranks.world_size]
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0  # this rank's share of the update's mean loss per target token
        for i, indices in enumerate(mine):
            batch = collate(corpus, indices).to(self.device)
            share = batch.n_tgt_tokens / n_tgt  # of the logged loss, per target token under either norm
            sync = i == len(mine) - 1 or ranks.world_size == 1
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                with self.autocast:
                    logits = self.forward(batch.src, batch.src_mask, batch.tgt_in)
                    loss = loss_fn(logits, batch.tgt_out, self.tc.label_smoothing)
                # the batch's summed token losses / norm; DDP averages gradients over ranks: scale by world_size
                (loss * (batch.n_tgt_tokens / norm * ranks.world_size)).backward()
            loss_sum += float(loss.detach()) * share
        loss_value, stop_votes = sum_over_ranks([loss_sum, float(stop["requested"])], ranks, self.device)
        if not math.isfinite(loss_value):  # no update: last.pt stays the last good state
            raise FloatingPointError(
                f"{self.mc.name}: loss is {loss_value} at step {self.state.step}; "
                f"the last good checkpoint is {self.resume_path}"
            )
        if self.tc.clip_norm > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.clip_norm)  # Bahdanau App. B.2.1: norm 1
        self.optimizer.step()
        src_tokens = sum(int(corpus.src_lens[b].sum()) for b in update)
        self.state.record_update(src_tokens, n_tgt, loss_value, _nonpad_fraction(corpus, update), started)
        self.bar.update(1)
        return lr, int(stop_votes)

    def maybe_validate(self) -> dict[str, float]:
        """Rank 0's validation loss (and BLEU) when due: {} otherwise, and on other ranks."""
        if not (self.ranks.is_main and self.cadence.validates(self.state.step)):
            return {}
        found = {"valid_loss": round(valid_loss(self.model, self.valid, self.tc.batch_tokens, self.device,
                                                self.autocast, self.valid_pairs), 5)}  # fmt: skip
        if self.valid_bleu is not None:
            found["valid_bleu"] = round(self.valid_bleu(self.model), 2)
        return found

    def maybe_log(self, lr: float, valid: dict[str, float]) -> None:
        if not (self.ranks.is_main and self.cadence.logs(self.state.step)):
            return
        row = self.state.log_row(lr) | valid
        self.log.add(row)
        self.bar.set_postfix(loss=row["loss"], tok_s=row["tokens_per_s"], valid=row["valid_loss"])

    def maybe_checkpoint(self, stop_votes: int) -> None:
        """Checkpoint when due or asked to stop; after a stop request, raise `Preempted` on every rank."""
        step = self.state.step
        if self.cadence.checkpoints(step) or stop_votes > 0:
            self.checkpoint()
        if stop_votes > 0 and step < self.tc.max_steps:
            barrier(self.ranks)  # every rank leaves only once rank 0 has written last.pt
            self.log.close()
            raise Preempted(self.mc.name, step, self.resume_path)

    def checkpoint(self) -> None:
        """All ranks: check the weights and gather RNG states; rank 0 writes last.pt."""
        step = self.state.step
        if not _finite(self.model):
            raise FloatingPointError(
                f"{self.mc.name}: weights are not finite after step {step}; the last good checkpoint is "
                f"{self.resume_path}"
            )
        rngs = gather_to_all(rng_state(), self.ranks)
        if not self.ranks.is_main:
            return
        self.log.flush()
        if self.tc.average_last > 1 and self.cadence.checkpoints(step):
            keep_for_averaging(self.model.state_dict(), step, self.resume_path.parent / "kept", self.tc.average_last)
        weights = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        atomic_save(weights | self.state.to_checkpoint(rngs) | {"fingerprint": self.fingerprint}, self.resume_path)

    def finish(self) -> Path:
        """Rank 0 writes checkpoint.pt (weights and what rebuilds the model) and train_log.csv."""
        final = self.out_dir / "checkpoint.pt"
        if self.ranks.is_main:
            mc = self.mc
            atomic_save(
                {"model": self.model.state_dict(), "arch": mc.arch, "params": dict(mc.params),
                 "src_vocab": self.vocab[0], "tgt_vocab": self.vocab[1], "step": self.state.step,
                 "train": asdict(mc.train)},
                final,
            )  # fmt: skip
            shutil.copyfile(self.resume_path.parent / "train_log.csv", self.out_dir / "train_log.csv")
        barrier(self.ranks)
        return final


def _nonpad_fraction(corpus: Corpus, update: list[np.ndarray]) -> float:
    """Mean over the update's batches of real / padded (source + target) tokens."""
    fractions = []
    for indices in update:
        src, tgt = corpus.src_lens[indices], corpus.tgt_lens[indices] + 1  # + <s> or </s>
        fractions.append(float(src.sum() + tgt.sum()) / (len(indices) * (int(src.max()) + int(tgt.max()))))
    return sum(fractions) / len(fractions)
