"""Checkpoint files: atomic, weights-only loads that name a bad file, every RNG state, averaging."""

from __future__ import annotations

import argparse
import dataclasses
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml

from attnrepro.config import ConfigError, from_dict
from attnrepro.data.tokenize import load_tokenizer
from attnrepro.training.checkpoint import (
    atomic_save,
    average_checkpoints,
    keep_for_averaging,
    kept_checkpoints,
    load_checkpoint,
    rng_state,
    set_rng_state,
)
from attnrepro.training.loop import train

from conftest import REPO


def _draws() -> tuple:
    return random.random(), float(np.random.rand()), float(np.random.randn()), torch.rand(3), torch.randn(2)


def test_every_rng_state_survives_a_weights_only_round_trip(tmp_path):
    np.random.randn()  # NumPy caches the second Gaussian of a pair: that is state too
    atomic_save({"rng": rng_state()}, tmp_path / "rng.pt")
    expected = _draws()
    _draws()  # move every generator on
    set_rng_state(load_checkpoint(tmp_path / "rng.pt", ("rng",))["rng"])
    again = _draws()
    assert again[:3] == expected[:3]
    assert torch.equal(again[3], expected[3]) and torch.equal(again[4], expected[4])


def test_checkpoint_write_is_atomic_and_bad_files_are_named(tmp_path):
    path = tmp_path / "ckpt.pt"
    atomic_save({"model": {"x": torch.ones(2)}}, path)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temp file left behind
    path.write_bytes(path.read_bytes()[:20])  # truncated
    with pytest.raises(ValueError, match=f"{path}: not a readable attnrepro checkpoint"):
        load_checkpoint(path)

    text = tmp_path / "notes.pt"
    text.write_text("not a checkpoint at all\n")
    with pytest.raises(ValueError, match=str(text)):
        load_checkpoint(text)

    pickled = tmp_path / "pickle.pt"  # a foreign checkpoint holding arbitrary objects (fairseq keeps a Namespace)
    torch.save({"model": {}, "args": argparse.Namespace(lr=1)}, pickled)
    with pytest.raises(ValueError, match=f"{pickled}: not a readable"):
        load_checkpoint(pickled)

    foreign = tmp_path / "foreign.pt"  # loads fine, but is not ours
    torch.save({"state_dict": {"w": torch.zeros(1)}}, foreign)
    with pytest.raises(ValueError, match=f"{foreign}: not an attnrepro checkpoint of this kind \\(missing model\\)"):
        load_checkpoint(foreign)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "absent.pt")


def test_averaging_two_checkpoints_gives_their_exact_mean(tmp_path):
    gen = torch.Generator().manual_seed(0)
    a = {"w": torch.randn(5, 4, generator=gen), "b": torch.randint(-512, 512, (7,), generator=gen) / 64.0,
         "count": torch.tensor(3)}  # fmt: skip
    b = {"w": torch.randn(5, 4, generator=gen), "b": torch.randint(-512, 512, (7,), generator=gen) / 64.0,
         "count": torch.tensor(9)}  # fmt: skip
    atomic_save({"model": a}, tmp_path / "a.pt")
    atomic_save({"model": b}, tmp_path / "b.pt")
    mean = average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])
    assert mean["w"].dtype == torch.float32
    assert torch.equal(mean["w"], ((a["w"].double() + b["w"].double()) / 2).float())  # exact, rounded once
    assert torch.equal(mean["b"] * 2, a["b"] + b["b"])  # dyadic values: the float32 mean is exact
    assert int(mean["count"]) == 9  # integer buffers come from the last checkpoint

    atomic_save({"model": {"w": torch.zeros(3)}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "other.pt"])


def test_only_the_last_checkpoints_are_kept(tmp_path):
    for step in (5, 10, 15, 20):
        keep_for_averaging({"w": torch.full((2,), float(step))}, step, tmp_path, keep=3)
    assert list(kept_checkpoints(tmp_path)) == [10, 15, 20]


def test_average_verb_means_the_kept_checkpoints_of_a_run(test_config, tiny_corpus, tmp_path):
    """Train with average_last 2; `attnrepro average` writes the mean of the weights at steps 10 and 15."""
    mc = test_config.model("rnnsearch10")
    mc = dataclasses.replace(mc, train=dataclasses.replace(mc.train, max_steps=15, checkpoint_every=5, average_last=2))
    vocab = [len(load_tokenizer(test_config.tokenizer, tiny_corpus / f"tokenizer/{s}.model")) for s in ("src", "tgt")]
    final = train(mc, tiny_corpus / "encoded/train.npz", tiny_corpus / "encoded/valid.npz", *vocab, tmp_path / "m",
                  progress=False)  # fmt: skip
    kept = kept_checkpoints(tmp_path / "m/resume/kept")
    assert list(kept) == [10, 15]
    final_weights = load_checkpoint(final)["model"]
    assert all(torch.equal(load_checkpoint(kept[15])["model"][k], v) for k, v in final_weights.items())

    config = tmp_path / "config.yaml"
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"]["rnnsearch10"]["train"].update(max_steps=15, checkpoint_every=5, average_last=2)
    config.write_text(yaml.safe_dump(raw))
    out = tmp_path / "m/averaged.pt"
    command = [sys.executable, "-m", "attnrepro.cli", "average", "--config", str(config), "--model", "rnnsearch10",
               "--checkpoint", str(final), "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "steps 10, 15" in done.stdout
    averaged = load_checkpoint(out)
    assert averaged["averaged_steps"] == [10, 15] and averaged["arch"] == "rnnsearch"
    at10 = load_checkpoint(kept[10])["model"]
    for name, value in final_weights.items():
        assert torch.equal(averaged["model"][name], ((value.double() + at10[name].double()) / 2).float())

    raw["models"]["rnnsearch10"]["train"]["average_last"] = 4  # only 3 checkpoints (5, 10, 15) are written
    with pytest.raises(ConfigError, match="models.rnnsearch10.train.average_last=4"):
        from_dict(raw)
