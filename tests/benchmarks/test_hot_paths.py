"""Hot paths under pytest-benchmark, so that a slowdown shows up in its tables (no time is asserted).

    python -m pytest tests/benchmarks --benchmark-only                  # the statistics
    python -m pytest tests/benchmarks --benchmark-only --benchmark-autosave   # keep a baseline
    python -m pytest tests/benchmarks --benchmark-only --benchmark-compare    # against it

One training step (forward, backward, clip, Adam) for every model family at the embedded
default's sizes (config/config.yaml) on one token-bucketed batch of the synthetic corpus; one
decoder step of the beam-search row block (decode_step + reorder) for every family, and one
batched beam search of 32 sentences at beam 4 for RNNsearch and the Transformer. Rounds are fixed (pedantic), so
the plain `python -m pytest` of CI spends a few seconds here. Each test also asserts what the
step must do: the loss of a batch falls as it is trained on, log-probabilities normalise.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attnrepro.config import Config, SyntheticDataConfig, load_config
from attnrepro.data.batching import Batch, Corpus, collate, pad, token_batches
from attnrepro.data.synthetic import write_splits
from attnrepro.data.tokenize import BOS, PAD, WordVocab, encode_corpus
from attnrepro.decoding.search import beam_search
from attnrepro.models import build_model
from attnrepro.training.loop import loss_fn, make_optimizer

from conftest import REPO

ROUNDS = 5
BEAM, SENTENCES = 4, 32


@pytest.fixture(scope="module")
def embedded() -> Config:
    return load_config(REPO / "config" / "config.yaml")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Corpus, int, int]:
    """3 000 pairs of the embedded synthetic task, word vocabularies, encoded."""
    root = tmp_path_factory.mktemp("bench")
    write_splits(SyntheticDataConfig(n_train=3000, n_valid=10, test_per_bucket=1), root)
    vocabs = []
    for side in ("src", "tgt"):
        with open(root / f"train.{side}", encoding="utf-8") as f:
            vocabs.append(WordVocab.build(f, vocab_size=10**6))
    encode_corpus(*vocabs, root / "train.src", root / "train.tgt", root / "train.npz")
    return Corpus.load(root / "train.npz"), len(vocabs[0]), len(vocabs[1])


def _first_model_of_each_arch(cfg: Config) -> dict[str, str]:
    names: dict[str, str] = {}
    for name, mc in cfg.models.items():
        names.setdefault(mc.arch, name)
    return names


ARCHS = sorted(_first_model_of_each_arch(load_config(REPO / "config" / "config.yaml")))


def _model(cfg: Config, arch: str, src_vocab: int, tgt_vocab: int) -> tuple[nn.Module, object]:
    mc = cfg.model(_first_model_of_each_arch(cfg)[arch])
    torch.manual_seed(0)
    return build_model(mc.arch, src_vocab, tgt_vocab, mc.params), mc.train


def _longest_batch(corpus: Corpus, batch_tokens: int) -> Batch:
    """A representative full batch: the token bucket with the most target tokens."""
    batches = token_batches(corpus.src_lens, corpus.tgt_lens, batch_tokens, seed=1)
    return collate(corpus, max(batches, key=lambda b: int(corpus.tgt_lens[b].sum())))


@pytest.mark.parametrize("arch", ARCHS)
def test_training_step(benchmark, embedded, corpus, arch):
    data, src_vocab, tgt_vocab = corpus
    model, tc = _model(embedded, arch, src_vocab, tgt_vocab)
    batch = _longest_batch(data, tc.batch_tokens)
    optimizer = make_optimizer(model.parameters(), tc)
    for group in optimizer.param_groups:
        group["lr"] = 1e-3  # a constant rate (the transformer's schedule would start near 0)
    model.train()
    losses = []

    def step() -> None:
        loss = loss_fn(model(batch.src, batch.src_mask, batch.tgt_in), batch.tgt_out, tc.label_smoothing)
        losses.append(float(loss.detach()))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc.clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm)
        optimizer.step()

    benchmark.extra_info["tgt_tokens"] = batch.n_tgt_tokens
    benchmark.pedantic(step, rounds=ROUNDS, warmup_rounds=1)
    assert len(losses) == ROUNDS + 1
    assert losses[-1] < losses[0]  # the same batch, trained on: its loss falls


def _sources(corpus: Corpus) -> tuple[torch.Tensor, torch.Tensor]:
    longest = np.argsort(corpus.src_lens, kind="stable")[-SENTENCES:]  # the 32 longest: the costly batch
    src = pad([corpus.src(i).astype(np.int64) for i in longest])
    return src, src != PAD


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_search_step(benchmark, embedded, corpus, arch):
    """decode_step + reorder on the (sentences x beam) row block, after 10 steps of history."""
    data, src_vocab, tgt_vocab = corpus
    model, _ = _model(embedded, arch, src_vocab, tgt_vocab)
    model.eval()
    src, src_mask = _sources(data)
    rows = torch.arange(SENTENCES).repeat_interleave(BEAM)
    origin = torch.arange(SENTENCES * BEAM).view(SENTENCES, BEAM).flip(1).reshape(-1)  # every beam moves
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        memory, state = model.reorder(memory, model.init_state(memory), rows)
        prev = torch.full((len(rows),), BOS)
        for _ in range(10):
            _, state, _ = model.decode_step(memory, state, prev)
            prev = torch.randint(4, tgt_vocab, (len(rows),), generator=torch.Generator().manual_seed(0))

    def step() -> torch.Tensor:
        with torch.no_grad():
            log_probs, new_state, _ = model.decode_step(memory, state, prev)
            model.reorder(None, new_state, origin)
        return log_probs

    log_probs = benchmark.pedantic(step, rounds=ROUNDS * 4, warmup_rounds=1)
    assert log_probs.shape == (SENTENCES * BEAM, tgt_vocab)
    torch.testing.assert_close(log_probs.logsumexp(-1), torch.zeros(len(rows)))


@pytest.mark.parametrize("arch", ["rnnsearch", "transformer"])
def test_beam_search_batch(benchmark, embedded, corpus, arch):
    """One batched beam search: 32 sentences, beam 4, up to 1.5 x source length + 2 tokens."""
    data, src_vocab, tgt_vocab = corpus
    model, _ = _model(embedded, arch, src_vocab, tgt_vocab)
    src, src_mask = _sources(data)
    max_lens = (src_mask.sum(1) * 3 // 2 + 3).long()
    hypotheses = benchmark.pedantic(beam_search, args=(model, src, src_mask, BEAM, max_lens), rounds=3, warmup_rounds=1)
    assert len(hypotheses) == SENTENCES
    assert all(len(h.tokens) < int(n) and h.score <= 0 for h, n in zip(hypotheses, max_lens))
