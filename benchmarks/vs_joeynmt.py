"""Speed and BLEU against Joey NMT 2.3.0, in one run, on the same models and data.

    python benchmarks/vs_joeynmt.py                     # the embedded synthetic corpus, ≈ 35 min on 2 cores
    python benchmarks/vs_joeynmt.py --corpus multi30k   # Multi30k En-De (real captions), ≈ 40 min; --help
    python benchmarks/vs_joeynmt.py --corpus multi30k --plateau   # both to their plateau: hours (see below)

1. Installs Joey NMT 2.3.0 into its own venv beside ours (`.venv-joeynmt`, git-ignored), with
   the same torch version as ours, so both toolkits run the same kernels. It stays out of the
   project's environment (it pins protobuf < 3.21 and pulls tensorboard, pylint, datasets ...).
2. Writes the corpus as whitespace-token text files that both toolkits read:
   synthetic: the embedded corpus (attnrepro.data.synthetic, config defaults); each toolkit builds
              its own word vocabulary (every training word).
   multi30k:  the pipeline's own data and tokenizers for config/multi30k_en_de.yaml (made by Snakemake
              when missing: `--dag-config` adds e.g. a `data.wmt.mirror` overlay): the rnn reads Moses
              tokens with the 10 000-word shortlist of each side (word10k), the transformer the joint
              8 000-piece BPE (spm8k). Both toolkits get the same vocabulary files. Hypotheses are
              detokenised the same way for both (Moses for words, sentencepiece's ▁ for pieces) and
              scored by sacreBLEU against the raw references, as the pipeline scores its own.
3. For each model, Joey NMT then attnrepro, each in its own process with the same
   `torch.set_num_threads`: trains the same architecture for the same number of updates with
   the same real target tokens per update, then beam-4 decodes the test set at 32 sentences a
   batch, `--repeats` times after a warm-up batch.

   rnn:         BiGRU encoder, GRU decoder, Bahdanau (MLP) attention; emb 64, hidden 128 (synthetic),
                emb 256, hidden 256 (multi30k, config/multi30k_en_de.yaml's RNNsearch). Joey's
                recurrent decoder has no maxout deep output: on the synthetic corpus ours runs with
                `maxout: 0` (a linear readout of [s_{i-1}; E y_{i-1}; c_i]); on Multi30k's 10 000-word
                softmax that readout alone would be 10 M weights against Joey's 2.6 M (its 256-wide
                attention vector), so ours keeps the paper's 256-wide maxout there.
   transformer: post-norm, 3 layers, d_model 256, 4 heads, d_ff 1024, dropout 0.1, target
                embedding tied to the softmax (multi30k: one embedding for source, target and
                softmax over the joint BPE, as the config's), inverse-square-root warm-up (Vaswani eq. 3).

Training throughput is real target tokens (</s> included) per second of training-loop wall time,
logged every `updates / windows` updates by each toolkit's own loop (Joey: its "Tokens per Sec"
log line); the first window is warm-up, the median of the others is reported. Decoding is test
sentences per second of the median repeat (synthetic: the test split has 25 sentences in each
10-word bucket up to 80 words, as Joey's Transformer search has no key/value cache and would take
most of an hour on the default 800; multi30k: all 1 000 sentences of test_2016_flickr). BLEU:
sacreBLEU (13a) of each toolkit's final model on the test set, scored here the same way for both.
Peak RSS: the worker process's ru_maxrss.

`--plateau`: instead of a fixed number of updates, each toolkit trains to the plateau of its own validation
loss on the same validation split (multi30k: val, 1 014 captions), validated every `--valid-every` updates,
stopped after `--patience` validations in a row without a relative gain of `--min-delta` (attnrepro's
`train.patience` rule; Joey NMT 2.3 has no such stop of its own, so its worker applies the same rule to the
validation loss Joey reports) or at the `--rnn-updates` / `--transformer-updates` cap; each decodes with its
own checkpoint choice (ours: the lowest validation loss, checkpoint.pt; Joey's: best.ckpt by its
`early_stopping_metric`, the validation loss). Ours trains through `attnrepro.training.loop.train`, the
pipeline's own loop (validation, checkpoints and all). Reported besides speed: both scorings of the test set
(sacreBLEU; on multi30k also lowercased tokenized BLEU as the Multi30k literature scores it, bleu_lc_tok),
training wall time (validation and checkpoints included), updates trained and the step whose weights decode.
Each toolkit validates its own way, and the wall time counts it: ours computes the validation loss; Joey
also greedy-decodes the whole validation set every time (for metrics it is not asked for), which its
Transformer, without a key/value cache, does slowly. Tokens/s leaves validation out in both.

Writes results/benchmarks/vs_joeynmt.{csv,md} (multi30k: vs_joeynmt_multi30k.{csv,md}; with --plateau
..._plateau.{csv,md}) and, in the folder of the same name, the data, configs, logs and hypotheses.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
JOEY_VERSION = "2.3.0"
CSV_FIELDS = ["toolkit", "model", "train_tokens_per_s", "decode_sents_per_s", "bleu", "peak_rss_mb"]
PLATEAU_FIELDS = ["bleu_lc_tok", "train_wall_s", "updates", "best_step", "stop_reason"]  # --plateau adds these
TOOLKITS = ("joeynmt", "attnrepro")
MODELS = ("rnn", "transformer")
CORPORA = ("synthetic", "multi30k")


@dataclass
class Settings:
    corpus: str = "synthetic"
    threads: int = 2
    batch_tokens: int = 2000  # ours: padded source + target tokens per batch (token_batches)
    updates: dict[str, int] = field(default_factory=lambda: {"rnn": 800, "transformer": 300})
    windows: int = 6  # log points per training run; the first window is warm-up
    repeats: int = 3  # timed decoding passes after one warm-up pass
    beam: int = 4
    decode_batch: int = 32
    n_train: int = 150_000
    test_per_bucket: int = 25  # 200 test sentences, 25 in each 10-word bucket up to 80 words
    seed: int = 1
    rnn_maxout: int = 0  # ours' deep-output width for the rnn (0: a linear readout)
    test_lines: int = 0  # multi30k: the first N test sentences only (0: all 1 000), for a quick check
    plateau: bool = False  # train to the validation plateau; `updates` are then caps
    valid_every: int = 250  # --plateau: updates between validations (both toolkits)
    log_every: int = 50  # --plateau: updates between throughput log lines (both toolkits)
    patience: int = 3  # --plateau: validations without a relative gain of min_delta before stopping
    min_delta: float = 0.01
    rnn_dropout: float = 0.0  # the rnn's dropout in both toolkits (Joey: encoder, decoder and hidden dropout)

    @property
    def rnn(self) -> dict:
        return RNN[self.corpus]

    @property
    def shared_vocab(self) -> bool:
        """multi30k's transformer reads one joint BPE vocabulary: one embedding for both sides and the softmax."""
        return self.corpus == "multi30k"


