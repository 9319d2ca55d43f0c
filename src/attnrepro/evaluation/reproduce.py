"""Does a run reproduce a published Fig. 2? The reproduction band of every model and length bucket, as a
table anyone can keep (docs/figures/bleu_by_length.csv is the README's), and the check of another run's
means against it.

A band is where the mean of another set of as many seeds falls with 95 % probability
(`aggregate.reproduction_band`); a run reproduces the figure when nearly every cell's mean falls inside
it (with 95 % bands, about 1 cell in 20 falls outside by chance).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnrepro.errors import DataError

BAND_COLUMNS = {  # column of the band table -> column of bleu_by_length_aggregate
    "base": "base",
    "label": "label",
    "bucket_lo": "bucket_lo",
    "bucket_hi": "bucket_hi",
    "n_sentences": "n_sentences",
    "n_runs": "n_runs",
    "mean": "bleu",
    "band_lo": "band_lo",
    "band_hi": "band_hi",
    "seed_min": "bleu_min",
    "seed_max": "bleu_max",
    "bootstrap_lo": "bleu_ci_lo",
    "bootstrap_hi": "bleu_ci_hi",
}
KEYS = ["base", "bucket_lo", "bucket_hi"]


def band_table(by_length: pd.DataFrame) -> pd.DataFrame:
    """One row per model and bucket: the mean over its runs, the reproduction band, the runs' min and max and
    the mean of their 95 % bootstrap bounds (the test set's own uncertainty)."""
    table = by_length.reindex(columns=list(BAND_COLUMNS.values()))
    table.columns = list(BAND_COLUMNS)
    return table.round({c: 2 for c in ("mean", "band_lo", "band_hi", "seed_min", "seed_max", "bootstrap_lo",
                                       "bootstrap_hi")})  # fmt: skip


def read_band_table(path: Path) -> pd.DataFrame:
    """A band table (`band_table`'s CSV); one without its key columns is a DataError naming the file."""
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    missing = [c for c in (*KEYS, "mean", "band_lo", "band_hi") if c not in table]
    if missing:
        raise DataError(f"{path}: not a table of reproduction bands (no column {', '.join(missing)})")
    return table


def compare_to_reference(ours: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Every cell the two tables share: our mean, the reference's mean and band, whether ours is inside it and
    by how much it misses (0 inside), worst misses first. No shared cell is a DataError."""
    cells = ours[[*KEYS, "mean"]].merge(
        reference[[*KEYS, "label", "mean", "band_lo", "band_hi"]], on=KEYS, suffixes=("", "_reference")
    )
    cells = cells[cells["band_lo"].notna() & cells["band_hi"].notna()]
    if cells.empty:
        raise DataError("no model and bucket with a band in the reference is in the run (other models or buckets?)")
    below, above = cells["band_lo"] - cells["mean"], cells["mean"] - cells["band_hi"]
    cells = cells.assign(miss=pd.concat([below, above], axis=1).max(axis=1).clip(lower=0))
    cells = cells.assign(inside=cells["miss"] == 0)
    return cells.sort_values("miss", ascending=False, kind="stable").reset_index(drop=True)


def comparison_report(cells: pd.DataFrame, min_inside: float, worst: int = 10) -> str:
    """What `attnrepro compare` prints: the fraction of cells inside the bands, and the cells outside."""
    inside = int(cells["inside"].sum())
    lines = [f"{inside} of {len(cells)} cells ({100 * inside / len(cells):.1f} %) have their mean inside the "
             f"reference band (needed: {100 * min_inside:.0f} %)"]  # fmt: skip
    for _, c in cells[~cells["inside"]].head(worst).iterrows():
        lines.append(f"  outside: {c['label']} ({c['base']}), {int(c['bucket_lo']) + 1}–{int(c['bucket_hi'])} words: "
                     f"{c['mean']:.1f}, band [{c['band_lo']:.1f}, {c['band_hi']:.1f}] "
                     f"(reference mean {c['mean_reference']:.1f})")  # fmt: skip
    if (~cells["inside"]).sum() > worst:
        lines.append(f"  ... and {int((~cells['inside']).sum()) - worst} more")
    return "\n".join(lines)
