"""The training log: rows of `resume/train_log.csv` and the same numbers as TensorBoard scalars
in `{out}/tb/` (`tensorboard --logdir results/{dataset}`).

CSV rows are appended only when a checkpoint is written, so the file never runs ahead of
`resume/last.pt`; on resume, rows past the checkpoint are dropped and TensorBoard is told
to purge its events past it (`purge_step`), so neither shows a step twice.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

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
