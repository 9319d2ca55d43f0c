"""Figures mirroring the papers."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def plot_bleu_by_length(table: pd.DataFrame, out_stem: Path, title: str) -> list[Path]:
    """Bahdanau et al. 2014, Fig. 2: BLEU against source sentence length, one line per model."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, rows in table.groupby("label", sort=False):
        ax.plot(rows["bucket_hi"], rows["bleu"], marker="o", label=label)
    ax.set_xlabel("Sentence length (source words, upper end of each bucket)")
    ax.set_ylabel("BLEU score")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths
