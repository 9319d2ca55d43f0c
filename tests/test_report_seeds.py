"""The HTML report of a config trained once per seed (`seeds:`, as the embedded default): its run names
(NAME_seed1, ...) are no keys of config["models"], and every caption that names a run's model must find it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory) -> Path:
    """config/test.yaml with `seeds: [1, 2]`, run to the end: returns the working directory and its config."""
    workdir = tmp_path_factory.mktemp("report_seeds")
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["seeds"] = [1, 2]
    config = workdir / "seeded.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = snakemake(workdir, config, "--cores", "2")
    assert out.returncode == 0, out.stderr[-4000:]
    return workdir


def test_the_report_of_a_seeded_config_builds_and_names_each_runs_model(seeded_run):
    config = seeded_run / "seeded.yaml"
    out = snakemake(seeded_run, config, "--report", "report.html")
    assert out.returncode == 0, out.stderr[-4000:]
    page = (seeded_run / "report.html").read_text(encoding="utf-8")
    results = json.loads(re.search(r'<script id="results">\s*var results = (.*?);\s*</script>', page, re.S).group(1))

    raw = yaml.safe_load(config.read_text())
    n = raw["evaluate"]["n_alignments"]
    attention = {name: spec for name, spec in raw["models"].items() if spec["arch"] == "rnnsearch"}
    assert attention  # test.yaml's rnnsearch10: the one model here with a Fig. 3
    for name, spec in attention.items():
        for seed in raw["seeds"]:
            for k in range(n):
                shown = results[f"results/synthetic_test/figures/alignment_{name}_seed{seed}_{k}.png"]
                assert f"<strong>{spec['label']}</strong>" in shown["caption"], shown["caption"][:2000]
    assert "results/synthetic_test/figures/bleu_by_length.png" in results
