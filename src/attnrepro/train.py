"""One training loop for every model: optimizer and schedule from config, token-bucketed
batches, atomic checkpoints and exact resume.

The resume state lives in `{out_dir}/resume/` (not a declared Snakemake output, so a
failed job's cleanup never deletes it): `last.pt` holds model, optimizer, step, data
position and RNG state, `train_log.csv` the log rows up to that step. Batches of epoch e
come from `token_batches(..., seed=train.seed + e)`, so the data position is just
(epoch, batch index) and a resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import csv
import math
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from attnrepro.batching import Batch, Corpus, collate, token_batches
from attnrepro.config import ModelConfig, TrainConfig
from attnrepro.models import Seq2SeqModel, build_model, count_parameters
from attnrepro.tokenize import PAD

LOG_FIELDS = [
    "step",
    "epoch",
    "loss",
    "lr",
    "tokens_per_s",
    "nonpad_fraction",
    "valid_loss",
    "src_tokens",
    "tgt_tokens",
]


def make_optimizer(params, tc: TrainConfig) -> torch.optim.Optimizer:
    if tc.optimizer == "adadelta":  # Bahdanau 2014, App. B.2.1: rho 0.95, eps 1e-6
        return torch.optim.Adadelta(params, lr=tc.lr, rho=tc.rho, eps=tc.eps)
    if tc.optimizer == "adam":
        return torch.optim.Adam(params, lr=tc.lr, betas=tuple(tc.betas), eps=tc.eps)
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


def loss_fn(logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Mean cross-entropy per real target token."""
    return nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


def atomic_save(obj: Any, path: Path) -> None:
    """torch.save to a temp file in the same folder, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(f"{path}: not a readable attnrepro checkpoint ({err})") from err


def build_from_checkpoint(ckpt: dict[str, Any]) -> Seq2SeqModel:
    model = build_model(ckpt["arch"], ckpt["src_vocab"], ckpt["tgt_vocab"], ckpt["params"])
    model.load_state_dict(ckpt["model"])
    return model


@torch.no_grad()
def valid_loss(model: Seq2SeqModel, corpus: Corpus, batch_tokens: int) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for indices in token_batches(corpus.src_lens, corpus.tgt_lens, batch_tokens, seed=0):
        batch = collate(corpus, indices)
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        n = batch.n_tgt_tokens
        total += float(loss_fn(logits, batch.tgt_out, 0.0)) * n
        tokens += n
    model.train()
    return total / max(tokens, 1)


def _filter(corpus: Corpus, max_len: int) -> np.ndarray:
    """Indices of pairs with 1..max_len source tokens and a non-empty target.

    Bahdanau's -30/-50 models were trained on sentence pairs of at most 30/50 words.
    """
    keep = (corpus.src_lens >= 1) & (corpus.src_lens <= max_len) & (corpus.tgt_lens >= 1)
    return np.flatnonzero(keep)


def _append_log(path: Path, rows: list[dict[str, Any]]) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, LOG_FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _truncate_log(path: Path, step: int) -> None:
    """Drop log rows written after the checkpoint we resume from."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["step"]) <= step]
    path.unlink()
    _append_log(path, rows)


