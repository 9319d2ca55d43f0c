"""The runs of one configured model (one per seed, `seeds: [...]`) gathered into one row: the mean over
its runs, their spread (min and max) and the mean of their 95 % bootstrap intervals; without seeds a
model has one run and its row is that run's numbers."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def aggregate_runs(
    runs: pd.DataFrame,
    keys: Sequence[str],
    spread: Sequence[str] = (),
    mean: Sequence[str] = (),
    joined: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per `keys` group (e.g. base model, or base model x bucket), in first-seen order: `n_runs`;
    the mean over the group's runs of the `spread` and `mean` columns and `{column}_min`, `{column}_max` of
    the `spread` ones; the distinct values of the `joined` columns, comma-separated; every other column
    from the group's first run. `model` becomes the base model's name."""
    by = [runs[k] for k in keys]
    rows = runs.groupby(by, sort=False, dropna=False).head(1).set_index(list(keys), drop=False)  # indexed as groups
    for column in [*spread, *mean]:
        grouped = pd.to_numeric(runs[column]).groupby(by, sort=False, dropna=False)
        stats = {column: grouped.mean()}
        if column in spread:
            stats |= {f"{column}_min": grouped.min(), f"{column}_max": grouped.max()}
        for name, values in stats.items():
            rows[name] = _whole(values) if pd.api.types.is_integer_dtype(runs[column]) else values
    for column in joined:
        grouped = runs[column].groupby(by, sort=False, dropna=False)
        rows[column] = grouped.agg(lambda values: ", ".join(dict.fromkeys(values.dropna())) or None)
    rows["n_runs"] = runs.groupby(by, sort=False, dropna=False).size().astype("Int64")
    if "base" in rows:
        rows["model"] = rows["base"]
    return rows.reset_index(drop=True)


def _whole(values: pd.Series) -> pd.Series:
    """Counts (steps, tokens) averaged over runs stay whole numbers where every mean is one."""
    return values.astype("Int64") if (values.dropna() % 1 == 0).all() else values


def bleu_by_length_aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    """BLEU by length of every base model: mean over its runs per bucket, min-max over them, mean interval."""
    return aggregate_runs(
        runs, ["base", "bucket_lo", "bucket_hi"], spread=["bleu"], mean=["bleu_ci_lo", "bleu_ci_hi", "n_sentences"]
    )
