"""The training loop: it learns, its schedule follows the papers, resume is bit-exact after a
kill -9 of the whole Snakemake tree, a signal checkpoints and exits 75, bad numbers never
overwrite a good checkpoint, and TensorBoard shows each step once."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from attnrepro.config import ModelConfig, TrainConfig
from attnrepro.data.tokenize import load_tokenizer
from attnrepro.errors import ConfigError, DataError, TrainingError
from attnrepro.training.launch import PREEMPTED_EXIT_CODE
from attnrepro.training.loop import atomic_save, load_checkpoint, seed_everything, train
from attnrepro.training.schedule import lr_at, make_optimizer
from attnrepro.training.validation import ValidBleu

from conftest import REPO, rnnsearch10_config

DROPOUT_TRANSFORMER = {"d_model": 16, "d_ff": 32, "heads": 2, "layers": 2, "dropout": 0.3, "share_embeddings": False}


def _vocab(test_config, corpus: Path) -> list[int]:
    return [len(load_tokenizer(test_config.tokenizer, corpus / f"tokenizer/{s}.model")) for s in ("src", "tgt")]


def _run(test_config, corpus: Path, out: Path, model: str | ModelConfig = "rnnsearch10", valid_bleu=None, **overrides):
    mc = test_config.model(model) if isinstance(model, str) else model
    mc = dataclasses.replace(mc, train=dataclasses.replace(mc.train, **overrides))
    vocab = _vocab(test_config, corpus)
    return train(
        mc,
        corpus / "encoded/train.npz",
        corpus / "encoded/valid.npz",
        *vocab,
        out,
        progress=False,
        valid_bleu=valid_bleu,
    )


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def _identical(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def _log_rows(path: Path, drop=("tokens_per_s",)) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(f)]


def _scalars(tb_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tb_dir))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_training_lowers_the_loss_and_logs_every_field(test_config, tiny_corpus, tmp_path):
    ckpt = _run(test_config, tiny_corpus, tmp_path / "run", max_steps=40, log_every=10, valid_every=20)
    log = (tmp_path / "run/train_log.csv").read_text().splitlines()
    assert log[0] == "step,epoch,loss,lr,tokens_per_s,nonpad_fraction,valid_loss,src_tokens,tgt_tokens,valid_bleu"
    rows = _log_rows(tmp_path / "run/train_log.csv", drop=())
    assert [int(r["step"]) for r in rows] == [10, 20, 30, 40]
    assert float(rows[-1]["loss"]) < float(rows[0]["loss"]) - 0.5
    assert rows[1]["valid_loss"] and rows[3]["valid_loss"] and not rows[0]["valid_loss"]
    assert all(float(r["nonpad_fraction"]) > 0.8 for r in rows)
    tgt_tokens = [int(r["tgt_tokens"]) for r in rows]
    assert tgt_tokens == sorted(tgt_tokens) and tgt_tokens[0] > 0  # cumulative
    final = load_checkpoint(ckpt)
    assert (final["step"], final["stopped_at"], final["stop_reason"]) == (40, 40, "max_steps")  # patience 0
    assert final["valid_loss"] == float(rows[-1]["valid_loss"])  # of the weights it holds: the last
    # the same numbers as TensorBoard scalars beside the CSV
    tb = tmp_path / "run/tb"
    assert _scalars(tb, "train/loss") == [(int(r["step"]), pytest.approx(float(r["loss"]))) for r in rows]
    assert [s for s, _ in _scalars(tb, "valid/loss")] == [20, 40]
    assert [v for _, v in _scalars(tb, "train/lr")] == [pytest.approx(0.003)] * 4
    assert all(v > 0 for _, v in _scalars(tb, "train/tokens_per_s"))


def test_valid_bleu_is_logged(test_config, tiny_corpus, tmp_path):
    from attnrepro.data.batching import Corpus

    tgt_tok = load_tokenizer(test_config.tokenizer, tiny_corpus / "tokenizer/tgt.model")
    bleu = ValidBleu(Corpus.load(tiny_corpus / "encoded/valid.npz"), tgt_tok, test_config.search)
    assert bleu.references[0] == (tiny_corpus / "data/valid.tgt").read_text().splitlines()[0]  # spm is lossless
    _run(test_config, tiny_corpus, tmp_path / "run", valid_bleu=bleu, max_steps=10, valid_every=10)
    rows = _log_rows(tmp_path / "run/train_log.csv")
    assert 0 <= float(rows[-1]["valid_bleu"]) <= 100 and rows[0]["valid_bleu"] == ""
    assert [s for s, _ in _scalars(tmp_path / "run/tb", "valid/bleu")] == [10]


def test_no_two_seeds_ranks_or_epochs_share_a_random_stream(test_config, tiny_corpus, tmp_path):
    """Seeds 1-4 x ranks 0-2 start from generators of their own, and seeds 1-4 x epochs 0-3 draw batch orders of
    their own (seed + rank and seed + epoch gave seed 1's rank or epoch 1 the streams of seed 2's 0)."""
    from attnrepro.training.distributed import Ranks
    from attnrepro.training.loop import Trainer

    mc, vocab, data = test_config.model("rnnsearch10"), _vocab(test_config, tiny_corpus), tiny_corpus / "encoded"
    generators, orders = {}, {}
    for seed in range(1, 5):
        for rank in range(3):  # one process each (world size 1): the seeding a rank of a larger job gets
            run = dataclasses.replace(mc, train=dataclasses.replace(mc.train, seed=seed))
            trainer = Trainer(run, data / "train.npz", data / "valid.npz", vocab, tmp_path / f"{seed}-{rank}",
                              Ranks(rank=rank), torch.device("cpu"), None)  # fmt: skip
            generators[seed, rank] = (torch.initial_seed(), np.random.get_state()[1][:4].tobytes(), random.random())
            orders |= {(seed, e): tuple(map(tuple, trainer.epoch_batches(e))) for e in range(4) if rank == 0}
            trainer.log.close()
    assert len(set(generators.values())) == 12 and len(set(orders.values())) == 16


@pytest.mark.parametrize("model", ["rnnsearch10", "transformer_dropout"])
def test_resume_in_process_is_bit_identical(test_config, tiny_corpus, tmp_path, model):
    # A transformer with dropout 0.3 draws from torch's RNG every step: resume must restore it.
    mc = test_config.model("rnnsearch10")
    if model == "transformer_dropout":
        mc = ModelConfig("t", "transformer", "t", DROPOUT_TRANSFORMER, mc.train)
    straight = _run(test_config, tiny_corpus, tmp_path / "a", mc, max_steps=30, checkpoint_every=10, log_every=4)
    _run(test_config, tiny_corpus, tmp_path / "b", mc, max_steps=17, checkpoint_every=10, log_every=4)  # stops at 17
    resumed = _run(test_config, tiny_corpus, tmp_path / "b", mc, max_steps=30, checkpoint_every=10, log_every=4)
    assert _identical(straight, resumed)
    a, b = _log_rows(tmp_path / "a/train_log.csv"), _log_rows(tmp_path / "b/train_log.csv")
    assert [r["step"] for r in b] == [
        "4",
        "8",
        "10",
        "12",
        "16",
        "17",
        "20",
        "24",
        "28",
        "30",
    ]  # the first run logged 17
    assert b[:5] == a[:5] and b[-1]["tgt_tokens"] == a[-1]["tgt_tokens"]
    assert [s for s, _ in _scalars(tmp_path / "b/tb", "train/loss")] == [4, 8, 10, 12, 16, 17, 20, 24, 28, 30]


def _train_command(config: Path, corpus: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "attnrepro.cli", "train", "--config", str(config), "--model", "rnnsearch10",
        "--tokenizer-dir", str(corpus / "tokenizer"), "--train", str(corpus / "encoded/train.npz"),
        "--valid", str(corpus / "encoded/valid.npz"), "--no-progress", "--out-dir", str(out),
    ]  # fmt: skip


def _start_and_signal(command: list[str], sig: int) -> tuple[subprocess.Popen, str]:
    """Start training, send `sig` once its loop is about to run, return the finished process and its output."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = ""
    while "parameters" not in first:  # "rnnsearch10: rnnsearch, N parameters" comes right before step 1
        line = proc.stdout.readline()
        assert line, first
        first += line
    proc.send_signal(sig)
    rest = proc.stdout.read()
    proc.wait(timeout=120)
    return proc, first + rest


@pytest.mark.slow
def test_sigusr1_checkpoints_exits_75_and_resumes_bit_identical(tiny_corpus, tmp_path):
    config = rnnsearch10_config(tmp_path, max_steps=150, checkpoint_every=1000, log_every=7, valid_every=1000)
    subprocess.run(_train_command(config, tiny_corpus, tmp_path / "straight"), check=True, capture_output=True)

    stopped = tmp_path / "stopped"
    proc, output = _start_and_signal(_train_command(config, tiny_corpus, stopped), signal.SIGUSR1)
    assert proc.returncode == PREEMPTED_EXIT_CODE == 75, output
    at = load_checkpoint(stopped / "resume/last.pt")["step"]
    assert 0 < at < 150 and f"after step {at}" in output
    assert not (stopped / "checkpoint.pt").exists()

    rerun = subprocess.run(_train_command(config, tiny_corpus, stopped), capture_output=True, text=True, check=True)
    assert f"resuming rnnsearch10 from step {at} " in rerun.stdout
    assert _identical(tmp_path / "straight/checkpoint.pt", stopped / "checkpoint.pt")
    # no row is logged at the stop, and the rows after it average the same steps (the window is checkpointed)
    assert _log_rows(stopped / "train_log.csv") == _log_rows(tmp_path / "straight/train_log.csv")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_sigterm_and_ctrl_c_checkpoint_and_exit_75(tiny_corpus, tmp_path, sig):
    config = rnnsearch10_config(tmp_path, max_steps=5000, checkpoint_every=5000)
    proc, output = _start_and_signal(_train_command(config, tiny_corpus, tmp_path / "run"), sig)
    assert proc.returncode == 75, output
    assert f"received {sig.name}" in output and "Traceback" not in output
    assert 0 < load_checkpoint(tmp_path / "run/resume/last.pt")["step"] < 5000


def test_a_second_signal_arriving_inside_the_first_ones_handler_is_not_announced_again(monkeypatch, capsys):
    """Ctrl-C reaches the trainer as SIGINT and, through its launcher, as SIGTERM; the second handler can run
    inside the first (between two of its bytecodes). Here it runs inside the first one's print: one request,
    one announcement (a fresh-clone .ci/run of 88afe47 logged both)."""
    import attnrepro.training.signals as signals

    def print_and_be_interrupted(*args, **kwargs):
        monkeypatch.setattr(signals, "print", print, raising=False)  # the nested handler prints for real
        os.kill(os.getpid(), signal.SIGTERM)  # Python runs its handler before the next bytecode here
        print(*args, **kwargs)

    monkeypatch.setattr(signals, "print", print_and_be_interrupted, raising=False)
    with signals.stop_requests() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(3):  # bytecodes for the handlers to run
            pass
        assert stop["requested"]
    assert capsys.readouterr().out == "received SIGINT: checkpointing at the end of this update\n"


def test_resume_from_a_truncated_checkpoint_names_the_file(test_config, tiny_corpus, tmp_path):
    _run(test_config, tiny_corpus, tmp_path / "run", max_steps=5, checkpoint_every=5)
    last = tmp_path / "run/resume/last.pt"
    last.write_bytes(last.read_bytes()[:100])
    with pytest.raises(ValueError, match=str(last)):
        _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10)
    atomic_save({"model": {}}, last)  # a checkpoint, but not a resume state
    with pytest.raises(ValueError, match=f"{last}.*missing optimizer"):
        _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10)


def test_nonfinite_loss_stops_training(test_config, tiny_corpus, tmp_path):
    # An infinite learning rate ruins the weights in update 1: the loss of step 2 is not finite.
    with pytest.raises(TrainingError, match="at step 2; no checkpoint was written before it"):
        _run(test_config, tiny_corpus, tmp_path / "nan", max_steps=5, lr=float("inf"), clip_norm=0.0)
    assert not (tmp_path / "nan/checkpoint.pt").exists()


def test_bad_weights_never_overwrite_the_last_good_checkpoint(test_config, tiny_corpus, tmp_path):
    good = _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, checkpoint_every=5)
    # An Adam state that overflows (as a diverging run's would): update 11 makes the weights inf/nan,
    # and the checkpoint of step 11 is refused.
    last_path = tmp_path / "run/resume/last.pt"
    state = load_checkpoint(last_path)
    for moments in state["optimizer"]["state"].values():
        moments["exp_avg"].fill_(float("inf"))
    atomic_save(state, last_path)
    with pytest.raises(
        TrainingError, match=f"not finite after step 11; the last good checkpoint is {last_path} \\(step 10\\)"
    ):
        _run(test_config, tiny_corpus, tmp_path / "run", max_steps=20, checkpoint_every=1)
    last = load_checkpoint(last_path)
    assert last["step"] == 10
    assert all(torch.equal(last["model"][k], v) for k, v in _weights(good).items())