def train(
    mc: ModelConfig,
    train_path: Path,
    valid_path: Path,
    src_vocab: int,
    tgt_vocab: int,
    out_dir: Path,
    threads: int = 1,
    progress: bool = True,
) -> Path:
    """Train `mc` to `mc.train.max_steps`, resuming from `out_dir/resume/last.pt`; returns checkpoint.pt."""
    tc = mc.train
    torch.set_num_threads(threads)
    resume_dir = out_dir / "resume"
    resume_dir.mkdir(parents=True, exist_ok=True)
    resume_path, log_path = resume_dir / "last.pt", resume_dir / "train_log.csv"

    torch.manual_seed(tc.seed)
    model = build_model(mc.arch, src_vocab, tgt_vocab, mc.params)
    optimizer = make_optimizer(model.parameters(), tc)
    d_model = getattr(model, "d_model", None)

    corpus = Corpus.load(train_path)
    valid = Corpus.load(valid_path)
    kept = _filter(corpus, tc.max_src_len)
    if len(kept) == 0:
        raise ValueError(f"{train_path}: no training pair has <= {tc.max_src_len} source tokens")
    src_lens, tgt_lens = corpus.src_lens[kept], corpus.tgt_lens[kept]

    step, epoch, position = 0, 0, 0
    seen = {"src": 0, "tgt": 0}  # real tokens trained on so far (for FLOP estimates: 6 x params x tokens)
    if resume_path.exists():
        state = load_checkpoint(resume_path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, epoch, position = state["step"], state["epoch"], state["position"]
        seen = dict(state["tokens_seen"])
        torch.set_rng_state(state["torch_rng"])
        _truncate_log(log_path, step)
        print(f"resuming {mc.name} from step {step} (epoch {epoch}, batch {position})", flush=True)
    else:
        log_path.unlink(missing_ok=True)
        print(f"{mc.name}: {mc.arch}, {count_parameters(model):,} parameters, {len(kept):,} training pairs", flush=True)

    def checkpoint_state() -> dict[str, Any]:
        return {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": step,
            "epoch": epoch,
            "position": position,
            "tokens_seen": dict(seen),
            "torch_rng": torch.get_rng_state(),
        }

    model.train()
    batches = token_batches(src_lens, tgt_lens, tc.batch_tokens, seed=tc.seed + epoch)
    rows: list[dict[str, Any]] = []
    window_tokens, window_start, window_nonpad, window_loss, window_steps = 0, time.perf_counter(), 0.0, 0.0, 0
    bar = tqdm(total=tc.max_steps, initial=step, desc=mc.name, disable=not progress, mininterval=5)
    while step < tc.max_steps:
        if position == len(batches):
            epoch, position = epoch + 1, 0
            batches = token_batches(src_lens, tgt_lens, tc.batch_tokens, seed=tc.seed + epoch)
        batch: Batch = collate(corpus, kept[batches[position]])
        position += 1
        step += 1
        lr = lr_at(tc, step, d_model, len(batches))
        for group in optimizer.param_groups:
            group["lr"] = lr
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        loss = loss_fn(logits, batch.tgt_out, tc.label_smoothing)
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):  # stop before the bad update; last.pt stays the last good state
            raise FloatingPointError(
                f"{mc.name}: loss is {loss_value} at step {step}; the last good checkpoint is {resume_path}"
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc.clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm)  # Bahdanau App. B.2.1: norm 1
        optimizer.step()
        window_tokens += batch.n_tgt_tokens
        seen["src"] += int(batch.src_mask.sum())
        seen["tgt"] += batch.n_tgt_tokens
        window_nonpad += batch.nonpad_fraction
        window_loss += loss_value
        window_steps += 1
        bar.update(1)
        if step % tc.log_every == 0 or step == tc.max_steps or step % tc.valid_every == 0:
            elapsed = time.perf_counter() - window_start
            row = {
                "step": step,
                "epoch": epoch,
                "loss": round(window_loss / window_steps, 5),
                "lr": lr,
                "tokens_per_s": round(window_tokens / elapsed, 1),
                "nonpad_fraction": round(window_nonpad / window_steps, 4),
                "valid_loss": "",
                "src_tokens": seen["src"],
                "tgt_tokens": seen["tgt"],
            }
            if step % tc.valid_every == 0 or step == tc.max_steps:
                row["valid_loss"] = round(valid_loss(model, valid, tc.batch_tokens), 5)
            rows.append(row)
            bar.set_postfix(loss=row["loss"], tok_s=row["tokens_per_s"], valid=row["valid_loss"])
            window_tokens, window_nonpad, window_loss, window_steps = 0, 0.0, 0.0, 0
            window_start = time.perf_counter()
        if step % tc.checkpoint_every == 0 or step == tc.max_steps:
            _append_log(log_path, rows)
            rows = []
            atomic_save(checkpoint_state(), resume_path)
    bar.close()

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
    shutil.copyfile(log_path, out_dir / "train_log.csv")
    return out_dir / "checkpoint.pt"
