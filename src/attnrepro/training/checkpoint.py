"""Checkpoint files: atomic writes, loads that trust no pickle and name the file on failure,
every random-number generator's state, and checkpoint averaging.

Three kinds of file, all loaded with `torch.load(..., weights_only=True)`:
- `{out}/resume/last.pt`: everything a bit-identical continuation needs (`RESUME_KEYS`), with
  the fingerprint of the run that wrote it: a run resumes only from its own state;
- `{out}/resume/kept/step_*.pt`: the weights of the last `train.average_last` regular
  checkpoints, for averaging;
- `{out}/checkpoint.pt`, `{out}/averaged.pt`: weights plus what rebuilds the model (`MODEL_KEYS`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnrepro.config import ModelConfig
from attnrepro.data.tokenize import TOKENIZER_FILES, tokenizer_differences
from attnrepro.errors import DataError
from attnrepro.models import build_model
from attnrepro.models.base import Seq2SeqModel

MODEL_KEYS = ("model", "arch", "params", "src_vocab", "tgt_vocab", "step")
RESUME_KEYS = ("model", "optimizer", "step", "epoch", "position", "tokens_seen", "log_window", "early_stopping", "rng")
KEPT_NAME = re.compile(r"step_(\d+)\.pt")
# Train keys left out of a run's fingerprint: they decide where it runs and what it logs, never
# the weights it reaches. max_steps may grow; a run past the new max_steps is checked apart.
UNFINGERPRINTED = (
    "max_steps", "log_every", "checkpoint_every", "valid_bleu", "device", "compile", "step_compile", "loss_chunk_tokens"
)  # fmt: skip


def atomic_save(obj: Any, path: Path) -> None:
    """torch.save to a temp file in the same folder, fsync, then rename over `path`. A failed write (a full
    disk, a read-only folder) leaves `path` as it was and raises an OSError naming `path`, not the temp file."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as err:  # torch.save reports a failed write of its zip file as a RuntimeError
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise OSError(err.errno, err.strerror or str(err), str(path)) from None
        raise OSError(None, f"cannot be written ({err})", str(path)) from None


def load_checkpoint(path: Path, required: tuple[str, ...] = ("model",)) -> dict[str, Any]:
    """A checkpoint's dict, on the CPU; a truncated, foreign or incomplete file raises naming `path`."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:
        raise DataError(f"{path}: not a readable attnrepro checkpoint ({err})") from err
    missing = [key for key in required if not isinstance(obj, dict) or key not in obj]
    if missing:
        raise DataError(f"{path}: not an attnrepro checkpoint of this kind (missing {', '.join(missing)})")
    return obj


def tokenizer_fingerprint(folder: Path) -> dict[str, str]:
    """What a checkpoint records of the tokenizer it was trained with: the sha256 (16 digits) of its
    src.model and tgt.model, and the folder, for the message that names it."""
    return {name: file_sha256(folder / name)[:16] for name in TOKENIZER_FILES} | {"folder": str(folder)}


def check_trained_with(ckpt: dict[str, Any], path: Path, tokenizer_dir: Path, vocab: tuple[int, int]) -> None:
    """A `DataError` naming both when the checkpoint at `path` was trained with another tokenizer than the one
    in `tokenizer_dir` (of `vocab` sizes): its vocabulary sizes, then (when it records one) the tokenizer's
    files. Ids of one vocabulary read with another give wrong words, or none, without an error."""
    saved_vocab = (ckpt.get("src_vocab"), ckpt.get("tgt_vocab"))
    saved = ckpt.get("tokenizer")
    if saved_vocab != tuple(vocab):
        where = f" in {saved['folder']}" if saved else ""
        raise DataError(f"{path}: trained with vocabularies of {saved_vocab[0]}/{saved_vocab[1]} entries{where}, "
                        f"but --tokenizer-dir {tokenizer_dir} has {vocab[0]}/{vocab[1]}: use the tokenizer it was "
                        "trained with")  # fmt: skip
    now = tokenizer_fingerprint(tokenizer_dir)
    differ = tokenizer_differences(saved, now)
    if differ:
        raise DataError(f"{path}: trained with the tokenizer in {saved['folder']} ({', '.join(differ)} sha256 "
                        f"{', '.join(saved[n] for n in differ)}), but --tokenizer-dir {tokenizer_dir} holds another "
                        f"({', '.join(now[n] for n in differ)}): use the tokenizer it was trained with")  # fmt: skip


def check_model(ckpt: dict[str, Any], path: Path, mc: ModelConfig) -> None:
    """A `DataError` naming both when the checkpoint at `path` is not of model `mc` (another arch or params)."""
    saved = (ckpt.get("arch"), ckpt.get("params"))
    if saved != (mc.arch, dict(mc.params)):
        raise DataError(f"{path}: a checkpoint of {saved[0]} {saved[1]}, but models.{mc.base} is {mc.arch} "
                        f"{dict(mc.params)}: give this model's checkpoint, or this checkpoint's model")  # fmt: skip


def build_from_checkpoint(ckpt: dict[str, Any]) -> Seq2SeqModel:
    model = build_model(ckpt["arch"], ckpt["src_vocab"], ckpt["tgt_vocab"], ckpt["params"])
    model.load_state_dict(ckpt["model"])
    return model


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def run_fingerprint(mc: ModelConfig, data: tuple[Path, Path], vocab: tuple[int, int], per_update: int) -> dict:
    """Everything that decides a run's trajectory: the model, its train settings (but `UNFINGERPRINTED`),
    the encoded train and valid data and vocabulary sizes (all a tokenizer changes), and the batches
    of one update (what a change of world size can change)."""
    return {
        "arch": mc.arch,
        "params": dict(mc.params),
        "train": {k: v for k, v in asdict(mc.train).items() if k not in UNFINGERPRINTED},
        "train_sha256": file_sha256(data[0]),
        "valid_sha256": file_sha256(data[1]),
        "src_vocab": vocab[0],
        "tgt_vocab": vocab[1],
        "batches_per_update": per_update,
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flatten(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): list(value) if isinstance(value, tuple) else value}


def fingerprint_differences(saved: dict | None, now: dict) -> list[str]:
    """'key: saved -> now' for each key that differs (a state saved without a fingerprint differs)."""
    if saved is None:
        return ["no fingerprint (written by an older attnrepro)"]
    old, new = _flatten(saved), _flatten(now)
    return [f"{key}: {old.get(key, '(absent)')!r} -> {new.get(key, '(absent)')!r}"
            for key in sorted(old.keys() | new.keys()) if old.get(key, KeyError) != new.get(key, KeyError)]  # fmt: skip


def set_aside(resume_dir: Path) -> Path:
    """Rename `resume_dir` to `resume.stale-<UTC time>` beside it and start an empty one; returns the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = resume_dir.with_name(f"{resume_dir.name}.stale-{stamp}")
    n = 1
    while aside.exists():
        aside, n = resume_dir.with_name(f"{resume_dir.name}.stale-{stamp}-{n}"), n + 1
    resume_dir.rename(aside)
    resume_dir.mkdir()
    return aside


