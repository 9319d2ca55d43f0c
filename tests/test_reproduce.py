"""The reproduction band of Fig. 2 and `attnrepro compare`, which checks a run against a published band table."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from attnrepro.evaluation.aggregate import bleu_by_length_aggregate, reproduction_band
from attnrepro.evaluation.reproduce import band_table, compare_to_reference


def test_the_band_is_the_prediction_interval_of_another_seed_sets_mean():
    lo, hi = reproduction_band([60.0, 62.0, 67.0])
    half = 4.302652729911275 * math.sqrt(13) * math.sqrt(2 / 3)  # t(0.975; 2), s = √13, √(1/3 + 1/3)
    assert (lo, hi) == pytest.approx((63 - half, 63 + half))
    one = 4.302652729911275 * math.sqrt(13) * math.sqrt(1 + 1 / 3)  # one new run: √(1 + 1/n)
    assert reproduction_band([60.0, 62.0, 67.0], new_runs=1) == pytest.approx((63 - one, 63 + one))
    assert reproduction_band([99.0, 100.0, 100.0])[1] == 100.0  # clipped to BLEU's range
    assert all(math.isnan(x) for x in reproduction_band([70.0]))  # one run: no spread to speak of
    five = reproduction_band([60.0, 61.0, 62.0, 63.0, 64.0])  # more seeds: a smaller t and √(2/n)
    assert five[1] - five[0] == pytest.approx(2 * 2.7764451051977987 * math.sqrt(2.5) * math.sqrt(2 / 5))


def test_the_band_covers_another_seed_sets_mean_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    first, second = rng.normal(50, 5, size=(2, 4000, 3))
    bands = np.array([reproduction_band(list(row)) for row in first])
    inside = (second.mean(1) >= bands[:, 0]) & (second.mean(1) <= bands[:, 1])
    assert 0.94 < inside.mean() < 0.96  # min–max of the three runs would cover only about 63 %
    assert 0.60 < ((second.mean(1) >= first.min(1)) & (second.mean(1) <= first.max(1))).mean() < 0.67


def runs_table(bleu: dict[str, list[float]], seeds: int = 3) -> pd.DataFrame:
    """bleu_by_length rows of models 'a', 'b', ...: per model a list of its buckets' BLEU per seed."""
    rows = []
    for base, per_seed in bleu.items():
        for seed in range(seeds):
            for b, value in enumerate(per_seed[seed]):
                rows.append({"model": f"{base}_seed{seed + 1}", "base": base, "seed": seed + 1, "label": base.upper(),
                             "bucket_lo": 10 * b, "bucket_hi": 10 * b + 10, "n_sentences": 100, "bleu": value,
                             "bleu_ci_lo": value - 2, "bleu_ci_hi": value + 2})  # fmt: skip
    return pd.DataFrame(rows)


def test_compare_counts_the_cells_whose_mean_is_inside_the_reference_band():
    reference = band_table(bleu_by_length_aggregate(runs_table({"a": [[90, 50], [92, 60], [94, 55]]})))
    ours = band_table(bleu_by_length_aggregate(runs_table({"a": [[70, 55], [71, 56], [72, 57]]})))
    cells = compare_to_reference(ours, reference).cells
    assert cells["status"].tolist() == ["outside", "inside"]  # worst first
    assert cells["band"].tolist() == ["the band of 3-run means"] * 2
    lo_first = reference.set_index("bucket_lo").loc[0, "band_lo"]
    assert cells.loc[0, ["bucket_lo", "mean", "mean_reference"]].tolist() == [0, 71.0, 92.0]
    assert cells.loc[0, "miss"] == pytest.approx(lo_first - 71.0) and cells.loc[1, "miss"] == 0


def test_attnrepro_compare_exits_1_below_the_fraction_and_names_the_cells_outside(tmp_path):
    reference = band_table(bleu_by_length_aggregate(runs_table({"a": [[90, 50], [92, 60], [94, 55]]})))
    ours = band_table(bleu_by_length_aggregate(runs_table({"a": [[70, 55], [71, 56], [72, 57]]})))
    reference.to_csv(tmp_path / "reference.csv", index=False)
    ours.to_csv(tmp_path / "ours.csv", index=False)

    def compare(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "attnrepro.cli", "compare", "--reference", str(tmp_path / "reference.csv")]
        return subprocess.run([*command, *args], capture_output=True, text=True)

    below = compare("--table", str(tmp_path / "ours.csv"))
    assert below.returncode == 1
    lines = below.stdout.splitlines()
    assert lines[0] == (
        "1 of 2 cells of the reference (50.0 %) have their mean inside the band of 3-run means (needed: 90 %)"
    )
    assert lines[1].startswith("  outside: A (a), 1–10 words: 71.0, band [")
    assert compare("--table", str(tmp_path / "ours.csv"), "--min-inside", "0.5").returncode == 0
    same = compare("--table", str(tmp_path / "reference.csv"))
    assert same.returncode == 0 and same.stdout.startswith("2 of 2 cells of the reference (100.0 %)")

    (tmp_path / "other.csv").write_text("model,bleu\nx,1\n", encoding="utf-8")
    wrong = compare("--table", str(tmp_path / "other.csv"))
    assert wrong.returncode == 1 and wrong.stderr.strip().splitlines() == [
        f"attnrepro compare: error: {tmp_path / 'other.csv'}: not a table of reproduction bands "
        "(no column base, bucket_lo, bucket_hi, mean, band_lo, band_hi)"
    ]


def test_the_one_run_band_covers_one_new_run_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    first, second = rng.normal(50, 5, size=(4000, 3)), rng.normal(50, 5, size=4000)
    bands = np.array([reproduction_band(list(row), new_runs=1) for row in first])
    assert 0.94 < ((second >= bands[:, 0]) & (second <= bands[:, 1])).mean() < 0.96
    three = np.array([reproduction_band(list(row)) for row in first])  # the band of means is narrower
    assert ((second >= three[:, 0]) & (second <= three[:, 1])).mean() < 0.93  # 91 %: a one-seed run fails more
