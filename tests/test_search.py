"""Beam search: beam 1 is greedy, batching changes nothing, the limits and penalty hold."""

from __future__ import annotations

import numpy as np
import torch

from attnrepro.config import SearchConfig
from attnrepro.data.batching import pad
from attnrepro.data.tokenize import BOS, EOS, PAD, WordVocab
from attnrepro.decoding.attention_file import load_attention, save_attention
from attnrepro.decoding.search import beam_search, length_penalty, translate_lines

from conftest import SRC_VOCAB, tiny_model


def greedy(model, src: torch.Tensor, max_len: int) -> list[int]:
    """Reference greedy decoding of one sentence, written independently of beam_search.

    `max_len` counts </s>: at most max_len - 1 real tokens. <pad> and <s> are never emitted.
    """
    memory = model.encode(src[None], torch.ones(1, len(src), dtype=torch.bool))
    state = model.init_state(memory)
    prev, out = torch.tensor([BOS]), []
    for _ in range(max_len - 1):
        log_probs, state, _ = model.decode_step(memory, state, prev)
        log_probs[:, [PAD, BOS]] = float("-inf")
        prev = log_probs.argmax(-1)
        if int(prev) == EOS:
            break
        out.append(int(prev))
    return out


def _sources(n: int = 6) -> list[np.ndarray]:
    g = np.random.default_rng(3)
    return [g.integers(4, SRC_VOCAB, size=g.integers(2, 9)) for _ in range(n)]


def test_beam_one_equals_greedy(arch):
    model = tiny_model(arch, seed=2)
    sources = _sources()
    src = pad(sources)
    hyps = beam_search(model, src, src != PAD, beam=1, max_lens=torch.full((len(sources),), 12))
    for s, hyp in zip(sources, hyps):
        assert hyp.tokens == greedy(model, torch.from_numpy(s), 12)


def test_batch_gives_the_same_hypotheses_as_each_sentence_alone(arch):
    model = tiny_model(arch, seed=3)
    sources = _sources()
    src = pad(sources)
    max_lens = torch.tensor([2 * len(s) + 3 for s in sources])
    batched = beam_search(model, src, src != PAD, beam=4, max_lens=max_lens, alpha=0.6)
    for i, s in enumerate(sources):
        alone = beam_search(
            model, torch.from_numpy(s)[None], torch.ones(1, len(s), dtype=torch.bool), 4, max_lens[i : i + 1], 0.6
        )[0]
        assert batched[i].tokens == alone.tokens
        assert abs(batched[i].score - alone.score) < 1e-4


def test_beam_finds_at_least_the_greedy_score(arch):
    model = tiny_model(arch, seed=4)
    sources = _sources()
    src = pad(sources)
    max_lens = torch.full((len(sources),), 10)
    greedy_hyps = beam_search(model, src, src != PAD, 1, max_lens)
    beam_hyps = beam_search(model, src, src != PAD, 6, max_lens)
    for g, b in zip(greedy_hyps, beam_hyps):
        assert b.score >= g.score - 1e-5


def test_score_is_the_log_probability_of_the_output(arch):
    model = tiny_model(arch, seed=5)
    s = _sources(1)[0]
    mask = torch.ones(1, len(s), dtype=torch.bool)
    hyp = beam_search(model, torch.from_numpy(s)[None], mask, 3, torch.tensor([60]))[0]
    assert len(hyp.tokens) <= 59  # a forced </s> at the limit still scores log p(</s>)
    with torch.no_grad():
        logits = model(torch.from_numpy(s)[None], mask, torch.tensor([[BOS] + hyp.tokens]))
    log_probs = torch.log_softmax(logits[0], -1)
    expected = sum(float(log_probs[t, y]) for t, y in enumerate(hyp.tokens + [EOS]))
    assert abs(hyp.score - expected) < 1e-4


def test_max_length_is_respected(arch):
    model = tiny_model(arch, seed=6)
    sources = _sources()
    src = pad(sources)
    hyps = beam_search(model, src, src != PAD, 3, max_lens=torch.full((len(sources),), 2))
    assert all(len(h.tokens) <= 1 for h in hyps)  # 2 steps: at most one token then </s>


def test_attention_of_hypotheses():
    model = tiny_model("rnnsearch", seed=7)
    sources = _sources()
    src = pad(sources)
    hyps = beam_search(model, src, src != PAD, 3, max_lens=torch.full((len(sources),), 8))
    for s, h in zip(sources, hyps):
        assert h.attention.shape == (len(h.tokens), len(s))
        np.testing.assert_allclose(h.attention.sum(1), 1.0, rtol=1e-5)


def test_length_penalty_is_gnmt():
    assert float(length_penalty(torch.tensor(1.0), 0.6)) == 1.0
    assert abs(float(length_penalty(torch.tensor(7.0), 0.6)) - 2.0**0.6) < 1e-6
    assert float(length_penalty(torch.tensor(30.0), 0.0)) == 1.0


def test_translate_lines_restores_input_order_and_saves_attention(tmp_path):
    model = tiny_model("rnnsearch", seed=8)
    words = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(SRC_VOCAB - 4)]
    vocab = WordVocab(words)
    lines = ["w1 w2 w3 w4 w5", "w6", "", "w7 w8"]
    sc = SearchConfig(beam=2, batch_size=2, max_len_a=1.0, max_len_b=3)
    hyps = translate_lines(model, vocab, vocab, lines, sc)
    assert hyps[2].tokens == [] and hyps[2].attention is None
    for line, h in zip(lines, hyps):
        if line:
            alone = translate_lines(model, vocab, vocab, [line], sc)[0]
            assert alone.tokens == h.tokens
            assert len(h.tokens) <= len(line.split()) + 3
    save_attention([h.attention for h in hyps], tmp_path / "attn.npz")
    loaded = load_attention(tmp_path / "attn.npz")
    assert [m.shape for m in loaded] == [
        (len(h.tokens), len(line.split())) if h.attention is not None else (0, 0) for line, h in zip(lines, hyps)
    ]
    np.testing.assert_allclose(loaded[0], hyps[0].attention, atol=1e-3)
