"""The training log: rows of `resume/train_log.csv` and the same numbers as TensorBoard scalars
in `{out}/tb/` (`tensorboard --logdir results/{dataset}`), and its reader for every verb that reads a run's
`train_log.csv` (training's own verdict on the run, the tables and figures through their verbs).

CSV rows are appended only when a checkpoint is written, so the file never runs ahead of
`resume/last.pt`; on resume, rows past the checkpoint are dropped and TensorBoard is told
to purge its events past it (`purge_step`), so neither shows a step twice.

A row without a validation leaves `valid_loss` empty; a validation that was not a number is written
`nan` (or `inf`), and the two are kept apart when the log is read (`validated`): a run whose validation
loss is not finite diverged, where an empty cell says nothing.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from attnrepro.errors import DataError

LOG_FIELDS = [
    "step",
    "epoch",
    "loss",  # mean cross-entropy per target token of the updates since the last row, whatever train.loss_norm
    "lr",
    "tokens_per_s",  # target tokens per second spent in updates
    "nonpad_fraction",
    "valid_loss",  # cross-entropy per target token of the validation set (no label smoothing)
    "src_tokens",
    "tgt_tokens",
    "valid_bleu",
]
SCALARS = {  # CSV column -> TensorBoard tag
    "loss": "train/loss",
    "lr": "train/lr",
    "tokens_per_s": "train/tokens_per_s",
    "valid_loss": "valid/loss",
    "valid_bleu": "valid/bleu",
}


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, LOG_FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _truncate(path: Path, step: int) -> None:
    """Drop rows written after `step` (and rewrite older files with the current columns)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = [{k: r.get(k) or "" for k in LOG_FIELDS} for r in csv.DictReader(f) if int(r["step"]) <= step]
    path.unlink()
    _append(path, rows)


def _wait_for_a_later_second(tb_dir: Path) -> None:
    """TensorBoard reads a folder's event files in name order, and a name starts with the second it was
    made in, then a per-process counter: a resume in the same second and process (9 -> 10) could sort
    before the segment it continues, and its purge would then drop the resumed steps."""
    newest = max((int(f.name.split(".")[3]) for f in tb_dir.glob("events.out.tfevents.*")), default=0)
    time.sleep(max(0.0, newest + 1 - time.time()))


class TrainLog:
    """Rank 0's log; other ranks make one with `enabled=False`, which does nothing."""

    def __init__(self, csv_path: Path, tb_dir: Path, start_step: int, enabled: bool = True):
        self.csv_path, self.rows, self.writer = csv_path, [], None
        if not enabled:
            return
        if start_step == 0:
            csv_path.unlink(missing_ok=True)
        else:
            _truncate(csv_path, start_step)
        from torch.utils.tensorboard import SummaryWriter

        _wait_for_a_later_second(tb_dir)
        self.writer = SummaryWriter(str(tb_dir), purge_step=start_step + 1)

    def add(self, row: dict[str, Any]) -> None:
        if self.writer is None:
            return
        self.rows.append(row)
        for column, tag in SCALARS.items():
            if row.get(column, "") != "":
                self.writer.add_scalar(tag, row[column], row["step"])

    def flush(self) -> None:
        """Append the buffered rows to the CSV; called right before a checkpoint is written."""
        if self.writer is None:
            return
        _append(self.csv_path, self.rows)
        self.rows = []
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def read_train_log(path: Path) -> pd.DataFrame:
    """train_log.csv, one row per logged step; columns a run did not log (older logs) come back empty, and
    `validated` says which rows hold a validation (their `valid_loss` may be NaN or inf: a diverged run).
    A step given twice (two runs wrote the file) or a validation that is no number raises naming the lines."""
    try:
        log = pd.read_csv(path, dtype={"valid_loss": str}, keep_default_na=False, na_values={"step": [""]})
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: is empty, not a training log") from None
    if "step" not in log:
        raise DataError(f"{path}: not a training log (no column step)")
    repeated = log["step"].duplicated(keep=False)
    if repeated.any():
        step = log.loc[repeated.idxmax(), "step"]
        lines = [str(i + 2) for i in log.index[log["step"] == step]]
        where = f"lines {', '.join(lines[:-1])} and {lines[-1]}"
        raise DataError(f"{path}: step {step} is logged {len(lines)} times ({where}): two runs wrote this log at "
                        "once; train again into a folder of its own")  # fmt: skip
    text = log["valid_loss"].astype(str).str.strip() if "valid_loss" in log else pd.Series("", index=log.index)
    log["validated"] = text != ""
    try:
        log["valid_loss"] = [float(x) if x else math.nan for x in text]
    except ValueError:
        row = next(i for i, x in enumerate(text) if x and not _is_float(x))
        raise DataError(f"{path}:{row + 2}: valid_loss holds {text[row]!r}, not a number") from None
    for column in ("src_tokens", "tgt_tokens", "valid_bleu"):
        if column not in log:
            log[column] = math.nan
    for column in log.columns.difference(["valid_loss", "validated"]):
        if not pd.api.types.is_numeric_dtype(log[column]):  # text where a cell is empty (no value): a number column
            log[column] = pd.to_numeric(log[column].replace("", math.nan), errors="coerce")
    return log


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def divergence(valid_losses: Sequence[float], steps: Sequence[int] | None = None) -> str | None:
    """Why a run's training diverged, or None: a validation loss that is not finite (NaN or inf), or a best
    validation loss no lower than the first (training never improved on its first validation). One validation
    says nothing. `valid_losses`: every validation's, none left out; `steps`: theirs, for the message."""
    losses = [float(x) for x in valid_losses]
    bad = [i for i, x in enumerate(losses) if not math.isfinite(x)]
    if bad:
        at = f" at step {steps[bad[0]]}" if steps is not None else ""
        return f"its validation loss is {losses[bad[0]]}{at} ({len(bad)} of its {len(losses)} validations not finite)"
    if len(losses) >= 2 and min(losses) >= losses[0]:
        return f"its best validation loss, {min(losses):g}, is no lower than its first, {losses[0]:g}"
    return None


def run_divergence(log: pd.DataFrame) -> str | None:
    """`divergence` of a log read with `read_train_log`: its validated rows, in step order."""
    validated = log.loc[log["validated"]].sort_values("step")
    return divergence(validated["valid_loss"].tolist(), validated["step"].astype(int).tolist())
