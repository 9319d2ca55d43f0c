"""Configuration: the schema rejects what a user can mistype, naming the key; dataclasses carry the rest."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from attnrepro.config import ConfigError, from_dict, load_config

from conftest import REPO


def _raw() -> dict:
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


def test_shipped_configs_load_with_defaults_filled():
    cfg = load_config(REPO / "config/config.yaml")
    assert set(cfg.models) == {"rnnencdec30", "rnnencdec50", "rnnsearch30", "rnnsearch50"}
    assert cfg.models["rnnsearch30"].train.max_src_len == 30
    assert cfg.models["rnnsearch50"].train.rho == 0.95  # schema default: Bahdanau's Adadelta rho
    assert cfg.models["rnnsearch50"].label == "RNNsearch-50"
    assert cfg.search.beam == 5
    test = load_config(REPO / "config/test.yaml")
    assert test.tokenizer.kind == "spm"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["models"]["rnnsearch50"]["params"].update(hiden=3), "hiden"),
        (lambda c: c["models"]["rnnsearch50"]["train"].update(lr="fast"), "fast"),
        (lambda c: c["models"]["rnnsearch50"]["train"].update(max_steps=0), "max_steps"),
        (lambda c: c["models"]["rnnsearch50"].update(arch="lstm"), "lstm"),
        (lambda c: c.update(serach={}), "serach"),
        (lambda c: c["tokenizer"].update(kind="bpe"), "bpe"),
        (lambda c: c["models"]["rnnencdec30"]["params"].update(align=10), "align"),  # rnnenc has no alignment model
    ],
)
def test_schema_rejects_bad_values_naming_the_key(edit, message):
    raw = _raw()
    edit(raw)
    with pytest.raises(Exception) as info:
        from_dict(raw)
    text = str(info.value) + "".join(str(a) for a in getattr(info.value, "args", ()))
    assert message in text


def test_semantic_check_names_the_key():
    raw = _raw()
    raw["models"]["rnnsearch50"]["train"]["max_src_len"] = 60
    with pytest.raises(ConfigError, match=r"models.rnnsearch50.train.max_src_len=60"):
        from_dict(raw)


def test_from_dict_does_not_mutate_its_input():
    raw = _raw()
    before = copy.deepcopy(raw)
    from_dict(raw)
    assert raw == before


def test_snakemake_dry_run_stops_on_a_mistyped_key(tmp_path):
    raw = _raw()
    raw["models"]["rnnsearch50"]["train"]["max_stpes"] = 10
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(bad), "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0
    assert "max_stpes" in out.stdout + out.stderr
    assert not (tmp_path / "results").exists()  # nothing was planned or written