# Defaults per corpus, where they differ. Multi30k: 500 updates, about 1.2 epochs of the 29 000 pairs at
# 2 000-token batches (what ≈ 35 minutes on 2 cores allow both toolkits); ours with the config's maxout
# deep output of width 256 (Bahdanau A.2.2), the width of Joey's tanh attention vector before the softmax.
CORPUS_DEFAULTS = {
    "synthetic": {},
    "multi30k": {"updates": {"rnn": 500, "transformer": 500}, "repeats": 2, "rnn_maxout": 256},
}
# --plateau: the caps of config/multi30k_*.yaml (6 000 updates); its validation every 250 updates, patience 3.
PLATEAU_DEFAULTS = {"updates": {"rnn": 6000, "transformer": 6000}, "repeats": 2}


def settings_for(corpus: str, plateau: bool = False, **given) -> Settings:
    """The corpus's defaults (then the plateau mode's), then every `given` value that is not None."""
    defaults = CORPUS_DEFAULTS[corpus] | (PLATEAU_DEFAULTS if plateau else {})
    return Settings(corpus=corpus, plateau=plateau, **(defaults | {k: v for k, v in given.items() if v is not None}))


# --- where each model's data lives ---------------------------------------------------------------


@dataclass(frozen=True)
class Paths:
    """One model's files under the work folder."""

    data: Path  # {train,valid,test}.{src,tgt}: whitespace tokens, what both toolkits read
    vocab: Path  # src.vocab, tgt.vocab
    npz: Path  # ours: the encoded training set
    ref: Path  # the test references BLEU is computed against

    @property
    def valid_npz(self) -> Path:
        """Ours: the encoded validation set (--plateau)."""
        return self.npz.with_name("valid.npz")


def paths_for(work: Path, s: Settings, model: str) -> Paths:
    if s.corpus == "synthetic":  # one word-level text for both models
        return Paths(work / "data", work / "vocab", work / "train.npz", work / "data" / "test.tgt")
    base = work / model  # multi30k: Moses words for the rnn, BPE pieces for the transformer
    return Paths(base / "data", base / "vocab", base / "train.npz", work / "test.ref")


# --- the two models, in each toolkit's own terms -------------------------------------------------

RNN = {  # emb, hidden, and Adam's constant rate
    "synthetic": {"emb": 64, "hidden": 128, "lr": 3e-3},
    "multi30k": {"emb": 256, "hidden": 256, "lr": 1e-3},  # config/multi30k_en_de.yaml's RNNsearch
}
TRANSFORMER = {"d_model": 256, "heads": 4, "layers": 3, "d_ff": 1024, "dropout": 0.1}
TRANSFORMER_LR = {"factor": 0.3, "warmup": 250}  # peak lr = 0.3 * 256^-0.5 * 250^-0.5 ≈ 1.2e-3


def ours_model(model: str, s: Settings) -> tuple[str, dict]:
    if model == "rnn":
        params = {"emb": s.rnn["emb"], "hidden": s.rnn["hidden"], "align": s.rnn["hidden"], "maxout": s.rnn_maxout}
        return "rnnsearch", params | {"init": "pytorch"} | ({"dropout": s.rnn_dropout} if s.rnn_dropout else {})
    t = TRANSFORMER
    return "transformer", {
        "d_model": t["d_model"],
        "d_ff": t["d_ff"],
        "heads": t["heads"],
        "layers": t["layers"],
        "dropout": t["dropout"],
        "share_embeddings": s.shared_vocab,  # else separate vocabularies; target embedding = softmax
    }


def ours_train_config(model: str, s: Settings):
    from attnrepro.config import TrainConfig

    common = {"batch_tokens": s.batch_tokens, "max_steps": s.updates[model], "seed": s.seed, "max_src_len": 10**6}
    if s.plateau:  # attnrepro.training.loop's early stopping; checkpoints at validations, as the pipeline's
        common |= {"patience": s.patience, "min_delta": s.min_delta, "valid_every": s.valid_every}
        common |= {"checkpoint_every": s.valid_every, "log_every": s.log_every, "device": "cpu"}
    if model == "rnn":
        return TrainConfig(optimizer="adam", lr=s.rnn["lr"], eps=1e-8, schedule="constant", clip_norm=1.0, **common)
    return TrainConfig(
        optimizer="adam",
        lr=TRANSFORMER_LR["factor"],
        betas=(0.9, 0.98),
        eps=1e-9,
        schedule="inverse_sqrt",
        warmup_steps=TRANSFORMER_LR["warmup"],
        clip_norm=0.0,
        label_smoothing=0.1,
        **common,
    )