def test_an_unchanged_rerun_of_a_finished_run_resumes_with_no_update(test_config, tiny_corpus, tmp_path, capsys):
    first = _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, checkpoint_every=5)
    shutil.copyfile(first, tmp_path / "first.pt")
    _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, checkpoint_every=5, log_every=2)  # not fingerprinted
    assert "resuming rnnsearch10 from step 10 " in capsys.readouterr().out
    assert _identical(tmp_path / "first.pt", first) and not list(tmp_path.glob("run/resume.stale-*"))


def _with_lr(test_config, tiny_corpus, tmp_path):
    """A finished run at lr 0.003, then rerun at lr 0.01; and the same 0.01 run from scratch."""
    _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, checkpoint_every=5)
    shutil.copyfile(tmp_path / "run/checkpoint.pt", tmp_path / "old.pt")
    _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, checkpoint_every=5, lr=0.01)
    _run(test_config, tiny_corpus, tmp_path / "fresh", max_steps=10, checkpoint_every=5, lr=0.01)
    return "train.lr: 0.003 -> 0.01"


def _with_vocabulary(test_config, tiny_corpus, tmp_path):
    """The same, with a target vocabulary of 25 instead of 20 (one more id in the data)."""
    mc = test_config.model("rnnsearch10")
    mc = dataclasses.replace(mc, train=dataclasses.replace(mc.train, max_steps=10, checkpoint_every=5))
    for name, vocab in (("run", 20), ("run", 25), ("fresh", 25)):
        corpus = _write_corpus(tmp_path / f"{vocab}.npz", [TWO_SENTENCES[0], ([5, 6], [7, vocab - 1])])
        train(mc, corpus, corpus, 20, vocab, tmp_path / name, progress=False)
        if not (tmp_path / "old.pt").exists():
            shutil.copyfile(tmp_path / "run/checkpoint.pt", tmp_path / "old.pt")
    return "tgt_vocab: 20 -> 25"


@pytest.mark.parametrize("change", [_with_lr, _with_vocabulary], ids=["lr", "vocabulary"])
def test_a_changed_rerun_of_a_finished_run_trains_from_step_0(test_config, tiny_corpus, tmp_path, capsys, change):
    """Resume only into the run that wrote the state: the old state is set aside, with the reason."""
    difference = change(test_config, tiny_corpus, tmp_path)
    out = capsys.readouterr().out
    assert difference in out and "training from step 0" in out and "resuming" not in out
    assert _identical(tmp_path / "run/checkpoint.pt", tmp_path / "fresh/checkpoint.pt")
    old, new = _weights(tmp_path / "old.pt"), _weights(tmp_path / "run/checkpoint.pt")
    assert any(not torch.equal(old[k], new[k]) for k in old)  # values (lr) or shapes (vocabulary) differ
    assert _log_rows(tmp_path / "run/train_log.csv") == _log_rows(tmp_path / "fresh/train_log.csv")
    (aside,) = tmp_path.glob("run/resume.stale-*")
    assert load_checkpoint(aside / "last.pt")["step"] == 10  # set aside, not deleted
    assert load_checkpoint(tmp_path / "run/resume/last.pt")["step"] == 10


def test_a_fingerprint_names_what_differs():
    from attnrepro.training.checkpoint import UNFINGERPRINTED, fingerprint_differences

    saved = {"arch": "rnnsearch", "train": {"lr": 0.003, "betas": (0.9, 0.98)}, "batches_per_update": 2}
    assert fingerprint_differences(saved, saved) == []
    now = {"arch": "rnnsearch", "train": {"lr": 0.003, "betas": (0.9, 0.98), "patience": 3}, "batches_per_update": 4}
    assert fingerprint_differences(saved, now) == ["batches_per_update: 2 -> 4", "train.patience: '(absent)' -> 3"]
    assert fingerprint_differences(None, now) == ["no fingerprint (written by an older attnrepro)"]
    assert "lr" not in UNFINGERPRINTED and "max_steps" in UNFINGERPRINTED


def test_a_run_past_a_lowered_max_steps_trains_from_step_0(test_config, tiny_corpus, tmp_path, capsys):
    _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, checkpoint_every=5)
    _run(test_config, tiny_corpus, tmp_path / "run", max_steps=6, checkpoint_every=5)
    assert "train.max_steps: 6 is below its step 10" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / "run/checkpoint.pt")["step"] == 6


def test_gradient_accumulation_covers_update_tokens():
    tc = TrainConfig(batch_tokens=4096, update_tokens=50000)  # Vaswani: ~25k source + 25k target tokens
    assert [tc.batches_per_update(n) for n in (1, 2, 8)] == [13, 14, 16]  # a multiple of the ranks
    assert TrainConfig().batches_per_update(1) == 1 and TrainConfig().batches_per_update(4) == 4


def test_inverse_sqrt_schedule_is_vaswani_eq_3():
    tc = TrainConfig(schedule="inverse_sqrt", warmup_steps=4000, lr=1.0)
    for step in (1, 4000, 16000):
        assert lr_at(tc, step, 512) == pytest.approx(512**-0.5 * min(step**-0.5, step * 4000**-1.5))
    assert lr_at(tc, 4000, 512) == pytest.approx(512**-0.5 / 4000**0.5)
    assert lr_at(TrainConfig(lr=0.3), 10) == 0.3


