"""The runs of one configured model (one per seed, `seeds: [...]`) gathered into one row: the mean over
its runs, their spread (min and max), the mean of their 95 % bootstrap intervals and, per length bucket,
the reproduction band; without seeds a model has one run and its row is that run's numbers.

The reproduction band is the interval the mean of another n runs falls in with 95 % probability, n the
runs measured here: a prediction interval, mean ± t(0.975; n - 1) · s · √(1/n + 1/n), s the standard
deviation over the runs (Student's t, the runs taken as normal draws). Another seed set, or the same seeds on
another machine (whose floating-point order acts like another seed), is such a set of n runs; the bootstrap
interval over test sentences measures the test set only and misses this variation. Clipped to [0, 100].
The one-run band (`run_band_lo`, `run_band_hi`) is where one new run falls: mean ± t(0.975; n - 1) · s ·
√(1 + 1/n), what a run with one seed is checked against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
from scipy import stats

BAND_CONFIDENCE = 0.95


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


def reproduction_band(
    values: Sequence[float], confidence: float = BAND_CONFIDENCE, new_runs: int | None = None
) -> tuple[float, float]:
    """Where the mean of another `new_runs` runs (default: len(values)) falls with probability `confidence`
    (see the module docstring); (nan, nan) for fewer than two runs, whose spread is unknown."""
    n = len(values)
    if n < 2:
        return math.nan, math.nan
    series = pd.Series(values, dtype=float)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * series.std(ddof=1) * math.sqrt(1 / n + 1 / (new_runs or n))
    return max(0.0, series.mean() - half), min(100.0, series.mean() + half)


def bleu_by_length_aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    """BLEU by length of every base model: mean over its runs per bucket, min-max over them, mean interval, and
    the reproduction band (`band_lo`, `band_hi`) and the one-run band (`run_band_lo`, `run_band_hi`), empty
    with one run; `resolution`, the test set's (scoring.bleu_by_length), where the runs' files have it."""
    keys = ["base", "bucket_lo", "bucket_hi"]
    mean = ["bleu_ci_lo", "bleu_ci_hi", "n_sentences", *(["resolution"] if "resolution" in runs else [])]
    table = aggregate_runs(runs, keys, spread=["bleu"], mean=mean)
    cells = [tuple(row) for row in table[keys].itertuples(index=False)]
    for columns, new_runs in ((["band_lo", "band_hi"], None), (["run_band_lo", "run_band_hi"], 1)):
        bands = runs.groupby(keys, sort=False)["bleu"].agg(lambda v, m=new_runs: reproduction_band(list(v), new_runs=m))
        table[columns] = [bands[cell] for cell in cells]
    return table