def joey_config(model: str, s: Settings, paths: Paths, model_dir: Path, joey_batch: int) -> dict:
    side = {"level": "word", "lowercase": False, "normalize": False, "max_length": -1, "min_length": -1}
    vocab = {}
    if s.corpus != "synthetic":  # our vocabulary files: the same entries for both toolkits
        vocab = {side: {"voc_file": str(paths.vocab / f"{side}.vocab")} for side in ("src", "tgt")}
    updates = s.updates[model]
    log_every = s.log_every if s.plateau else max(updates // s.windows, 1)
    validation_freq = s.valid_every if s.plateau else log_every * (updates // log_every + 1)  # else: never reached
    training = {
        "random_seed": s.seed,
        "optimizer": "adam",
        "normalization": "tokens",  # mean over real target tokens, as ours
        "batch_size": joey_batch,
        "batch_type": "token",
        "batch_multiplier": 1,
        "epochs": 1000,
        "updates": updates,
        "validation_freq": validation_freq,
        "early_stopping_metric": "loss",  # best.ckpt: the lowest validation loss, as ours (--plateau)
        "logging_freq": log_every,
        "model_dir": str(model_dir),
        "overwrite": True,
        "shuffle": True,
        "use_cuda": False,
        "fp16": False,
        "num_workers": 0,
        "keep_best_ckpts": 1,
        "print_valid_sents": [],
    }
    if model == "rnn":
        # Joey 2.3 has no constant schedule (`scheduling` must be set), its "plateau" passes `verbose`
        # that torch 2.13 no longer takes, and "decaying" ignores `decaying_step_size` (StepLR(1) cuts
        # the rate 10x at epoch 1): ExponentialLR with gamma 1 is the constant rate ours uses.
        training |= {"learning_rate": s.rnn["lr"], "adam_betas": [0.9, 0.999], "scheduling": "exponential"}
        training |= {"decrease_factor": 1.0}
        training |= {"clip_grad_norm": 1.0, "label_smoothing": 0.0, "learning_rate_min": 1e-8}
        emb = {"embedding_dim": s.rnn["emb"], "scale": False}
        model_cfg = {
            "tied_embeddings": False,
            "tied_softmax": False,
            "encoder": {
                "type": "recurrent",
                "rnn_type": "gru",
                "embeddings": emb,
                "hidden_size": s.rnn["hidden"],
                "bidirectional": True,
                "num_layers": 1,
                "dropout": s.rnn_dropout,
            },
            "decoder": {
                "type": "recurrent",
                "rnn_type": "gru",
                "embeddings": emb,
                "hidden_size": s.rnn["hidden"],
                "num_layers": 1,
                "dropout": s.rnn_dropout,
                "hidden_dropout": s.rnn_dropout,
                "attention": "bahdanau",
                "init_hidden": "bridge",  # s_0 from the encoder, as Bahdanau's W_s
                "input_feeding": True,  # the attention output re-enters the recurrence
            },
        }
    else:
        t = TRANSFORMER
        training |= {
            # Joey's first update runs at `learning_rate`, the scheduler sets the rate after each
            # update: start at the rate of update 1 of the same schedule.
            "learning_rate": TRANSFORMER_LR["factor"] * t["d_model"] ** -0.5 * TRANSFORMER_LR["warmup"] ** -1.5,
            "learning_rate_factor": TRANSFORMER_LR["factor"],
            "learning_rate_warmup": TRANSFORMER_LR["warmup"],
            "learning_rate_min": 1e-8,
            "scheduling": "noam",  # factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5), as ours
            "adam_betas": [0.9, 0.98],
            "label_smoothing": 0.1,
        }
        layers = {
            "type": "transformer",
            "num_layers": t["layers"],
            "num_heads": t["heads"],
            "embeddings": {"embedding_dim": t["d_model"], "scale": True},
            "hidden_size": t["d_model"],
            "ff_size": t["d_ff"],
            "dropout": t["dropout"],
            "layer_norm": "post",
        }
        model_cfg = {"tied_embeddings": s.shared_vocab, "tied_softmax": True}
        model_cfg |= {"encoder": layers, "decoder": dict(layers)}
    return {
        "name": f"vs_attnrepro_{model}",
        "joeynmt_version": JOEY_VERSION,
        "model_dir": str(model_dir),
        "use_cuda": False,
        "data": {
            "train": str(paths.data / "train"),
            "dev": str(paths.data / "valid"),
            "test": str(paths.data / "test"),
            "dataset_type": "plain",
            "src": {"lang": "src", **side, **vocab.get("src", {})},
            "trg": {"lang": "tgt", **side, **vocab.get("tgt", {})},
        },
        "training": training,
        "testing": {
            "beam_size": s.beam,
            "beam_alpha": 0,  # no length penalty, as ours (search.length_penalty 0)
            "n_best": 1,
            "batch_size": s.decode_batch,
            "batch_type": "sentence",
            "max_output_length": -1,  # 1.5 x the longest source of the batch
            "eval_metrics": [],
            "return_prob": "none",
        },
        "model": {"initializer": "xavier_uniform", "bias_initializer": "zeros", **model_cfg},
    }


# --- batch sizes --------------------------------------------------------------------------------


def joey_batches(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_size: int, seed: int) -> list[np.ndarray]:
    """Joey 2.3's TokenBatchSampler over a random order: a batch closes once
    (longest max(src + 1, tgt + 1)) x sentences reaches `batch_size`; no length bucketing."""
    order = np.random.default_rng(seed).permutation(len(src_lens))
    cost = np.maximum(src_lens, tgt_lens)[order] + 1
    batches, start, longest = [], 0, 0
    for pos, n_tokens in enumerate(cost):
        longest = max(longest, n_tokens)
        if longest * (pos - start + 1) >= batch_size:
            batches.append(order[start : pos + 1])
            start, longest = pos + 1, 0
    return batches


def joey_batch_size_for(src_lens: np.ndarray, tgt_lens: np.ndarray, target_tokens: float, seed: int) -> int:
    """Joey's `batch_size` whose batches hold `target_tokens` real target tokens (</s> included) on average."""

    def mean_target(batch_size: int) -> float:
        return float(np.mean([(tgt_lens[b] + 1).sum() for b in joey_batches(src_lens, tgt_lens, batch_size, seed)]))

    lo, hi = 1, 64
    while mean_target(hi) < target_tokens:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if mean_target(mid) < target_tokens else (lo, mid)
    return hi


def ours_target_tokens_per_update(src_lens: np.ndarray, tgt_lens: np.ndarray, s: Settings) -> float:
    from attnrepro.data.batching import token_batches

    return float(np.mean([(tgt_lens[b] + 1).sum() for b in token_batches(src_lens, tgt_lens, s.batch_tokens, s.seed)]))


# --- our worker ---------------------------------------------------------------------------------


def decode_test(model, tokenizers: tuple, paths: Paths, s: Settings, hyp_path: Path) -> tuple[list, list[float]]:
    """Beam-search the test set `s.repeats` times after a warm-up batch (as Joey's) and write the hypotheses:
    the last pass's hypotheses and every pass's seconds."""
    from attnrepro.config import SearchConfig
    from attnrepro.decoding.search import translate_lines

    src_tok, tgt_tok = tokenizers
    lines = (paths.data / "test.src").read_text(encoding="utf-8").splitlines()
    sc = SearchConfig(beam=s.beam, length_penalty=0.0, max_len_a=1.5, max_len_b=2, batch_size=s.decode_batch)
    warm_up = (paths.data / "valid.src").read_text(encoding="utf-8").splitlines()[: s.decode_batch]
    translate_lines(model, src_tok, tgt_tok, warm_up, sc)  # warm-up: one batch of validation sentences, as Joey's
    seconds = []
    for _ in range(s.repeats):
        start = time.perf_counter()
        hypotheses = translate_lines(model, src_tok, tgt_tok, lines, sc)
        seconds.append(time.perf_counter() - start)
    hyp_path.write_text("".join(tgt_tok.decode(h.tokens) + "\n" for h in hypotheses), encoding="utf-8")
    return hypotheses, seconds


def run_ours(model_name: str, paths: Paths, s: Settings, hyp_path: Path) -> dict:
    """Train and decode with attnrepro's public pieces: the same step as attnrepro.training.loop."""
    import torch
    from torch import nn

    from attnrepro.data.batching import Corpus, collate, token_batches
    from attnrepro.data.tokenize import WordVocab
    from attnrepro.models import build_model, count_parameters
    from attnrepro.training.loop import loss_fn, lr_at, make_optimizer

    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    src_tok, tgt_tok = WordVocab.load(paths.vocab / "src.vocab"), WordVocab.load(paths.vocab / "tgt.vocab")
    corpus = Corpus.load(paths.npz)
    arch, params = ours_model(model_name, s)
    model = build_model(arch, len(src_tok), len(tgt_tok), params)
    tc = ours_train_config(model_name, s)
    optimizer = make_optimizer(model.parameters(), tc)
    d_model = getattr(model, "d_model", None)
    log_every = max(tc.max_steps // s.windows, 1)

    model.train()
    epoch, position = 0, 0
    batches = token_batches(corpus.src_lens, corpus.tgt_lens, tc.batch_tokens, seed=tc.seed, epoch=epoch)
    windows, window_tokens, tgt_tokens, nonpad = [], 0, [], []
    start = train_start = time.perf_counter()
    for step in range(1, tc.max_steps + 1):
        if position == len(batches):
            epoch, position = epoch + 1, 0
            batches = token_batches(corpus.src_lens, corpus.tgt_lens, tc.batch_tokens, seed=tc.seed, epoch=epoch)
        batch = collate(corpus, batches[position])
        position += 1
        for group in optimizer.param_groups:
            group["lr"] = lr_at(tc, step, d_model)
        loss = loss_fn(model(batch.src, batch.src_mask, batch.tgt_in), batch.tgt_out, tc.label_smoothing)
        loss_value = float(loss.detach())  # train.py reads it every step (finite check, log)
        if not np.isfinite(loss_value):
            raise FloatingPointError(f"{model_name}: loss {loss_value} at update {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc.clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm)
        optimizer.step()
        window_tokens += batch.n_tgt_tokens
        tgt_tokens.append(batch.n_tgt_tokens)
        nonpad.append(batch.nonpad_fraction)
        if step % log_every == 0:
            now = time.perf_counter()
            windows.append((step, window_tokens / (now - start)))
            window_tokens, start = 0, now
    train_wall_s = time.perf_counter() - train_start

    hypotheses, seconds = decode_test(model, (src_tok, tgt_tok), paths, s, hyp_path)
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "params": count_parameters(model),
        "train_windows": windows,
        "train_wall_s": train_wall_s,
        "updates": len(tgt_tokens),
        "tgt_tokens_per_update": float(np.mean(tgt_tokens)),
        "nonpad_fraction": float(np.mean(nonpad)),
        "decode_seconds": seconds,
        "n_test": len(hypotheses),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_ours_plateau(model_name: str, paths: Paths, s: Settings, hyp_path: Path, out_dir: Path) -> dict:
    """--plateau: train with the pipeline's own loop (attnrepro.training.loop.train: early stopping on the
    validation loss, checkpoints, log) from scratch in `out_dir`, then decode with its checkpoint.pt (the
    weights of the lowest validation loss) as run_ours does."""
    import shutil

    import torch

    from attnrepro.config import ModelConfig
    from attnrepro.data.tokenize import WordVocab
    from attnrepro.models import count_parameters
    from attnrepro.training.checkpoint import build_from_checkpoint, load_checkpoint
    from attnrepro.training.loop import train

    torch.set_num_threads(s.threads)
    src_tok, tgt_tok = WordVocab.load(paths.vocab / "src.vocab"), WordVocab.load(paths.vocab / "tgt.vocab")
    arch, params = ours_model(model_name, s)
    mc = ModelConfig(
        name=model_name, arch=arch, label=model_name, params=params, train=ours_train_config(model_name, s)
    )
    shutil.rmtree(out_dir, ignore_errors=True)  # never resume an earlier run: its wall time would be lost
    start = time.perf_counter()
    ckpt_path = train(mc, paths.npz, paths.valid_npz, len(src_tok), len(tgt_tok), out_dir, s.threads, progress=False)
    train_wall_s = time.perf_counter() - start
    with open(out_dir / "train_log.csv", newline="") as f:
        log = list(csv.DictReader(f))
    windows = [(int(row["step"]), float(row["tokens_per_s"])) for row in log if row["tokens_per_s"]]
    ckpt = load_checkpoint(ckpt_path)
    model = build_from_checkpoint(ckpt).eval()

    hypotheses, seconds = decode_test(model, (src_tok, tgt_tok), paths, s, hyp_path)
    tokens = [float(row["tgt_tokens"]) for row in log if row["tgt_tokens"]]
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "params": count_parameters(model),
        "train_windows": windows,  # (step, target tokens/s of the updates since the previous row)
        "train_wall_s": train_wall_s,  # validations and checkpoints included
        "updates": int(ckpt["stopped_at"]),
        "best_step": int(ckpt["step"]),
        "stop_reason": ckpt["stop_reason"],
        "tgt_tokens_per_update": tokens[-1] / int(log[-1]["step"]) if tokens else float("nan"),
        "decode_seconds": seconds,
        "n_test": len(hypotheses),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# --- orchestration ------------------------------------------------------------------------------


def ensure_joey_venv(venv: Path) -> Path:
    """`venv`/bin/python with joeynmt==2.3.0 and our torch version; created on first use."""
    import torch

    python = venv / "bin" / "python"
    versions = "import importlib.metadata as m, joeynmt, torch; print(m.version('joeynmt'), torch.__version__)"
    check = [str(python), "-c", versions]
    wanted = f"{JOEY_VERSION} {torch.__version__}"
    if python.exists():
        found = subprocess.run(check, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == wanted:
            return python
    print(f"installing Joey NMT {JOEY_VERSION} into {venv} (a few minutes) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"  # the same kernels as ours
    subprocess.run(pip + [torch_pin], check=True)
    # importlib_metadata: joeynmt imports it; sentencepiece <= 0.2.1: what its tokenizer path was built on
    joey = [f"joeynmt=={JOEY_VERSION}", "importlib_metadata", "sentencepiece<=0.2.1", torch_pin]
    subprocess.run(pip + joey, check=True)
    found = subprocess.run(check, capture_output=True, text=True, check=True)
    if found.stdout.split()[0] != JOEY_VERSION:
        raise RuntimeError(f"{venv}: expected joeynmt {JOEY_VERSION}, found {found.stdout.strip()}")
    return python


def prepare_data(work: Path, s: Settings, dag_configs: list[Path], dag: Path | None = None) -> dict:
    """The corpus as whitespace-token text for both toolkits, our vocabularies and encoding; its settings."""
    if s.corpus == "multi30k":
        return prepare_multi30k(work, s, dag_configs, dag or MULTI30K["results"])
    return prepare_synthetic(work, s)


def prepare_synthetic(work: Path, s: Settings) -> dict:
    """The embedded synthetic corpus as text (both toolkits) + our word vocabularies and encoding."""
    from attnrepro.config import SyntheticDataConfig
    from attnrepro.data.synthetic import write_splits
    from attnrepro.data.tokenize import WordVocab, encode_corpus

    cfg = SyntheticDataConfig(seed=s.seed, n_train=s.n_train, test_per_bucket=s.test_per_bucket)
    stamp = work / "data" / "settings.json"
    if not (stamp.exists() and (work / "valid.npz").exists()) or json.loads(stamp.read_text()) != asdict(cfg):
        write_splits(cfg, work / "data")
        (work / "vocab").mkdir(parents=True, exist_ok=True)
        for side in ("src", "tgt"):  # every training word: the whole synthetic vocabulary, as Joey's
            with open(work / "data" / f"train.{side}", encoding="utf-8") as f:
                WordVocab.build(f, vocab_size=10**6).save(work / "vocab" / f"{side}.vocab")
        src_tok, tgt_tok = (WordVocab.load(work / "vocab" / f"{side}.vocab") for side in ("src", "tgt"))
        encode_corpus(src_tok, tgt_tok, work / "data" / "train.src", work / "data" / "train.tgt", work / "train.npz")
        encode_corpus(src_tok, tgt_tok, work / "data" / "valid.src", work / "data" / "valid.tgt", work / "valid.npz")
        stamp.write_text(json.dumps(asdict(cfg)))
    return asdict(cfg)


MULTI30K = {"config": ROOT / "config" / "multi30k_en_de.yaml", "results": ROOT / "results" / "multi30k_en_de"}
MULTI30K_TOKENIZERS = {"rnn": "word10k", "transformer": "spm8k"}  # the config's, for RNNsearch and Transformer
SPLITS = ("train", "valid", "test")


def prepare_multi30k(work: Path, s: Settings, dag_configs: list[Path], dag: Path = MULTI30K["results"]) -> dict:
    """The pipeline's Multi30k text and tokenizers under `dag` (Snakemake makes what is missing there), written
    as the tokens each model reads: Moses words (word10k) for the rnn, BPE pieces (spm8k) for the transformer."""
    from attnrepro.config import load_config
    from attnrepro.data.tokenize import WordVocab, encode_corpus, load_tokenizer_pair

    sides = ("src", "tgt")
    needed = [dag / "data" / f"{split}.{side}" for split in SPLITS for side in sides]
    needed += [dag / "tokenizer" / name / f"{side}.model" for name in MULTI30K_TOKENIZERS.values() for side in sides]
    missing = [str(path) for path in needed + [dag / "config.yaml"] if not path.exists()]  # config.yaml: onstart
    if missing and dag != MULTI30K["results"]:
        raise FileNotFoundError(f"{dag}: not a finished Multi30k data step; missing {', '.join(missing)}")
    if missing:
        configs = [str(MULTI30K["config"])] + [str(c) for c in dag_configs]
        command = [sys.executable, "-m", "snakemake", "--cores", str(s.threads), "--configfile", *configs, "--"]
        print("making the pipeline's Multi30k data and tokenizers:", " ".join(command), flush=True)
        subprocess.run(command + [str(path.relative_to(ROOT)) for path in needed], cwd=ROOT, check=True)
    cfg = load_config(dag / "config.yaml")
    stamp = work / "settings.json"
    settings = {"dag_config": str(dag / "config.yaml"), "tokenizers": MULTI30K_TOKENIZERS, "languages": cfg.languages}
    settings["test_lines"] = s.test_lines
    encoded = all(paths_for(work, s, model).valid_npz.exists() for model in MULTI30K_TOKENIZERS)
    if encoded and stamp.exists() and json.loads(stamp.read_text()) == json.loads(json.dumps(settings)):
        return settings
    work.mkdir(parents=True, exist_ok=True)
    keep = slice(0, s.test_lines or None)
    references = (dag / "data" / "test.tgt").read_text(encoding="utf-8").splitlines()[keep]
    (work / "test.ref").write_text("".join(r + "\n" for r in references), encoding="utf-8")  # what BLEU scores
    for model, name in MULTI30K_TOKENIZERS.items():
        paths = paths_for(work, s, model)
        for folder in (paths.data, paths.vocab):
            folder.mkdir(parents=True, exist_ok=True)
        tokenizers = load_tokenizer_pair(cfg.tokenizer_named(name), dag / "tokenizer" / name, cfg.languages)
        for side, tok in zip(("src", "tgt"), tokenizers):
            if hasattr(tok, "processor"):  # sentencepiece: its pieces, ids 0-3 are <pad> <unk> <s> </s>
                vocab = WordVocab([tok.processor.id_to_piece(i) for i in range(len(tok))])
                split_line = lambda line, tok=tok: tok.processor.encode(line, out_type=str)  # noqa: E731
            else:  # a Moses word shortlist
                vocab, split_line = tok.vocab, tok.tokenize
            vocab.save(paths.vocab / f"{side}.vocab")
            for split in SPLITS:
                lines = (dag / "data" / f"{split}.{side}").read_text(encoding="utf-8").splitlines()
                lines = lines[keep] if split == "test" else lines
                text = "".join(" ".join(split_line(line)) + "\n" for line in lines)
                (paths.data / f"{split}.{side}").write_text(text, encoding="utf-8")
        src_vocab, tgt_vocab = (WordVocab.load(paths.vocab / f"{side}.vocab") for side in ("src", "tgt"))
        encode_corpus(src_vocab, tgt_vocab, paths.data / "train.src", paths.data / "train.tgt", paths.npz)
        encode_corpus(src_vocab, tgt_vocab, paths.data / "valid.src", paths.data / "valid.tgt", paths.valid_npz)
    stamp.write_text(json.dumps(settings))
    return settings


def detokenize(s: Settings, model: str, line: str, lang: str) -> str:
    """A hypothesis of either toolkit as plain text: Joey writes an unknown token as <unk>, ours as UNK
    (one token, as the pipeline scores it); Moses-detokenized words, or BPE pieces joined at their ▁."""
    tokens = ["UNK" if token == "<unk>" else token for token in line.split()]
    if s.corpus == "synthetic":
        return " ".join(tokens)
    if model == "rnn":
        from sacremoses import MosesDetokenizer

        return MosesDetokenizer(lang).detokenize(tokens)
    return "".join(tokens).replace("▁", " ").strip()


def run_worker(command: list[str], log: Path) -> dict:
    load_before = os.getloadavg()[0]
    with open(log, "w") as f:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=f, text=True)
    f_out = done.stdout.strip().splitlines()
    log.with_suffix(".stdout").write_text(done.stdout)
    if done.returncode != 0 or not f_out:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}); see {log}")
    result = json.loads(f_out[-1])
    result["load_avg"] = [load_before, os.getloadavg()[0]]
    return result


def summarise(toolkit: str, model: str, result: dict, hyp: Path, ref: Path, s: Settings, lang: str) -> dict:
    from sacrebleu.metrics import BLEU

    rates = [rate for _, rate in result["train_windows"]]
    if len(rates) < 4:
        raise RuntimeError(f"{toolkit} {model}: {len(rates)} training windows; need a warm-up and >= 3 more")
    hyps = [detokenize(s, model, line, lang) for line in hyp.read_text(encoding="utf-8").splitlines()]
    refs = ref.read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(refs):
        raise RuntimeError(f"{hyp}: {len(hyps)} hypotheses for {len(refs)} references in {ref}")
    hyp.with_suffix(".detok.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    bleu = BLEU()
    score = bleu.corpus_score(hyps, [refs])
    result["bleu_signature"] = str(bleu.get_signature())
    row = {
        "toolkit": toolkit,
        "model": model,
        "train_tokens_per_s": round(statistics.median(rates[1:]), 1),  # first window: warm-up
        "decode_sents_per_s": round(result["n_test"] / statistics.median(result["decode_seconds"]), 2),
        "bleu": round(score.score, 2),
        "peak_rss_mb": round(result["peak_rss_mb"], 1),
    }
    if not s.plateau:
        return row
    lc_tok = None
    if s.corpus == "multi30k":  # the Multi30k literature's scoring (attnrepro.evaluation.scoring.lc_norm_tok)
        from attnrepro.evaluation.scoring import lc_tok_bleu

        lc_tok, result["bleu_lc_tok_signature"] = lc_tok_bleu(hyps, refs, lang)
    return row | {
        "bleu_lc_tok": None if lc_tok is None else round(lc_tok, 2),
        "train_wall_s": round(result["train_wall_s"], 1),
        "updates": result["updates"],
        "best_step": result["best_step"],
        "stop_reason": result["stop_reason"],
    }


def write_tables(rows: list[dict], details: dict, out: Path) -> None:
    plateau = details["settings"].get("plateau", False)
    fields = CSV_FIELDS + (PLATEAU_FIELDS if plateau else [])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fields)
        writer.writeheader()
        writer.writerows(rows)
    md = ["| " + " | ".join(fields) + " |", "|" + "---|" * len(fields)]
    md += ["| " + " | ".join("" if r[k] is None else str(r[k]) for k in fields) + " |" for r in rows]
    md += comparison_lines(rows, plateau)
    md += ["", "| toolkit | model | params | updates | target tokens/update | train tok/s per window | "
           "decode s per pass | load avg (before, after) |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for (toolkit, model), r in details["runs"].items():
        rates = [rate for _, rate in r["train_windows"]]
        md.append(
            f"| {toolkit} | {model} | {r['params']:,} | {r['updates']} | {r['tgt_tokens_per_update']:.0f} | "
            + (
                f"{statistics.median(rates[1:]):.0f} ({min(rates[1:]):.0f}–{max(rates[1:]):.0f}) of {len(rates)}"
                if plateau  # a window every log_every updates: the median (min–max) of all but the first
                else ", ".join(f"{rate:.0f}" for rate in rates)
            )
            + " | "
            + ", ".join(f"{t:.1f}" for t in r["decode_seconds"])
            + f" | {r['load_avg'][0]:.2f}, {r['load_avg'][1]:.2f} |"
        )
    md += ["", f"Run {details['date']} on {details['machine']}; torch {details['torch']}, "
           f"{details['settings']['threads']} threads for both toolkits. "
           f"Settings: `{json.dumps(details['settings'])}`. The first training window of each run is "
           "warm-up; the table reports the median of the others and the median decoding pass "
           "(after one warm-up batch)."]  # fmt: skip
    signatures = sorted({r["bleu_signature"] for r in details["runs"].values() if "bleu_signature" in r})
    md += ["", f"Corpus: {details['settings']['corpus']}. BLEU: sacreBLEU `{'`, `'.join(signatures)}` of the "
           "detokenised hypotheses against the raw references, the same for both toolkits."]  # fmt: skip
    lc_tok = sorted({r["bleu_lc_tok_signature"] for r in details["runs"].values() if "bleu_lc_tok_signature" in r})
    if lc_tok:
        md[-1] += (
            f" lc. tok. BLEU: `{'`, `'.join(lc_tok)}`, both sides lowercased, punctuation-normalised and"
            " Moses-tokenized as the Multi30k repository's lc.norm.tok files (docs/papers.md)."
        )
    if plateau:
        md[-1] += (
            " Each toolkit trained to the plateau of its validation loss (validation every "
            f"{details['settings']['valid_every']} updates, stopped after {details['settings']['patience']} "
            f"validations without a {details['settings']['min_delta']:.0%} relative gain, or at the cap) and "
            "decoded with its own choice of checkpoint (the lowest validation loss); training wall time "
            "includes validations and checkpoints, tokens/s does not."
        )
    out.with_suffix(".md").write_text("\n".join(md) + "\n")


def comparison_lines(rows: list[dict], plateau: bool) -> list[str]:
    """Markdown: ours against Joey per model, speed-ups and BLEU differences (--plateau: both scorings and
    the training wall-time ratio)."""
    header = "| model | train speed-up | decode speed-up | BLEU ours - Joey |"
    if plateau:
        header += " lc. tok. BLEU ours - Joey | training wall time, Joey / ours |"
    lines = ["", header, "|---" * (header.count("|") - 1) + "|"]
    by = {(r["toolkit"], r["model"]): r for r in rows}
    for model in dict.fromkeys(r["model"] for r in rows):
        ours, joey = by.get(("attnrepro", model)), by.get(("joeynmt", model))
        if not (ours and joey):
            continue
        line = (
            f"| {model} | {ours['train_tokens_per_s'] / joey['train_tokens_per_s']:.2f}x"
            f" | {ours['decode_sents_per_s'] / joey['decode_sents_per_s']:.2f}x"
            f" | {ours['bleu'] - joey['bleu']:+.2f} |"
        )
        if plateau:
            lc_tok = ours.get("bleu_lc_tok") is not None and joey.get("bleu_lc_tok") is not None
            line += f" {ours['bleu_lc_tok'] - joey['bleu_lc_tok']:+.2f} |" if lc_tok else " |"
            line += f" {joey['train_wall_s'] / ours['train_wall_s']:.2f}x |"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", choices=CORPORA, default="synthetic")
    ap.add_argument("--out", type=Path, help="work folder (default results/benchmarks/vs_joeynmt[_CORPUS])")
    dag_help = "multi30k: configs Snakemake reads after config/multi30k_en_de.yaml (e.g. a mirror)"
    ap.add_argument("--dag-config", type=Path, nargs="*", default=[], help=dag_help)
    ap.add_argument("--dag", type=Path, help="multi30k: a finished results folder to read instead (its data step)")
    ap.add_argument("--joey-venv", type=Path, default=ROOT / ".venv-joeynmt")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--toolkits", nargs="+", choices=TOOLKITS, default=list(TOOLKITS))
    ap.add_argument("--threads", type=int)
    ap.add_argument("--rnn-updates", type=int)
    ap.add_argument("--transformer-updates", type=int)
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--n-train", type=int)
    ap.add_argument("--test-per-bucket", type=int)
    ap.add_argument("--rnn-maxout", type=int)
    ap.add_argument("--test-lines", type=int)
    ap.add_argument("--plateau", action="store_true", help="train both toolkits to their validation plateau")
    ap.add_argument("--valid-every", type=int, help="--plateau: updates between validations (250)")
    ap.add_argument("--log-every", type=int, help="--plateau: updates between throughput logs (50)")
    ap.add_argument("--patience", type=int, help="--plateau: validations without a gain before stopping (3)")
    ap.add_argument("--min-delta", type=float, help="--plateau: the relative gain that counts (0.01)")
    ap.add_argument("--rnn-dropout", type=float, help="the rnn's dropout in both toolkits (0)")
    ap.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)  # internal: our side of one model
    args = ap.parse_args(argv)
    defaults = settings_for(args.corpus, args.plateau)
    updates = {"rnn": args.rnn_updates or defaults.updates["rnn"]}
    updates["transformer"] = args.transformer_updates or defaults.updates["transformer"]
    s = settings_for(
        args.corpus,
        args.plateau,
        valid_every=args.valid_every,
        log_every=args.log_every,
        patience=args.patience,
        min_delta=args.min_delta,
        rnn_dropout=args.rnn_dropout,
        threads=args.threads,
        updates=updates,
        repeats=args.repeats,
        n_train=args.n_train,
        test_per_bucket=args.test_per_bucket,
        rnn_maxout=args.rnn_maxout,
        test_lines=args.test_lines,
    )
    name = ("vs_joeynmt" if s.corpus == "synthetic" else f"vs_joeynmt_{s.corpus}") + ("_plateau" if s.plateau else "")
    work = args.out or ROOT / "results" / "benchmarks" / name
    if args.worker:
        hyp, paths = work / "hyp" / f"attnrepro_{args.worker}.txt", paths_for(work, s, args.worker)
        if s.plateau:
            print(json.dumps(run_ours_plateau(args.worker, paths, s, hyp, work / "attnrepro" / args.worker)))
        else:
            print(json.dumps(run_ours(args.worker, paths, s, hyp)))
        return

    import torch
    import yaml

    from attnrepro.data.batching import Corpus

    work.mkdir(parents=True, exist_ok=True)
    for sub in ("hyp", "logs", "joeynmt"):
        (work / sub).mkdir(exist_ok=True)
    joey_python = ensure_joey_venv(args.joey_venv) if "joeynmt" in args.toolkits else None
    data_cfg = prepare_data(work, s, args.dag_config, args.dag)
    tgt_lang = data_cfg.get("languages", ("", "en"))[1]

    rows, runs, joey_batch = [], {}, {}
    for model in args.models:
        paths = paths_for(work, s, model)
        corpus = Corpus.load(paths.npz)
        target = ours_target_tokens_per_update(corpus.src_lens, corpus.tgt_lens, s)
        joey_batch[model] = joey_batch_size_for(corpus.src_lens, corpus.tgt_lens, target, s.seed)
        print(f"{model}: {target:.0f} target tokens per update: ours batch_tokens {s.batch_tokens}, "
              f"Joey batch_size {joey_batch[model]}")  # fmt: skip
        for toolkit in args.toolkits:
            hyp = work / "hyp" / f"{toolkit}_{model}.txt"
            if toolkit == "joeynmt":
                cfg_path = work / "joeynmt" / f"{model}.yaml"
                cfg = joey_config(model, s, paths, work / "joeynmt" / model, joey_batch[model])
                cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
                command = [str(joey_python), str(ROOT / "benchmarks" / "joeynmt_worker.py"), str(cfg_path)]
                command += ["--threads", str(s.threads), "--repeats", str(s.repeats), "--hyp", str(hyp)]
                if s.plateau:  # the same stopping rule as ours; Joey's own best.ckpt decodes
                    command += ["--patience", str(s.patience), "--min-delta", str(s.min_delta), "--checkpoint", "best"]
            else:
                command = [sys.executable, str(Path(__file__).resolve()), "--worker", model, "--out", str(work)]
                command += ["--corpus", s.corpus, "--threads", str(s.threads), "--repeats", str(s.repeats)]
                command += ["--rnn-updates", str(s.updates["rnn"]), "--transformer-updates"]
                command += [str(s.updates["transformer"]), "--n-train", str(s.n_train)]
                command += ["--test-per-bucket", str(s.test_per_bucket), "--rnn-maxout", str(s.rnn_maxout)]
                command += ["--test-lines", str(s.test_lines), "--rnn-dropout", str(s.rnn_dropout)]
                if s.plateau:
                    command += ["--plateau", "--valid-every", str(s.valid_every), "--log-every", str(s.log_every)]
                    command += ["--patience", str(s.patience), "--min-delta", str(s.min_delta)]
            how = f"to its plateau (at most {s.updates[model]} updates)" if s.plateau else f"{s.updates[model]} updates"
            print(f"{toolkit} {model}: training {how}, then decoding ...", flush=True)
            result = run_worker(command, work / "logs" / f"{toolkit}_{model}.log")
            runs[(toolkit, model)] = result
            rows.append(summarise(toolkit, model, result, hyp, paths.ref, s, tgt_lang))
            print(json.dumps(rows[-1]), flush=True)
    details = {
        "date": date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "settings": asdict(s) | {"joey_batch_size": joey_batch, "data": data_cfg},
        "runs": runs,
    }
    write_tables(rows, details, work.parent / work.name)
    details["runs"] = {f"{t}/{m}": r for (t, m), r in runs.items()}
    (work.parent / f"{work.name}.json").write_text(json.dumps(details, indent=1))
    print((work.parent / f"{work.name}.md").read_text())


if __name__ == "__main__":
    main()