def _write_corpus(path: Path, pairs: list[tuple[list[int], list[int]]]) -> Path:
    """An encoded corpus (.npz as encode_corpus writes it) from (source ids, target ids) pairs."""
    arrays = {}
    for side, rows in (("src", [p[0] for p in pairs]), ("tgt", [p[1] for p in pairs])):
        arrays[f"{side}_ids"] = np.array([i for row in rows for i in row], dtype=np.uint16)
        arrays[f"{side}_offsets"] = np.cumsum([0] + [len(row) for row in rows]).astype(np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


TINY_RNNSEARCH = {"emb": 8, "hidden": 12, "align": 10, "maxout": 6}
TWO_SENTENCES = [([5, 6, 7], [8, 9]), ([10, 11, 12, 13], [14, 15, 16, 17, 18])]  # 3 and 6 target tokens with </s>


@pytest.mark.parametrize("accumulate", [False, True], ids=["one_batch", "two_micro_batches"])
@pytest.mark.parametrize("loss_norm", ["token", "sentence"])
def test_the_gradient_is_the_summed_token_losses_over_sentences_or_tokens(tmp_path, loss_norm, accumulate):
    """One SGD step at lr 1 moves the weights by minus the gradient; compare it with autograd's by hand.

    sentence: (sum of the two sentences' token losses) / 2 (Sutskever 3.4, dl4mt); token: / 9 tokens."""
    from attnrepro.data.batching import Corpus, collate
    from attnrepro.models import build_model

    corpus_path = _write_corpus(tmp_path / "two.npz", TWO_SENTENCES)
    params = {"emb": 8, "hidden": 12, "align": 10, "maxout": 6, "init": "pytorch"}
    # accumulate: batches of one sentence each (11 padded tokens at most), two of them per update
    batching = {"batch_tokens": 12, "update_tokens": 24} if accumulate else {"batch_tokens": 100}
    tc = TrainConfig(optimizer="sgd", lr=1.0, clip_norm=0.0, max_steps=1, loss_norm=loss_norm, **batching)
    mc = ModelConfig("two", "rnnsearch", "two", params, tc)
    final = train(mc, corpus_path, corpus_path, 20, 20, tmp_path / "run", progress=False)

    seed_everything(tc.seed, 0)  # the loop's initial weights
    model = build_model("rnnsearch", 20, 20, params)
    batch = collate(Corpus.load(corpus_path), np.arange(2))
    logits = model(batch.src, batch.src_mask, batch.tgt_in)
    summed = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0,
                                               reduction="sum")  # fmt: skip
    (summed / (2 if loss_norm == "sentence" else 9)).backward()
    after = _weights(final)
    for name, weight in model.named_parameters():
        step = weight.detach() - after[name]
        assert torch.allclose(step, weight.grad, rtol=1e-4, atol=1e-7), name
    assert any(float(w.grad.abs().max()) > 1e-3 for w in model.parameters())
    # the logged loss is per target token under either norm
    assert float(_log_rows(tmp_path / "run/train_log.csv")[0]["loss"]) == pytest.approx(summed.item() / 9, abs=1e-5)


def test_the_length_filter_is_on_pairs_and_says_what_it_removed(tmp_path, capsys):
    """Bahdanau's -30/-50 models saw pairs of at most 30/50 words on both sides: a long target is dropped."""
    from attnrepro.config import from_dict

    pairs = [([5, 6, 7], [8, 9]), ([5, 6, 7], [8] * 8), ([5] * 7, [8, 9]), ([5, 6], [])]  # ok, long tgt/src, empty
    corpus = _write_corpus(tmp_path / "c.npz", pairs)
    tc = TrainConfig(optimizer="sgd", lr=0.1, max_steps=1, max_src_len=5, batch_tokens=1000)
    assert tc.max_tgt_len == 5  # defaults to max_src_len
    mc = ModelConfig("f", "rnnsearch", "f", TINY_RNNSEARCH, tc)
    train(mc, corpus, corpus, 20, 20, tmp_path / "run", progress=False)
    assert "1 of 4 training pairs kept" in capsys.readouterr().out
    record = json.loads((tmp_path / "run/filter.json").read_text())
    removed = record.pop("removed")
    assert record == {"pairs": 4, "kept": 1, "max_src_len": 5, "max_tgt_len": 5}
    assert removed == {"empty_source": 0, "empty_target": 1, "long_source": 1, "long_target": 1}
    assert _log_rows(tmp_path / "run/train_log.csv")[0]["tgt_tokens"] == "3"  # the first pair alone (+ </s>)

    wide = dataclasses.replace(mc, train=dataclasses.replace(tc, max_tgt_len=8))
    train(wide, corpus, corpus, 20, 20, tmp_path / "wide", progress=False)
    assert json.loads((tmp_path / "wide/filter.json").read_text())["kept"] == 2
    assert _log_rows(tmp_path / "wide/train_log.csv")[0]["tgt_tokens"] == str(3 + 9)

    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    assert from_dict(raw).model("rnnsearch10").train.max_tgt_len == 10  # the schema leaves it to max_src_len
    raw["models"]["rnnsearch10"]["train"]["max_tgt_len"] = 14
    assert from_dict(raw).model("rnnsearch10").train.max_tgt_len == 14


def test_a_valid_pair_with_an_empty_source_is_left_out_and_named(tmp_path, capsys):
    """It crashed the encoder at the first validation; now valid_loss is that of the other pairs."""
    corpus = _write_corpus(tmp_path / "train.npz", TWO_SENTENCES)
    valid = _write_corpus(tmp_path / "valid.npz", [TWO_SENTENCES[0], ([], [8, 9]), TWO_SENTENCES[1]])
    mc = ModelConfig("v", "rnnsearch", "v", TINY_RNNSEARCH, TrainConfig(optimizer="adam", lr=0.01, max_steps=2))
    train(mc, corpus, valid, 20, 20, tmp_path / "gap", progress=False)
    assert f"{valid}: 1 pair(s) with an empty source left out of valid_loss (lines 2)" in capsys.readouterr().out
    train(mc, corpus, corpus, 20, 20, tmp_path / "clean", progress=False)  # the same pairs without the empty one
    gap, clean = (_log_rows(tmp_path / f"{run}/train_log.csv")[-1]["valid_loss"] for run in ("gap", "clean"))
    assert float(gap) == float(clean) > 0


def test_the_sentence_average_weighs_every_validation_sentence_the_same(tmp_path):
    from attnrepro.data.batching import Corpus, collate
    from attnrepro.models import build_model
    from attnrepro.training.validation import valid_loss

    pairs = [([5, 6, 7], [8, 9]), ([5] * 7, [8, 9, 10, 11, 12, 13, 14, 15])]  # targets of 3 and 9 tokens with </s>
    corpus = Corpus.load(_write_corpus(tmp_path / "v.npz", pairs))
    torch.manual_seed(0)
    model = build_model("rnnsearch", 20, 20, TINY_RNNSEARCH).eval()
    with torch.no_grad():
        for weight in model.parameters():  # far from uniform predictions, whose every token costs ln 20
            weight.normal_(std=0.5)
        losses = []  # each sentence's token losses, alone in its batch
        for i in range(2):
            batch = collate(corpus, np.array([i]))
            logits = model(batch.src, batch.src_mask, batch.tgt_in)
            losses.append(torch.nn.functional.cross_entropy(logits[0], batch.tgt_out[0], reduction="none"))
    per_token = float(torch.cat(losses).mean())  # 12 tokens: the long sentence weighs 9 / 12
    per_sentence = float((losses[0].mean() + losses[1].mean()) / 2)
    assert valid_loss(model, corpus, 1000) == pytest.approx(per_token, rel=1e-6)
    assert valid_loss(model, corpus, 1000, average="sentence") == pytest.approx(per_sentence, rel=1e-6)
    assert per_token != pytest.approx(per_sentence, rel=1e-3)


