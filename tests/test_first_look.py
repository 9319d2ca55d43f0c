"""config/first_look.yaml: the four models of Bahdanau et al.'s Fig. 2, seed 1, exactly as the embedded
default trains them (so its numbers compare with the committed table, and README command 1 reuses them)."""

from __future__ import annotations

import re

from attnrepro.config import load_config

from conftest import REPO, snakemake

FIG2_MODELS = ["rnnencdec30", "rnnencdec50", "rnnsearch30", "rnnsearch50"]
FIRST_LOOK = REPO / "config/first_look.yaml"


def test_the_first_look_is_the_defaults_seed_1_runs_of_the_four_fig2_models():
    first, default = load_config(FIRST_LOOK), load_config(REPO / "config/config.yaml")
    runs = [f"{name}_seed1" for name in FIG2_MODELS]
    assert sorted(first.models) == runs
    for run in runs:
        assert first.models[run] == default.models[run], run
    for part in ("dataset", "synthetic", "wmt", "tokenizers", "search", "evaluate", "resources"):
        assert getattr(first, part) == getattr(default, part), part


def test_the_first_looks_dag_trains_those_four_and_draws_fig2(tmp_path):
    plan = snakemake(tmp_path, FIRST_LOOK, "-n")
    assert plan.returncode == 0, plan.stderr[-3000:]
    trained = re.findall(
        r"rule train:\n(?:\s+\w+: .*\n)*?\s+output: results/synthetic/(\w+)/checkpoint\.pt", plan.stdout
    )
    assert sorted(trained) == [f"{name}_seed1" for name in FIG2_MODELS]
    assert "results/synthetic/figures/bleu_by_length.png" in plan.stdout
