"""Tables gathered from finished runs: BLEU by source length for every model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def bleu_by_length_table(per_model: dict[str, Path], labels: dict[str, str]) -> pd.DataFrame:
    """One row per model x bucket: model, label, bucket_lo, bucket_hi, n_sentences, bleu."""
    frames = []
    for model, path in per_model.items():
        frame = pd.read_csv(path)
        frame.insert(0, "label", labels.get(model, model))
        frame.insert(0, "model", model)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def write_table(table: pd.DataFrame, csv_path: Path, md_path: Path | None = None) -> None:
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(csv_path, index=False)
    if md_path is not None:
        md_path.write_text(table.to_markdown(index=False) + "\n", encoding="utf-8")