def test_valid_length_filter_validates_on_the_training_lengths_only(tmp_path, capsys):
    """A -30 model's early stopping looks at the lengths it trains on, not at longer sentences."""
    corpus = _write_corpus(tmp_path / "train.npz", TWO_SENTENCES)
    long_pair = ([5] * 9, [8] * 9)
    valid = _write_corpus(tmp_path / "valid.npz", [TWO_SENTENCES[0], long_pair, TWO_SENTENCES[1]])
    tc = TrainConfig(optimizer="adam", lr=0.01, max_steps=2, max_src_len=5, valid_length_filter=True)
    mc = ModelConfig("v", "rnnsearch", "v", TINY_RNNSEARCH, tc)
    train(mc, corpus, valid, 20, 20, tmp_path / "filtered", progress=False)
    assert "v: validating on the 2 of 3 validation pairs within 5 source / 5 target tokens" in capsys.readouterr().out
    train(mc, corpus, corpus, 20, 20, tmp_path / "short", progress=False)  # the same pairs without the long one
    unfiltered = dataclasses.replace(mc, train=dataclasses.replace(tc, valid_length_filter=False))
    train(unfiltered, corpus, valid, 20, 20, tmp_path / "all", progress=False)
    filtered, short, every = (
        float(_log_rows(tmp_path / f"{run}/train_log.csv")[-1]["valid_loss"]) for run in ("filtered", "short", "all")
    )
    assert filtered == short != every
    too_short = dataclasses.replace(mc, train=dataclasses.replace(tc, max_src_len=1, max_tgt_len=9))
    with pytest.raises(DataError, match=f"{valid}: no validation pair within max_src_len 1 / max_tgt_len 9"):
        train(too_short, valid, valid, 20, 20, tmp_path / "none", progress=False)


@pytest.mark.parametrize("pairs", [[], [([], [5]), ([], [])]], ids=["empty_split", "only_empty_sources"])
def test_a_valid_split_with_nothing_to_score_stops_before_training(tmp_path, pairs):
    """An empty valid split logged valid_loss 0.0, as if it were perfect."""
    corpus = _write_corpus(tmp_path / "train.npz", TWO_SENTENCES)
    valid = _write_corpus(tmp_path / "valid.npz", pairs)
    mc = ModelConfig("v", "rnnsearch", "v", TINY_RNNSEARCH, TrainConfig(optimizer="adam", max_steps=2))
    with pytest.raises(DataError, match=f"{valid}: the validation split has no pair with a non-empty source"):
        train(mc, corpus, valid, 20, 20, tmp_path / "run", progress=False)
    assert not (tmp_path / "run/resume/last.pt").exists()


def test_the_plateau_rule_counts_from_the_last_real_improvement_and_keeps_the_lowest_loss():
    from attnrepro.training.state import EarlyStopping

    early = EarlyStopping()
    for step, loss in enumerate([3.0, 2.0, 1.995, 1.991], start=1):
        assert not early.stopped
        early.record(loss, step, min_delta=0.01, patience=2)
    # 1.995 and 1.991 are each below the best so far, but neither lowers the perplexity 1 % below exp(2.0)
    assert (early.stopped, early.without_improvement, early.reference) == (True, 2, 2.0)
    assert (early.best_step, early.best_loss, early.last_loss) == (4, 1.991, 1.991)
    never = EarlyStopping()
    for step in range(1, 10):
        never.record(3.0, step, min_delta=0.01, patience=0)  # patience 0: kept, never stops
    assert not never.stopped and never.best_step == 1


@pytest.mark.parametrize(
    ("losses", "improved"),
    [([3.0, 2.985], True), ([3.0, 2.995], False), ([0.1, 0.0899], True), ([0.1, 0.095], False)],
    ids=["high_0.015_nats", "high_0.005_nats", "low_0.0101_nats", "low_5_percent_of_the_loss"],
)
def test_an_improvement_is_a_1_percent_fall_of_the_perplexity_whatever_the_loss(losses, improved):
    """-ln(0.99) = 0.01005 nats: 0.5 % of a loss of 3 counts, 5 % of a loss of 0.1 does not."""
    from attnrepro.training.state import EarlyStopping

    early = EarlyStopping()
    for step, loss in enumerate(losses, start=1):
        early.record(loss, step, min_delta=0.01, patience=1)
    assert early.stopped is not improved and early.best_loss == losses[-1]


def test_with_min_delta_0_an_equal_loss_is_no_improvement_and_a_flat_loss_stops():
    """min_delta 0 asks for any fall, however small: five equal validations with patience 2 stop at the third."""
    from attnrepro.training.state import EarlyStopping

    flat, stopped_at = EarlyStopping(), None
    for step in range(1, 6):
        flat.record(2.5, step, min_delta=0.0, patience=2)
        stopped_at = stopped_at or (step if flat.stopped else None)
    assert (stopped_at, flat.reference, flat.best_step) == (3, 2.5, 1)
    falling = EarlyStopping()
    for step, loss in enumerate([2.5, 2.49999, 2.49998, 2.49997], start=1):  # 1e-5: the logged resolution
        falling.record(loss, step, min_delta=0.0, patience=2)
    assert not falling.stopped and (falling.without_improvement, falling.reference) == (0, 2.49997)


def test_a_plateau_lowers_the_learning_rate_while_decays_remain_then_stops():
    from attnrepro.training.state import EarlyStopping

    early, scales = EarlyStopping(), []
    losses = [3.0, 2.0, 2.0, 2.0, 1.9, 1.9, 1.9, 1.89, 1.89]  # plateaus at 2.0 and 1.9 (patience 2), then 1.89
    for step, loss in enumerate(losses, start=1):
        assert not early.stopped
        early.record(loss, step, min_delta=0.01, patience=2, decay=0.5, decays=2)
        scales.append(early.lr_scale)
    assert scales == [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]  # each plateau: half the rate, the count anew
    assert early.stopped and early.decays_done == 2 and (early.best_step, early.best_loss) == (8, 1.89)
    restored = EarlyStopping.from_checkpoint(early.to_checkpoint())  # resume continues with the lowered rate
    assert (restored.lr_scale, restored.decays_done) == (0.25, 2)
    assert EarlyStopping.from_checkpoint({k: v for k, v in early.to_checkpoint().items()
                                          if k not in ("lr_scale", "decays_done")}).lr_scale == 1.0  # fmt: skip


