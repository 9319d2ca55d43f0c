"""Checkpoint files: atomic writes, loads that trust no pickle and name the file on failure,
every random-number generator's state, and checkpoint averaging.

Three kinds of file, all loaded with `torch.load(..., weights_only=True)`:
- `{out}/resume/last.pt`: everything a bit-identical continuation needs (`RESUME_KEYS`);
- `{out}/resume/kept/step_*.pt`: the weights of the last `train.average_last` regular
  checkpoints, for averaging;
- `{out}/checkpoint.pt`, `{out}/averaged.pt`: weights plus what rebuilds the model (`MODEL_KEYS`).
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attnrepro.models import build_model
from attnrepro.models.base import Seq2SeqModel

MODEL_KEYS = ("model", "arch", "params", "src_vocab", "tgt_vocab", "step")
RESUME_KEYS = ("model", "optimizer", "step", "epoch", "position", "tokens_seen", "log_window", "rng")
KEPT_NAME = re.compile(r"step_(\d+)\.pt")


def atomic_save(obj: Any, path: Path) -> None:
    """torch.save to a temp file in the same folder, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path, required: tuple[str, ...] = ("model",)) -> dict[str, Any]:
    """A checkpoint's dict, on the CPU; a truncated, foreign or incomplete file raises naming `path`."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:
        raise ValueError(f"{path}: not a readable attnrepro checkpoint ({err})") from err
    missing = [key for key in required if not isinstance(obj, dict) or key not in obj]
    if missing:
        raise ValueError(f"{path}: not an attnrepro checkpoint of this kind (missing {', '.join(missing)})")
    return obj


def build_from_checkpoint(ckpt: dict[str, Any]) -> Seq2SeqModel:
    model = build_model(ckpt["arch"], ckpt["src_vocab"], ckpt["tgt_vocab"], ckpt["params"])
    model.load_state_dict(ckpt["model"])
    return model


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
        raise ValueError("no checkpoints to average")
    first = load_checkpoint(paths[0])["model"]
    total = {name: t.double() if t.is_floating_point() else t for name, t in first.items()}
    for path in paths[1:]:
        weights = load_checkpoint(path)["model"]
        if weights.keys() != total.keys():
            raise ValueError(f"{path}: its weights do not match {paths[0]} (different parameter names)")
        for name, t in weights.items():
            if t.shape != total[name].shape:
                raise ValueError(f"{path}: {name} has shape {tuple(t.shape)}, {paths[0]} {tuple(total[name].shape)}")
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
        raise ValueError(
            f"{folder}: need the {last} checkpoints up to step {ckpt['step']} for averaging, found steps {steps}"
        )
    ckpt["model"] = average_checkpoints([kept[step] for step in steps])
    ckpt["averaged_steps"] = steps
    atomic_save(ckpt, out)
    return steps
