"""One training loop for every model: optimizer and schedule from config, token-bucketed
batches, data-parallel updates, atomic checkpoints and bit-identical resume.

Data order. Batches of epoch e come from `token_batches(..., seed=train.seed, epoch=e)`, so the
data position is just (epoch, batch index). An update takes the next `per_update` batches
(enough for `train.update_tokens`); rank r of N trains on batches r, r + N, ... of them
(DistributedSampler's split) and DDP sums the gradients, each micro-batch's summed token losses
divided by the update's target tokens or sentences (`train.loss_norm`), so one update is the
same on any number of ranks.

Resume (`training.resume`). `{out}/resume/last.pt` holds everything a bit-identical continuation
needs; rerunning the same command continues from it, and a rerun of another run sets it aside.

Early stopping (`train.patience` > 0). Every validation is recorded in the state; the weights of
the lowest validation loss are kept in `resume/best.pt` (last.pt is written right after, so the
two agree) and are what `checkpoint.pt` holds, with their step, `stopped_at` and `stop_reason`.
With `train.ema_decay` > 0 the weights validated, kept and translated are an exponential moving
average of the trained ones (`Trainer.evaluated`), updated after every step and resumed from last.pt.

Stops (`training.signals`). SIGTERM, SIGUSR1 or SIGINT makes the loop write a checkpoint at the end of the
current update and raise `Preempted`. A non-finite loss or weights stop training naming the step, before
the last good checkpoint is lost.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm import tqdm

from attnrepro.config import ModelConfig
from attnrepro.data.batching import RANK_GENERATORS, Corpus, collate, token_batches
from attnrepro.decoding.search import autocast
from attnrepro.errors import ConfigError, DataError, TrainingError
from attnrepro.models import build_model, count_parameters
from attnrepro.models.base import Seq2SeqModel
from attnrepro.models.step_compile import set_step_compile
from attnrepro.training.checkpoint import (  # noqa: F401  (build_from_checkpoint: re-exported for the CLI)
    atomic_save,
    build_from_checkpoint,
    keep_for_averaging,
    load_checkpoint,
    rng_state,
    run_fingerprint,
)
from attnrepro.training.distributed import Ranks, barrier, gather_to_all, pick_device, process_group, sum_over_ranks
from attnrepro.training.lock import hold_folder
from attnrepro.training.log import TrainLog, read_train_log, run_divergence
from attnrepro.training.objective import Objective
from attnrepro.training.pairs import describe_filter, filter_pairs, validation_pairs
from attnrepro.training.provenance import source_commit
from attnrepro.training.resume import restore, saved_state
from attnrepro.training.schedule import lr_at, make_optimizer
from attnrepro.training.signals import Preempted, stop_requests
from attnrepro.training.state import Cadence, TrainState
from attnrepro.training.validation import loss_fn, valid_loss  # noqa: F401  (loss_fn: re-exported)


def seed_everything(seed: int, rank: int) -> None:
    """Python's, numpy's and torch's generators of `rank` in the run of `seed`: a stream for each (seed, rank),
    apart from the batch orders' (seeding with seed + rank gave seed s's rank 1 seed s + 1's rank 0)."""
    words = np.random.SeedSequence(seed, spawn_key=(RANK_GENERATORS, rank)).generate_state(2)  # 2 x uint32
    value = int(words[0]) << 32 | int(words[1])
    random.seed(value)
    np.random.seed(words)
    torch.manual_seed(value)  # also seeds every CUDA device


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
    tokenizer: dict[str, str] | None = None,
) -> Path:
    """Train `mc` to `mc.train.max_steps`, resuming from `out_dir/resume/last.pt`; returns checkpoint.pt,
    which records `tokenizer` (`checkpoint.tokenizer_fingerprint`) for the verbs that load it.

    Rank 0 holds `out_dir`'s lock throughout (`training.lock`): a second training into the folder stops at once.
    Raises `Preempted` after checkpointing on SIGTERM/SIGUSR1/SIGINT, `TrainingError` on bad numbers.
    """
    ranks = ranks or Ranks()  # one process unless torchrun/srun started several
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # subnormal floats cost ~20x on x86 (the transducer's gradients): docs/training.md
    device = pick_device(mc.train.device, ranks)
    lock = hold_folder(out_dir, mc.name) if ranks.is_main else contextlib.nullcontext()
    with lock, process_group(ranks, device), stop_requests() as stop:
        vocab = (src_vocab, tgt_vocab)
        trainer = Trainer(mc, train_path, valid_path, vocab, out_dir, ranks, device, valid_bleu, tokenizer)
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
        tokenizer: dict[str, str] | None = None,
    ):
        self.mc, self.tc, self.vocab, self.out_dir = mc, mc.train, vocab, out_dir
        self.ranks, self.device, self.valid_bleu = ranks, device, valid_bleu
        self.resume_path = out_dir / "resume" / "last.pt"
        self.best_path = out_dir / "resume" / "best.pt"  # the best validation's weights (train.patience > 0)
        self.cap_loss: float | None = None  # the validation at max_steps when it is off the valid_every cadence
        self.tokenizer = tokenizer  # what checkpoint.pt records it was trained with
        if ranks.is_main:
            self.resume_path.parent.mkdir(parents=True, exist_ok=True)
        self.cadence = Cadence.of(self.tc)

        seed_everything(self.tc.seed, ranks.rank)  # DDP copies rank 0's initial weights to every rank
        self.model = build_model(mc.arch, *vocab, mc.params).to(device)
        self.optimizer = make_optimizer(self.model.parameters(), self.tc)
        self.d_model = getattr(self.model, "d_model", None)
        # Polyak averaging: avg <- d avg + (1 - d) weights after every update (the first copies them)
        decay = self.tc.ema_decay
        self.ema = AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(decay)) if decay > 0 else None
        self.evaluated = self.model if self.ema is None else self.ema.module  # validated, kept and translated

        vocab_from = f"the tokenizer in {tokenizer['folder']}" if tokenizer else "the tokenizer given"
        self.corpus = Corpus.load(train_path, vocab, vocab_from, tokenizer)
        self.valid = Corpus.load(valid_path, vocab, vocab_from, tokenizer)
        self.valid_pairs, valid_notes = validation_pairs(self.valid, valid_path, self.tc)
        for note in valid_notes if ranks.is_main else ():
            print(f"{mc.name}: {note}", flush=True)
        self.kept, kept_record = filter_pairs(self.corpus, self.tc)
        if ranks.is_main:
            print(f"{mc.name}: {describe_filter(kept_record)}", flush=True)
            (out_dir / "filter.json").write_text(json.dumps(kept_record, indent=1) + "\n")
        if len(self.kept) == 0:
            raise DataError(f"{train_path}: no training pair is left ({describe_filter(kept_record)})")
        self.per_update = self.tc.batches_per_update(ranks.world_size)
        data = (train_path, valid_path)
        self.fingerprint = run_fingerprint(mc, data, vocab, self.per_update) if ranks.is_main else {}  # into last.pt

        self.state = self._resume()
        self.log = TrainLog(self.resume_path.parent / "train_log.csv", out_dir / "tb", self.state.step, ranks.is_main)
        step_compile = set_step_compile(self.model, self.tc.step_compile, device)  # the mode in effect here
        bucket = step_compile == "graphed"  # CUDA graphs are recorded per batch shape: few shapes
        self.ddp = Objective(self.model, self.tc.label_smoothing, self.tc.loss_chunk_tokens, bucket)
        if ranks.world_size > 1:
            device_ids = [device.index] if device.type == "cuda" else None
            self.ddp = nn.parallel.DistributedDataParallel(self.ddp, device_ids=device_ids)
        self.forward = torch.compile(self.ddp) if self.tc.compile else self.ddp
        self.autocast = autocast(device, self.tc.precision)

    def _resume(self) -> TrainState:
        """The state of this run's `resume/last.pt` (weights, optimizer and generators restored), or a fresh one."""
        path, name, ranks = self.resume_path, self.mc.name, self.ranks
        saved = saved_state(path, self.fingerprint, self.tc.max_steps, name, ranks, self.device)
        if saved is None:
            if ranks.is_main:
                print(
                    f"{self.mc.name}: {self.mc.arch}, {count_parameters(self.model):,} parameters, on {self.device}",
                    flush=True,
                )
            return TrainState()
        return restore(saved, path, name, (self.model, self.optimizer, self.ema), ranks)

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
            self.corpus.src_lens[self.kept], self.corpus.tgt_lens[self.kept], self.tc.batch_tokens, self.tc.seed, epoch
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
        while not state.finished(self.tc.max_steps):
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
        lr = lr_at(self.tc, self.state.step, self.d_model, updates_per_epoch) * self.state.early.lr_scale
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
                    loss = self.forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out)
                # the batch's summed token losses / norm; DDP averages gradients over ranks: scale by world_size
                (loss * (batch.n_tgt_tokens / norm * ranks.world_size)).backward()
            loss_sum += float(loss.detach()) * share
        loss_value, stop_votes = sum_over_ranks([loss_sum, float(stop["requested"])], ranks, self.device)
        if not math.isfinite(loss_value):  # no update: last.pt stays the last good state
            raise TrainingError(f"{self.mc.name}: loss is {loss_value} at step {self.state.step}; {self.last_good()}")
        if self.tc.clip_norm > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.clip_norm)  # Bahdanau App. B.2.1: norm 1
        self.optimizer.step()
        if self.ema is not None:
            self.ema.update_parameters(self.model)
        src_tokens = sum(int(corpus.src_lens[b].sum()) for b in update)
        self.state.record_update(src_tokens, n_tgt, loss_value, _nonpad_fraction(corpus, update), started)
        self.bar.update(1)
        return lr, int(stop_votes)

    def maybe_validate(self) -> dict[str, float]:
        """When due: rank 0 measures the validation loss (and BLEU), every rank records it (early
        stopping) and an improvement's weights go to resume/best.pt. Returns rank 0's log columns."""
        step, main = self.state.step, self.ranks.is_main
        if not self.cadence.validates(step):
            return {}
        found = {}
        if main:
            found["valid_loss"] = self.measure_valid_loss()
            if self.valid_bleu is not None:
                found["valid_bleu"] = round(self.valid_bleu(self.evaluated), 2)
        (loss,) = sum_over_ranks([found.get("valid_loss", 0.0)], self.ranks, self.device)  # rank 0's, everywhere
        if not self.cadence.on_cadence(step):  # the cap: logged and a candidate for the weights translated,
            self.cap_loss = loss  # but not counted, so that a run continued to a larger cap is the run started so
            return found
        early = self.state.early
        early.record(loss, step, self.tc.min_delta, self.tc.patience, self.tc.plateau_decay, self.tc.plateau_decays)
        if main and self.tc.patience > 0 and early.best_step == step:
            atomic_save({"model": self.evaluated.state_dict(), "step": step, "valid_loss": loss}, self.best_path)
        return found

    def maybe_log(self, lr: float, valid: dict[str, float]) -> None:
        if not (self.ranks.is_main and self.cadence.logs(self.state.step)):
            return
        row = self.state.log_row(lr) | valid
        self.log.add(row)
        self.bar.set_postfix(loss=row["loss"], tok_s=row["tokens_per_s"], valid=row["valid_loss"])

    def maybe_checkpoint(self, stop_votes: int) -> None:
        """Checkpoint when due, at the end, or asked to stop; after a stop request, raise `Preempted`."""
        step, finished = self.state.step, self.state.finished(self.tc.max_steps)
        improved = self.tc.patience > 0 and self.state.early.best_step == step  # last.pt follows best.pt at once
        if self.cadence.checkpoints(step) or finished or improved or stop_votes > 0:
            self.checkpoint()
        if stop_votes > 0 and not finished:
            barrier(self.ranks)  # every rank leaves only once rank 0 has written last.pt
            self.log.close()
            raise Preempted(self.mc.name, step, self.resume_path)

    def checkpoint(self) -> None:
        """All ranks: check the weights and gather RNG states; rank 0 writes last.pt."""
        step = self.state.step
        if not _finite(self.model):
            raise TrainingError(f"{self.mc.name}: weights are not finite after step {step}; {self.last_good()}")
        rngs = gather_to_all(rng_state(), self.ranks)
        if not self.ranks.is_main:
            return
        self.log.flush()
        if self.tc.average_last > 1 and self.cadence.checkpoints(step):
            keep_for_averaging(self.model.state_dict(), step, self.resume_path.parent / "kept", self.tc.average_last)
        weights = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.ema is not None:
            weights["ema"] = self.ema.state_dict()
        atomic_save(weights | self.state.to_checkpoint(rngs) | {"fingerprint": self.fingerprint}, self.resume_path)

    def last_good(self) -> str:
        """Where a run stopped by a non-finite number can go on from: last.pt when one was written."""
        if self.resume_path.exists():
            step = load_checkpoint(self.resume_path, ("step",))["step"]
            return f"the last good checkpoint is {self.resume_path} (step {step}): lower train.lr and rerun"
        return "no checkpoint was written before it (training starts from step 0 when rerun): lower train.lr"

    def finish(self) -> Path:
        """Rank 0 writes checkpoint.pt and train_log.csv; see `final_checkpoint`."""
        final = self.out_dir / "checkpoint.pt"
        if self.ranks.is_main:
            ckpt = self.final_checkpoint()
            print(f"{self.mc.name}: stopped after step {ckpt['stopped_at']} ({ckpt['stop_reason']}); {final} holds"
                  f" the weights of step {ckpt['step']} (valid_loss {ckpt['valid_loss']})", flush=True)  # fmt: skip
            atomic_save(ckpt, final)
            shutil.copyfile(self.resume_path.parent / "train_log.csv", self.out_dir / "train_log.csv")
            diverged = run_divergence(read_train_log(self.out_dir / "train_log.csv"))
            if diverged:  # the log's last line; tables and figures mark the run too
                print(f"{self.mc.name}: WARNING: training diverged: {diverged}; its scores are not a result of "
                      "this model (lower train.lr)", flush=True)  # fmt: skip
        barrier(self.ranks)
        return final

    def final_checkpoint(self) -> dict[str, Any]:
        """The weights translated (with patience: the best validation's, from resume/best.pt, or the last
        step's when a run ended at a cap off the validation cadence and validated better there; else the
        last), their `step` and `valid_loss`, what rebuilds the model, and how training ended."""
        mc, early = self.mc, self.state.early
        weights, step, loss = self.evaluated.state_dict(), self.state.step, early.last_loss
        cap_loss = self.final_cap_loss()
        if cap_loss is not None:
            loss = cap_loss
        # best_step 0: no validation was a number (a diverged run): there are no best weights, the last are kept
        if self.tc.patience > 0 and early.best_step > 0 and (cap_loss is None or not cap_loss < early.best_loss):
            best = load_checkpoint(self.best_path, ("model", "step"))
            if best["step"] != early.best_step:
                raise DataError(f"{self.best_path} holds step {best['step']}, but the run's best validation was at"
                                f" step {early.best_step}; delete {self.best_path.parent} to train again")  # fmt: skip
            weights, step, loss = best["model"], early.best_step, early.best_loss
        return {"model": weights, "arch": mc.arch, "params": dict(mc.params), "src_vocab": self.vocab[0],
                "tgt_vocab": self.vocab[1], "step": step, "valid_loss": loss, "stopped_at": self.state.step,
                "stop_reason": "plateau" if early.stopped else "max_steps", "train": asdict(mc.train),
                "tokenizer": self.tokenizer, "fingerprint": self.fingerprint, "commit": source_commit()}  # fmt: skip

    def final_cap_loss(self) -> float | None:
        """The validation loss of the last weights when the run ended at max_steps off the cadence (measured
        again if a rerun found the run finished in resume/last.pt), else None."""
        if self.state.early.stopped or self.cadence.on_cadence(self.state.step):
            return None
        if self.cap_loss is None:
            self.cap_loss = self.measure_valid_loss()
        return self.cap_loss

    def measure_valid_loss(self) -> float:
        """The validation loss of the weights evaluated now, rounded as train_log.csv records it."""
        loss = valid_loss(self.evaluated, self.valid, self.tc.batch_tokens, self.device, self.autocast,
                          self.valid_pairs, self.tc.valid_average)  # fmt: skip
        return round(loss, 5)


def _nonpad_fraction(corpus: Corpus, update: list[np.ndarray]) -> float:
    """Mean over the update's batches of real / padded (source + target) tokens."""
    fractions = []
    for indices in update:
        src, tgt = corpus.src_lens[indices], corpus.tgt_lens[indices] + 1  # + <s> or </s>
        fractions.append(float(src.sum() + tgt.sum()) / (len(indices) * (int(src.max()) + int(tgt.max()))))
    return sum(fractions) / len(fractions)