def test_the_learning_rate_of_a_run_follows_its_plateaus(test_config, tiny_corpus, tmp_path):
    """lr 1e-9 keeps the validation loss flat: plateaus after validations 1+2 and 1+2+2 (patience 2, every 3
    updates) halve the rate twice, the third stops training."""
    _run(test_config, tiny_corpus, tmp_path / "run", lr=1e-9, patience=2, valid_every=3, log_every=3, max_steps=300,
         plateau_decay=0.5, plateau_decays=2)  # fmt: skip
    rates = [(int(r["step"]), float(r["lr"])) for r in _log_rows(tmp_path / "run/train_log.csv")]
    assert rates == [(3, 1e-9), (6, 1e-9), (9, 1e-9), (12, 5e-10), (15, 5e-10), (18, 2.5e-10), (21, 2.5e-10)]
    assert load_checkpoint(tmp_path / "run/checkpoint.pt")["stopped_at"] == 21


def test_a_constant_validation_loss_stops_after_patience_validations(test_config, tiny_corpus, tmp_path):
    """At lr 1e-9 the validation loss does not move: the first validation is the best, and the
    third after it (patience 3, every 4 updates) stops training at step 16 of 300."""
    ckpt = _run(test_config, tiny_corpus, tmp_path / "run", lr=1e-9, patience=3, valid_every=4, max_steps=300)
    final = load_checkpoint(ckpt)
    assert (final["step"], final["stopped_at"], final["stop_reason"]) == (4, 16, "plateau")
    losses = [float(r["valid_loss"]) for r in _log_rows(tmp_path / "run/train_log.csv") if r["valid_loss"]]
    assert len(losses) == 4 and len(set(losses)) == 1 and final["valid_loss"] == losses[0]
    assert _identical(ckpt, tmp_path / "run/resume/best.pt")


EARLY = {"lr": 0.003, "patience": 2, "min_delta": 0.02, "valid_every": 5, "checkpoint_every": 1000, "log_every": 5}


def _plateau_counts(valid: list[tuple[int, float]], min_delta: float) -> list[tuple[int, int]]:
    """(step, validations without improvement) after each logged validation, by the rule."""
    reference, without, counts = math.inf, 0, []
    for step, loss in valid:
        reference, without = (loss, 0) if loss <= reference + math.log1p(-min_delta) else (reference, without + 1)
        counts.append((step, without))
    return counts


def _plateau_step(valid: list[tuple[int, float]], patience: int, min_delta: float) -> int:
    """The step the rule stops at, from the logged validation losses."""
    return next((step for step, without in _plateau_counts(valid, min_delta) if without == patience), -1)


def test_early_stopping_translates_the_best_weights_and_resumes_inside_a_patience_window(
    test_config, tiny_corpus, tmp_path
):
    straight = _run(test_config, tiny_corpus, tmp_path / "straight", max_steps=300, **EARLY)
    rows = _log_rows(tmp_path / "straight/train_log.csv")
    valid = [(int(r["step"]), float(r["valid_loss"])) for r in rows if r["valid_loss"]]
    final = load_checkpoint(straight)
    best_step, best_loss = min(valid, key=lambda sv: sv[1])
    assert final["stopped_at"] == _plateau_step(valid, 2, 0.02) == int(rows[-1]["step"]) < 300
    assert (final["step"], final["valid_loss"], final["stop_reason"]) == (best_step, best_loss, "plateau")
    assert final["step"] <= final["stopped_at"]  # best weights wherever they fell (a flat loss: earlier, test above)
    assert _identical(straight, tmp_path / "straight/resume/best.pt")

    # Interrupted right after the first validation without improvement, then resumed.
    middle = next(step for step, without in _plateau_counts(valid, EARLY["min_delta"]) if without == 1)
    _run(test_config, tiny_corpus, tmp_path / "resumed", max_steps=middle, **EARLY)
    at_middle = load_checkpoint(tmp_path / "resumed/resume/last.pt")["early_stopping"]
    assert (at_middle["without_improvement"], at_middle["stopped"]) == (1, False)
    resumed = _run(test_config, tiny_corpus, tmp_path / "resumed", max_steps=300, **EARLY)
    assert _identical(straight, resumed)
    assert {k: load_checkpoint(resumed)[k] for k in ("step", "stopped_at", "valid_loss", "stop_reason")} == {
        k: final[k] for k in ("step", "stopped_at", "valid_loss", "stop_reason")
    }
    assert _log_rows(tmp_path / "resumed/train_log.csv") == rows


def test_a_run_continued_past_an_off_cadence_cap_stops_where_a_run_started_with_the_larger_cap_stops(
    test_config, tiny_corpus, tmp_path
):
    """lr 1e-9 keeps the validation loss flat: with patience 3, validations every 4 updates, a run stops at
    16 (test above). Capped at 10 first, it validates at 10 too; continued to 300, it must still stop at 16
    (counting the check at 10 stopped it at 12) and translate the same weights."""
    flat = {"lr": 1e-9, "patience": 3, "valid_every": 4, "log_every": 4, "checkpoint_every": 1000}
    straight = _run(test_config, tiny_corpus, tmp_path / "straight", max_steps=300, **flat)
    capped = load_checkpoint(_run(test_config, tiny_corpus, tmp_path / "continued", max_steps=10, **flat))
    assert (capped["step"], capped["stopped_at"], capped["stop_reason"]) == (4, 10, "max_steps")
    continued = _run(test_config, tiny_corpus, tmp_path / "continued", max_steps=300, **flat)
    keys = ("step", "stopped_at", "valid_loss", "stop_reason")
    assert {k: load_checkpoint(continued)[k] for k in keys} == {k: load_checkpoint(straight)[k] for k in keys}
    assert load_checkpoint(straight)["stopped_at"] == 16 and _identical(straight, continued)
    logged = [r["step"] for r in _log_rows(tmp_path / "continued/train_log.csv") if r["valid_loss"]]
    assert logged == ["4", "8", "10", "12", "16"]  # the cap's validation is logged all the same


