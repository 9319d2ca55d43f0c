"""One training loop for every model: optimizer and schedule from config, token-bucketed
batches, data-parallel updates, atomic checkpoints and bit-identical resume.

Data order. Batches of epoch e come from `token_batches(..., seed=train.seed + e)`, so the
data position is just (epoch, batch index). An update takes the next `per_update` batches
(enough for `train.update_tokens`); rank r of N trains on batches r, r + N, ... of them
(DistributedSampler's split) and DDP sums the gradients, each micro-batch weighted by its
share of the update's target tokens, so one update is the same on any number of ranks.

Resume. `{out}/resume/` is not a declared Snakemake output, so a failed job's cleanup never
deletes it: `last.pt` holds model, optimizer, step, data position, every RNG state of every
rank and the log window; `train_log.csv` the log rows up to that step. Rerunning the same
command continues bit-identically.

Stops. SIGTERM or SIGUSR1 (what SLURM sends before a time limit or a preemption) makes the
loop write a checkpoint at the end of the current update and exit with
`PREEMPTED_EXIT_CODE`. A non-finite loss, or non-finite weights at a checkpoint, stops
training naming the step, before anything overwrites the last good checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from attnrepro.config import ModelConfig, TrainConfig
from attnrepro.data.batching import Corpus, collate, token_batches
from attnrepro.models import build_model, count_parameters
from attnrepro.models.base import Seq2SeqModel
from attnrepro.training.checkpoint import (  # noqa: F401  (build_from_checkpoint: re-exported for the CLI)
    RESUME_KEYS,
    atomic_save,
    build_from_checkpoint,
    keep_for_averaging,
    load_checkpoint,
    rng_state,
    set_rng_state,
)
from attnrepro.training.distributed import Ranks, barrier, gather_to_all, pick_device, process_group, sum_over_ranks
from attnrepro.training.log import TrainLog
from attnrepro.training.validation import loss_fn, valid_loss


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
    return torch.optim.SGD(params, lr=tc.lr)


def lr_at(tc: TrainConfig, step: int, d_model: int | None = None, steps_per_epoch: int | None = None) -> float:
    """Learning rate of update number `step` (1-based)."""
    if tc.schedule == "inverse_sqrt":
        if d_model is None:
            raise ValueError("schedule inverse_sqrt needs a model with a d_model")
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


def _filter(corpus: Corpus, max_len: int) -> np.ndarray:
    """Indices of pairs with 1..max_len source tokens and a non-empty target.

    Bahdanau's -30/-50 models were trained on sentence pairs of at most 30/50 words.
    """
    keep = (corpus.src_lens >= 1) & (corpus.src_lens <= max_len) & (corpus.tgt_lens >= 1)
    return np.flatnonzero(keep)


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
        return _train(
            mc, train_path, valid_path, src_vocab, tgt_vocab, out_dir, progress, ranks, device, stop, valid_bleu
        )


def _train(mc, train_path, valid_path, src_vocab, tgt_vocab, out_dir, progress, ranks, device, stop, valid_bleu):
    tc = mc.train
    main = ranks.is_main
    resume_dir = out_dir / "resume"
    resume_path = resume_dir / "last.pt"
    if main:
        resume_dir.mkdir(parents=True, exist_ok=True)

    seed_everything(tc.seed + ranks.rank)  # DDP copies rank 0's initial weights to every rank
    model = build_model(mc.arch, src_vocab, tgt_vocab, mc.params).to(device)
    optimizer = make_optimizer(model.parameters(), tc)
    d_model = getattr(model, "d_model", None)

    corpus = Corpus.load(train_path)
    valid = Corpus.load(valid_path)
    kept = _filter(corpus, tc.max_src_len)
    if len(kept) == 0:
        raise ValueError(f"{train_path}: no training pair has <= {tc.max_src_len} source tokens")
    src_lens, tgt_lens = corpus.src_lens[kept], corpus.tgt_lens[kept]
    per_update = batches_per_update(tc, ranks.world_size)

    def epoch_batches(epoch: int) -> list[np.ndarray]:
        batches = token_batches(src_lens, tgt_lens, tc.batch_tokens, seed=tc.seed + epoch)
        if len(batches) < per_update:
            raise ValueError(
                f"{mc.name}: train.update_tokens={tc.update_tokens} needs {per_update} batches per update"
                f" on {ranks.world_size} rank(s), but an epoch has only {len(batches)}"
            )
        return batches

    step, epoch, position = 0, 0, 0
    seen = {"src": 0, "tgt": 0}  # real tokens trained on so far (for FLOP estimates: 6 x params x tokens)
    window = {"tokens": 0, "nonpad": 0.0, "loss": 0.0, "steps": 0}  # sums since the last log row
    if resume_path.exists():
        state = load_checkpoint(resume_path, RESUME_KEYS)
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as err:
            raise ValueError(f"{resume_path}: does not fit model {mc.name} ({err})") from err
        step, epoch, position = state["step"], state["epoch"], state["position"]
        seen, window = dict(state["tokens_seen"]), dict(state["log_window"])
        window["tokens"] = 0  # tokens/s of the first row after a resume counts from the resume
        if len(state["rng"]) == ranks.world_size:
            set_rng_state(state["rng"][ranks.rank])
        elif main:
            print(f"{resume_path}: saved by {len(state['rng'])} rank(s), now {ranks.world_size}: not bit-exact")
        if main:
            print(f"resuming {mc.name} from step {step} (epoch {epoch}, batch {position})", flush=True)
    elif main:
        print(f"{mc.name}: {mc.arch}, {count_parameters(model):,} parameters, {len(kept):,} training pairs", flush=True)

    log = TrainLog(resume_dir / "train_log.csv", out_dir / "tb", step, enabled=main)
    ddp = model
    if ranks.world_size > 1:
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    forward = torch.compile(ddp) if tc.compile else ddp
    autocast = _autocast(device, tc.precision)

    def checkpoint() -> None:
        """All ranks: check the weights and gather RNG states; rank 0 writes."""
        if not _finite(model):
            raise FloatingPointError(
                f"{mc.name}: weights are not finite after step {step}; the last good checkpoint is {resume_path}"
            )
        rngs = gather_to_all(rng_state(), ranks)
        if not main:
            return
        log.flush()
        regular = step % tc.checkpoint_every == 0 or step == tc.max_steps
        if tc.average_last > 1 and regular:
            keep_for_averaging(model.state_dict(), step, resume_dir / "kept", tc.average_last)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "epoch": epoch}
        state |= {"position": position, "tokens_seen": dict(seen), "log_window": dict(window), "rng": rngs}
        atomic_save(state, resume_path)

    model.train()
    batches = epoch_batches(epoch)
    window_start = time.perf_counter()
    bar = tqdm(total=tc.max_steps, initial=step, desc=mc.name, disable=not (progress and main), mininterval=5)
    while step < tc.max_steps:
        if position + per_update > len(batches):  # an epoch's last batches that cannot fill an update are skipped
            epoch, position = epoch + 1, 0
            batches = epoch_batches(epoch)
        update = [kept[b] for b in batches[position : position + per_update]]
        position += per_update
        step += 1
        lr = lr_at(tc, step, d_model, len(batches) // per_update)
        for group in optimizer.param_groups:
            group["lr"] = lr

        n_tgt = sum(int(corpus.tgt_lens[b].sum()) + len(b) for b in update)  # + </s> per sentence
        mine = update[ranks.rank :: ranks.world_size]
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0  # this rank's share of the update's mean loss per target token
        for i, indices in enumerate(mine):
            batch = collate(corpus, indices).to(device)
            share = batch.n_tgt_tokens / n_tgt
            sync = i == len(mine) - 1 or ranks.world_size == 1
            with contextlib.nullcontext() if sync else ddp.no_sync():
                with autocast:
                    loss = loss_fn(forward(batch.src, batch.src_mask, batch.tgt_in), batch.tgt_out, tc.label_smoothing)
                # DDP averages gradients over ranks: scale by world_size so they sum instead
                (loss * (share * ranks.world_size)).backward()
            loss_sum += float(loss.detach()) * share
        loss_value, stop_votes = sum_over_ranks([loss_sum, float(stop["requested"])], ranks, device)
        if not math.isfinite(loss_value):  # no update: last.pt stays the last good state
            raise FloatingPointError(
                f"{mc.name}: loss is {loss_value} at step {step}; the last good checkpoint is {resume_path}"
            )
        if tc.clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm)  # Bahdanau App. B.2.1: norm 1
        optimizer.step()

        src_tokens = sum(int(corpus.src_lens[b].sum()) for b in update)
        seen["src"] += src_tokens
        seen["tgt"] += n_tgt
        window["tokens"] += n_tgt
        window["nonpad"] += _nonpad_fraction(corpus, update)
        window["loss"] += loss_value
        window["steps"] += 1
        bar.update(1)
        if main and (step % tc.log_every == 0 or step == tc.max_steps or step % tc.valid_every == 0):
            elapsed = time.perf_counter() - window_start
            row = {
                "step": step,
                "epoch": epoch,
                "loss": round(window["loss"] / window["steps"], 5),
                "lr": lr,
                "tokens_per_s": round(window["tokens"] / elapsed, 1),
                "nonpad_fraction": round(window["nonpad"] / window["steps"], 4),
                "valid_loss": "",
                "src_tokens": seen["src"],
                "tgt_tokens": seen["tgt"],
                "valid_bleu": "",
            }
            if step % tc.valid_every == 0 or step == tc.max_steps:
                row["valid_loss"] = round(valid_loss(model, valid, tc.batch_tokens, device, autocast), 5)
                if valid_bleu is not None:
                    row["valid_bleu"] = round(valid_bleu(model), 2)
            log.add(row)
            bar.set_postfix(loss=row["loss"], tok_s=row["tokens_per_s"], valid=row["valid_loss"])
            window = {"tokens": 0, "nonpad": 0.0, "loss": 0.0, "steps": 0}
            window_start = time.perf_counter()
        if step % tc.checkpoint_every == 0 or step == tc.max_steps or stop_votes > 0:
            checkpoint()
        if stop_votes > 0 and step < tc.max_steps:
            barrier(ranks)  # every rank leaves only once rank 0 has written last.pt
            log.close()
            raise Preempted(mc.name, step, resume_path)
    bar.close()
    log.close()
    if main:
        final = {
            "model": model.state_dict(),
            "arch": mc.arch,
            "params": dict(mc.params),
            "src_vocab": src_vocab,
            "tgt_vocab": tgt_vocab,
            "step": step,
            "train": asdict(tc),
        }
        atomic_save(final, out_dir / "checkpoint.pt")
        shutil.copyfile(resume_dir / "train_log.csv", out_dir / "train_log.csv")
    barrier(ranks)
    return out_dir / "checkpoint.pt"


def _nonpad_fraction(corpus: Corpus, update: list[np.ndarray]) -> float:
    """Mean over the update's batches of real / padded (source + target) tokens."""
    fractions = []
    for indices in update:
        src, tgt = corpus.src_lens[indices], corpus.tgt_lens[indices] + 1  # + <s> or </s>
        fractions.append(float(src.sum() + tgt.sum()) / (len(indices) * (int(src.max()) + int(tgt.max()))))
    return sum(fractions) / len(fractions)
