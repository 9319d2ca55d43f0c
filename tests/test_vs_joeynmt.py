"""benchmarks/vs_joeynmt.py --plateau: both toolkits stop by the same rule (the Joey worker restates
attnrepro's EarlyStopping, as it never imports attnrepro), the settings each toolkit gets, and the
comparison lines; no toolkit trains here (tests/test_multi30k.py runs the mode on real captions)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from attnrepro.training.state import EarlyStopping

from conftest import REPO


def load(name: str, monkeypatch):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("losses", "patience", "stop"),
    [
        ([5.0, 4.0, 3.995, 3.99, 3.985], 2, 4),  # 1 % of the perplexity is 0.01005 nats: 3.995, 3.99 fall short
        ([5.0, 4.0, 3.995, 3.99, 3.985], 3, None),  # 3.985 is 0.015 below 4.0: a gain
        ([3.0, 3.1, 2.995, 2.992], 3, 4),  # 2.995 is a new best, but not 1 % of the perplexity below 3.0
        ([3.0, 2.0, 1.0], 1, None),
    ],
)
def test_the_joey_worker_stops_where_attnrepro_stops(monkeypatch, losses, patience, stop):
    worker = load("joeynmt_worker", monkeypatch)
    plateau, early, ours = worker.Plateau(patience, 0.01), EarlyStopping(), None
    for i, loss in enumerate(losses, start=1):
        early.record(loss, i, 0.01, patience)
        if early.stopped and ours is None:
            ours = i
        plateau.record(loss, i)
    assert plateau.stopped_at == ours == stop
    assert plateau.validations == len(losses)


def test_plateau_settings_reach_both_toolkits(monkeypatch, tmp_path):
    bench = load("vs_joeynmt", monkeypatch)
    s = bench.settings_for("multi30k", plateau=True, rnn_dropout=0.3)
    assert (s.updates, s.valid_every, s.log_every, s.patience, s.min_delta) == (
        {"rnn": 6000, "transformer": 6000}, 250, 50, 3, 0.01,
    )  # fmt: skip
    tc = bench.ours_train_config("rnn", s)
    assert (tc.max_steps, tc.patience, tc.min_delta, tc.valid_every, tc.checkpoint_every) == (6000, 3, 0.01, 250, 250)
    assert bench.ours_model("rnn", s)[1]["dropout"] == 0.3
    paths = bench.paths_for(tmp_path, s, "rnn")
    assert paths.valid_npz == tmp_path / "rnn" / "valid.npz"
    joey = bench.joey_config("rnn", s, paths, tmp_path / "joey", 3000)
    training = joey["training"]
    assert (training["updates"], training["validation_freq"], training["logging_freq"]) == (6000, 250, 50)
    assert training["early_stopping_metric"] == "loss"
    assert joey["model"]["encoder"]["dropout"] == joey["model"]["decoder"]["hidden_dropout"] == 0.3
    fixed = bench.settings_for("multi30k")  # without --plateau: 500 updates, no validation, no dropout
    assert fixed.updates == {"rnn": 500, "transformer": 500} and not fixed.plateau
    assert bench.ours_train_config("rnn", fixed).patience == 0 and "dropout" not in bench.ours_model("rnn", fixed)[1]
    training = bench.joey_config("rnn", fixed, paths, tmp_path / "joey", 3000)["training"]
    assert training["validation_freq"] > training["updates"]


def test_plateau_comparison_gives_speed_ups_both_bleu_differences_and_wall_time(monkeypatch):
    bench = load("vs_joeynmt", monkeypatch)
    row = {"model": "rnn", "train_tokens_per_s": 1000.0, "decode_sents_per_s": 40.0, "bleu": 30.0}
    rows = [
        row | {"toolkit": "joeynmt", "bleu_lc_tok": 31.0, "train_wall_s": 3000.0},
        row | {"toolkit": "attnrepro", "train_tokens_per_s": 3500.0, "decode_sents_per_s": 90.0, "bleu": 31.25}
        | {"bleu_lc_tok": 31.5, "train_wall_s": 1200.0},
    ]  # fmt: skip
    lines = bench.comparison_lines(rows, plateau=True)
    assert lines[1].endswith("| lc. tok. BLEU ours - Joey | training wall time, Joey / ours |")
    assert lines[-1] == "| rnn | 3.50x | 2.25x | +1.25 | +0.50 | 2.50x |"
    assert bench.comparison_lines(rows, plateau=False)[-1] == "| rnn | 3.50x | 2.25x | +1.25 |"