def test_a_run_ending_at_an_off_cadence_cap_translates_its_last_weights_when_they_validate_best(
    test_config, tiny_corpus, tmp_path
):
    """Validations at 4 and 8, and at the cap 10; the loss still falls, so the weights of step 10 are
    translated, also when a rerun finds the run finished in resume/last.pt and checkpoint.pt gone."""
    ckpt = _run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, patience=3, valid_every=4, log_every=2)
    final = load_checkpoint(ckpt)
    valid = {
        int(r["step"]): float(r["valid_loss"]) for r in _log_rows(tmp_path / "run/train_log.csv") if r["valid_loss"]
    }
    assert list(valid) == [4, 8, 10] and valid[10] < valid[8] < valid[4]
    assert (final["step"], final["stopped_at"], final["valid_loss"]) == (10, 10, valid[10])
    assert _identical(ckpt, tmp_path / "run/resume/last.pt")
    first = _weights(ckpt)
    ckpt.unlink()  # killed after last.pt, before checkpoint.pt: the rerun measures the cap's validation again
    again = load_checkpoint(_run(test_config, tiny_corpus, tmp_path / "run", max_steps=10, patience=3, valid_every=4))
    assert (again["step"], again["valid_loss"]) == (10, valid[10])
    assert all(torch.equal(first[k], again["model"][k]) for k in first)


def test_patience_and_checkpoint_averaging_exclude_each_other():
    from attnrepro.config import from_dict, load_config

    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"]["rnnsearch10"]["train"].update(patience=3, average_last=2)
    with pytest.raises(ConfigError, match="models.rnnsearch10.train: patience=3 .* average_last=2"):
        from_dict(raw)
    raw["models"]["rnnsearch10"]["train"]["average_last"] = 1
    tc = from_dict(raw).model("rnnsearch10").train
    assert (tc.patience, tc.min_delta) == (3, 0.01)  # 1 % by default
    assert TrainConfig().patience == 0  # fixed-length training unless a config asks
    for name in ("wmt14_en_fr.yaml", "wmt14_en_de.yaml"):  # the papers trained for a fixed budget
        assert {m.train.patience for m in load_config(REPO / "config" / name).models.values()} == {0}


def test_ema_weights_are_the_moving_average_of_every_update_and_resume_exactly(test_config, tiny_corpus, tmp_path):
    """ema_decay 0.9: after update 1 the average is the weights, after update k 0.9 avg + 0.1 weights; a run
    stopped after each update and resumed keeps that average (last.pt holds it) and ends where a straight one does."""
    run = tmp_path / "stepwise"
    averages, weights = [], []
    for step in (1, 2, 3):
        final = _run(test_config, tiny_corpus, run, max_steps=step, ema_decay=0.9, checkpoint_every=1000)
        averages.append(_weights(final))
        weights.append(_weights(run / "resume/last.pt"))
        assert load_checkpoint(final)["step"] == step
    assert all(torch.equal(averages[0][k], weights[0][k]) for k in weights[0])
    for k in (1, 2):
        assert not torch.equal(averages[k]["readout.out.weight"], weights[k]["readout.out.weight"])
        for name, w in weights[k].items():
            torch.testing.assert_close(averages[k][name], 0.9 * averages[k - 1][name] + 0.1 * w)
    straight = _run(test_config, tiny_corpus, tmp_path / "straight", max_steps=3, ema_decay=0.9)
    assert _identical(straight, run / "checkpoint.pt")


def test_with_ema_the_averaged_weights_are_validated_kept_and_translated(test_config, tiny_corpus, tmp_path):
    """The validation loss logged, best.pt and checkpoint.pt are the moving average's, not the last weights'."""
    from attnrepro.data.batching import Corpus
    from attnrepro.training.checkpoint import build_from_checkpoint
    from attnrepro.training.validation import valid_loss

    ckpt = load_checkpoint(_run(test_config, tiny_corpus, tmp_path / "run", max_steps=40, ema_decay=0.95, **EARLY))
    valid = Corpus.load(tiny_corpus / "encoded/valid.npz")
    batch_tokens = test_config.model("rnnsearch10").train.batch_tokens

    def loss(weights: dict[str, torch.Tensor]) -> float:
        return round(valid_loss(build_from_checkpoint(ckpt | {"model": weights}), valid, batch_tokens), 5)

    assert loss(ckpt["model"]) == ckpt["valid_loss"]
    assert _identical(tmp_path / "run/checkpoint.pt", tmp_path / "run/resume/best.pt")
    # last.pt is written at a validation: the loss logged there is its average's, and the trained weights' differs
    resume = load_checkpoint(tmp_path / "run/resume/last.pt")
    average = {k.removeprefix("module."): v for k, v in resume["ema"].items() if k.startswith("module.")}
    rows = _log_rows(tmp_path / "run/train_log.csv")
    logged = {int(r["step"]): float(r["valid_loss"]) for r in rows if r["valid_loss"]}
    assert average.keys() == resume["model"].keys() and resume["step"] in logged
    assert loss(average) == logged[resume["step"]] != loss(resume["model"])
    assert logged[ckpt["step"]] == ckpt["valid_loss"] == min(logged.values())


def test_ema_and_checkpoint_averaging_exclude_each_other_and_a_decay_of_1_is_refused():
    from attnrepro.config import from_dict

    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"]["rnnsearch10"]["train"].update(ema_decay=0.99, average_last=2)
    with pytest.raises(ConfigError, match="models.rnnsearch10.train: ema_decay=0.99 .* average_last=2"):
        from_dict(raw)
    raw["models"]["rnnsearch10"]["train"].update(ema_decay=1.0, average_last=1)
    with pytest.raises(Exception, match="ema_decay"):
        from_dict(raw)
    assert TrainConfig().ema_decay == 0.0  # the weights themselves unless a config asks


@pytest.mark.parametrize("config", ["wmt14_en_fr.yaml", "wmt14_en_de.yaml"])
def test_paper_configs_normalise_the_loss_as_their_paper(config):
    from attnrepro.config import load_config
    from attnrepro.models import REGISTRY

    norms = {m.arch: m.train.loss_norm for m in load_config(REPO / "config" / config).models.values()}
    assert norms.pop("transformer") == "token"  # Vaswani
    assert set(norms.values()) == {"sentence"} and set(norms) == set(REGISTRY) - {"transformer"}  # the 2014-era others


def test_each_optimizer_is_the_papers_and_an_unknown_name_is_refused():
    weights = [torch.nn.Parameter(torch.zeros(2))]
    adadelta = make_optimizer(weights, TrainConfig(optimizer="adadelta", lr=1.0, rho=0.95, eps=1e-6))
    assert isinstance(adadelta, torch.optim.Adadelta) and adadelta.defaults["rho"] == 0.95
    assert isinstance(make_optimizer(weights, TrainConfig(optimizer="adam")), torch.optim.Adam)
    assert type(make_optimizer(weights, TrainConfig(optimizer="sgd", lr=0.7))) is torch.optim.SGD
    with pytest.raises(ConfigError, match="train.optimizer: 'rmsprop'"):  # never a silent fallback to SGD
        make_optimizer(weights, TrainConfig(optimizer="rmsprop"))
    with pytest.raises(ConfigError, match="train.schedule"):
        lr_at(TrainConfig(schedule="inverse_sqrt"), 1, d_model=None)