def rng_state() -> dict[str, Any]:
    """This process's generators: Python, NumPy's global one, torch CPU and every CUDA device."""
    np_name, np_key, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": (np_name, torch.from_numpy(np_key.astype(np.int64)), np_pos, np_has_gauss, np_gauss),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` captured (after a `torch.load(weights_only=True)` round trip)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_name, np_key, np_pos, np_has_gauss, np_gauss = state["numpy"]
    np.random.set_state((np_name, np_key.numpy().astype(np.uint32), np_pos, np_has_gauss, np_gauss))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def kept_checkpoints(folder: Path) -> dict[int, Path]:
    """{step: path} of the weights kept for averaging in `folder` (resume/kept/)."""
    found = {}
    for path in folder.glob("step_*.pt") if folder.is_dir() else []:
        match = KEPT_NAME.fullmatch(path.name)
        if match:
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def keep_for_averaging(weights: dict[str, torch.Tensor], step: int, folder: Path, keep: int) -> None:
    """Write `step_{step}.pt` and delete all but the `keep` most recent ones."""
    atomic_save({"model": weights, "step": step}, folder / f"step_{step:09d}.pt")
    kept = kept_checkpoints(folder)
    for old in list(kept)[:-keep]:
        kept[old].unlink()


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the checkpoints' weights (Vaswani et al. 2017, §6.1), summed in float64.

    Integer buffers (counters) are not averaged: they come from the last checkpoint.
    """
    if not paths:
        raise DataError("no checkpoints to average")
    first = load_checkpoint(paths[0])["model"]
    total = {name: t.double() if t.is_floating_point() else t for name, t in first.items()}
    for path in paths[1:]:
        weights = load_checkpoint(path)["model"]
        if weights.keys() != total.keys():
            raise DataError(f"{path}: its weights do not match {paths[0]} (different parameter names)")
        for name, t in weights.items():
            if t.shape != total[name].shape:
                raise DataError(f"{path}: {name} has shape {tuple(t.shape)}, {paths[0]} {tuple(total[name].shape)}")
            if t.is_floating_point():
                total[name] = total[name] + t.double()
            else:
                total[name] = t
    return {name: (t / len(paths)).to(first[name].dtype) if first[name].is_floating_point() else t
            for name, t in total.items()}  # fmt: skip


def write_average(final: Path, last: int, out: Path) -> list[int]:
    """Average the `last` kept checkpoints ending at `final`'s step; `out` has `final`'s format.

    Returns the averaged steps.
    """
    ckpt = load_checkpoint(final, MODEL_KEYS)
    folder = final.parent / "resume" / "kept"
    kept = {step: path for step, path in kept_checkpoints(folder).items() if step <= ckpt["step"]}
    steps = list(kept)[-last:]
    if len(steps) < last or steps[-1] != ckpt["step"]:
        raise DataError(
            f"{folder}: need the {last} checkpoints up to step {ckpt['step']} for averaging, found steps {steps}"
        )
    ckpt["model"] = average_checkpoints([kept[step] for step in steps])
    ckpt["averaged_steps"] = steps
    atomic_save(ckpt, out)
    return steps