def _snakemake(workdir: Path, config: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "snakemake", "results/synthetic_test/rnnsearch10/checkpoint.pt",
        "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), "--cores", "1",
        "--rerun-incomplete", "--configfile", str(config), *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_kill_9_of_the_snakemake_tree_then_rerun_is_bit_identical(tmp_path):
    """SIGKILL snakemake and its jobs after the first checkpoint; `--unlock` and the same command finish the run."""
    config = rnnsearch10_config(tmp_path, max_steps=200, checkpoint_every=5, log_every=1, valid_every=100)
    workdir = tmp_path / "work"
    out = workdir / "results/synthetic_test/rnnsearch10"
    proc = subprocess.Popen(_snakemake(workdir, config), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 300
    while not (out / "resume/last.pt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)  # snakemake, its job shell and the trainer
    proc.wait()
    interrupted_at = load_checkpoint(out / "resume/last.pt")["step"]
    assert 0 < interrupted_at < 200, "the run was not interrupted mid-training"
    assert not (out / "checkpoint.pt").exists()

    # A killed Snakemake leaves its lock behind and asks for --unlock; then the same command resumes.
    locked = subprocess.run(_snakemake(workdir, config), capture_output=True, text=True)
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    subprocess.run(_snakemake(workdir, config, "--unlock"), check=True, capture_output=True)
    rerun = subprocess.run(_snakemake(workdir, config), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    train_log = next(workdir.glob("results/synthetic_test/logs/train_rnnsearch10.log")).read_text()
    assert f"resuming rnnsearch10 from step {interrupted_at} " in train_log
    steps = [s for s, _ in _scalars(out / "tb", "train/loss")]
    assert steps == list(range(1, 201))  # events past the checkpoint were purged on resume

    # The reference: the same rule again, uninterrupted, from scratch.
    shutil.move(out / "checkpoint.pt", tmp_path / "resumed.pt")
    shutil.move(out / "train_log.csv", tmp_path / "resumed_log.csv")
    shutil.rmtree(out / "resume")
    straight = subprocess.run(_snakemake(workdir, config, "--forcerun", "train"), capture_output=True, text=True)
    assert straight.returncode == 0, straight.stderr[-3000:]
    assert _identical(tmp_path / "resumed.pt", out / "checkpoint.pt")
    assert _log_rows(tmp_path / "resumed_log.csv") == _log_rows(out / "train_log.csv")


@pytest.mark.parametrize("model", ["rnnsearch10", "transformer_dropout"])
def test_bf16_autocast_trains_and_keeps_fp32_weights(test_config, tiny_corpus, tmp_path, model):
    """`precision: bf16` is meant for GPUs; torch's CPU autocast runs the same code path here."""
    mc = test_config.model("rnnsearch10")
    if model == "transformer_dropout":
        mc = ModelConfig("t", "transformer", "t", DROPOUT_TRANSFORMER, mc.train)
    fp32 = _run(test_config, tiny_corpus, tmp_path / "fp32", mc, max_steps=10)
    bf16 = _run(test_config, tiny_corpus, tmp_path / "bf16", mc, max_steps=10, precision="bf16")
    a, b = _weights(fp32), _weights(bf16)
    assert all(t.dtype == torch.float32 for t in b.values())
    assert any(not torch.equal(a[k], b[k]) for k in a)  # the forward pass really ran in bfloat16
    losses = [float(r["loss"]) for r in _log_rows(tmp_path / "bf16/train_log.csv")]
    reference = [float(r["loss"]) for r in _log_rows(tmp_path / "fp32/train_log.csv")]
    assert losses == pytest.approx(reference, abs=0.05)  # bf16 has an 8-bit mantissa: close, not equal


def test_new_train_keys_default_to_the_embedded_behaviour_and_are_validated():
    from attnrepro.config import from_dict, load_config

    tc = load_config(REPO / "config/config.yaml").model("rnnsearch50", any_seed=True).train
    assert (tc.update_tokens, tc.device, tc.precision, tc.compile, tc.average_last, tc.valid_bleu) == (
        0, "auto", "fp32", False, 1, False,
    )  # fmt: skip
    assert tc.batches_per_update(1) == 1  # one batch per update, as before these keys existed
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"]["rnnsearch10"]["train"]["precision"] = "fp16"
    with pytest.raises(Exception, match="fp16"):
        from_dict(raw)


@pytest.mark.slow
@pytest.mark.parametrize("first", ["rnnencdec20", "rnnsearch10"])
def test_snakemake_starts_the_train_job_of_higher_resources_priority_first(tmp_path, first):
    """The embedded config gives its longest trainings the highest priority; one core shows the order.

    Scores and figures run at priority 0: the second training starts before the first model's score."""
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    for name, spec in raw["models"].items():
        spec["resources"] = {"priority": 2 if name == first else 1}
    (second,) = set(raw["models"]) - {first}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    targets = [f"results/synthetic_test/{name}/bleu.json" for name in raw["models"]]
    command = [sys.executable, "-m", "snakemake", *targets, "--snakefile", str(REPO / "Snakefile")]
    out = subprocess.run(
        command + ["--directory", str(tmp_path / "work"), "--cores", "1", "--configfile", str(config)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = re.findall(r"rule (\w+):\n((?: {4}.*\n)*)", out.stdout + out.stderr)  # a job's lines are indented
    started = [(rule, m[1]) for rule, lines in jobs if (m := re.search(r"wildcards: model=(\w+)", lines))]
    assert started[:4] == [("train", first), ("translate", first), ("train", second), ("translate", second)]
    assert sorted(started[4:]) == sorted([("score", first), ("score", second)])  # in either order, at 0


def test_a_resumed_tensorboard_file_sorts_after_the_one_it_continues(tmp_path):
    # TensorBoard reads event files in name order; a same-second, same-process resume once sorted first.
    from attnrepro.training.log import TrainLog

    tb = tmp_path / "tb"
    tb.mkdir()
    now = int(time.time())
    (tb / f"events.out.tfevents.{now}.host.1.9").write_bytes(b"")
    log = TrainLog(tmp_path / "log.csv", tb, start_step=17)
    log.close()
    names = sorted(f.name for f in tb.iterdir())
    assert len(names) == 2 and names[0].endswith(".host.1.9") and int(names[1].split(".")[3]) > now
