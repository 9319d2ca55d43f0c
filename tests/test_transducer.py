"""The RNN Transducer's mathematics (Graves 2012, §2): the loss against a brute-force sum over every monotonic
alignment, exact next-token probabilities in teacher forcing and in decoding, padding, gradients, the
posterior over cursor positions, and a wide beam against the exhaustive best."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from attnrepro.config import SearchConfig
from attnrepro.data.batching import pad
from attnrepro.data.tokenize import BOS, EOS, PAD, UNK
from attnrepro.decoding.search import beam_search, translate_ids
from attnrepro.models.transducer import NULL, forward_rows, lattice_memory, log_normaliser

from conftest import SRC_VOCAB, TGT_VOCAB, tiny_model

SHAPES = [(1, 0), (3, 0), (1, 3), (2, 5), (4, 3), (5, 5), (6, 2)]  # (T, U): U = 0 and U > T included


@pytest.fixture(scope="module")
def model():
    return tiny_model("transducer").double()


def _lattice_log_probs(model, src: torch.Tensor, y: list[int]) -> torch.Tensor:
    """log Pr(k | t, u) (T, U+1, V), the full softmax of f_t + g_u (eqs. 12-13), built the naive way."""
    memory = model.encode(src[None], torch.ones(1, len(src), dtype=torch.bool))
    states, _ = model.predictor(model.tgt_embed(torch.tensor([[BOS, *y]])))
    return torch.log_softmax(memory["f"][0][:, None] + model.to_g(states)[0][None], -1)


def _paths(T: int, U: int):
    """Every monotonic alignment: the positions, among T-1+U moves, of the U word emissions."""
    return itertools.combinations(range(T - 1 + U), U)


def _brute_force(model, src: torch.Tensor, y: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """ln Pr(y | x) summed over every alignment, and the posterior of each word's source position (U, T)."""
    lp = _lattice_log_probs(model, src, y)
    T, U = len(src), len(y)
    scores, positions = [], []
    for emissions in _paths(T, U):
        t, u, score, where = 0, 0, 0.0, []
        for move in range(T - 1 + U):
            if move in emissions:
                score, u = score + lp[t, u, y[u]], u + 1
                where.append(t)
            else:
                score, t = score + lp[t, u, NULL], t + 1  # ∅ moves the source cursor
        scores.append(score + lp[T - 1, U, NULL])  # eq. (17): the sentence ends with ∅ at the last source word
        positions.append(where)
    scores = torch.stack(scores)
    weights = torch.softmax(scores, 0)
    posterior = torch.zeros(U, T, dtype=torch.float64)
    for w, where in zip(weights, positions):
        for u, t in enumerate(where):
            posterior[u, t] += w
    return torch.logsumexp(scores, 0), posterior


def _case(T: int, U: int, seed: int = 0) -> tuple[torch.Tensor, list[int]]:
    g = torch.Generator().manual_seed(100 * T + U + seed)
    return torch.randint(4, SRC_VOCAB, (T,), generator=g), torch.randint(4, TGT_VOCAB, (U,), generator=g).tolist()


@pytest.mark.parametrize("T,U", SHAPES)
def test_the_loss_is_the_sum_over_every_monotonic_alignment(model, T, U):
    src, y = _case(T, U)
    expected, _ = _brute_force(model, src, y)
    mask = torch.ones(1, T, dtype=torch.bool)
    tgt_in = torch.tensor([[BOS, *y]])
    exact = model.log_likelihood(src[None], mask, tgt_in, torch.tensor([U]))
    torch.testing.assert_close(exact, expected[None], rtol=0, atol=1e-12)
    # the training loss: forward's next-token log-probabilities along the reference, </s> included
    chain = model(src[None], mask, tgt_in)[0, torch.arange(U + 1), torch.tensor([*y, EOS])].sum()
    torch.testing.assert_close(chain, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("T,U", SHAPES)
def test_decode_steps_are_exact_next_token_distributions(model, T, U):
    """Every step's distribution (</s> included) sums to 1; their product along y is Pr(y | x)."""
    src, y = _case(T, U)
    expected, _ = _brute_force(model, src, y)
    memory = model.encode(src[None], torch.ones(1, T, dtype=torch.bool))
    state, total = model.init_state(memory), torch.zeros((), dtype=torch.float64)
    for prev, target in zip([BOS, *y], [*y, EOS]):
        log_probs, state, cursor = model.decode_step(memory, state, torch.tensor([prev]))
        torch.testing.assert_close(log_probs.exp().sum(), torch.tensor(1.0, dtype=torch.float64), rtol=0, atol=1e-12)
        torch.testing.assert_close(cursor.sum(), torch.tensor(1.0, dtype=torch.float64), rtol=0, atol=1e-12)
        total = total + log_probs[0, target]
    torch.testing.assert_close(total, expected, rtol=0, atol=1e-12)


def test_a_padded_batch_gives_each_sentence_what_it_gets_alone(model):
    cases = [_case(T, U, seed=1) for T, U in [(6, 4), (2, 3), (4, 0), (5, 6)]]
    src = pad([s.numpy() for s, _ in cases])
    mask = src != PAD
    tgt_lens = torch.tensor([len(y) for _, y in cases])
    tgt_in = pad([np.array([BOS, *y]) for _, y in cases])
    batched = model.log_likelihood(src, mask, tgt_in, tgt_lens)
    aligned = model.alignment(src, mask, tgt_in, tgt_lens)
    memory = model.encode(src, mask)
    state = model.init_state(memory)
    steps = [model.decode_step(memory, state, tgt_in[:, 0])]
    for u in range(1, tgt_in.size(1)):
        steps.append(model.decode_step(memory, steps[-1][1], tgt_in[:, u]))
    for b, (s, y) in enumerate(cases):
        alone = (s[None], torch.ones(1, len(s), dtype=torch.bool), torch.tensor([[BOS, *y]]), tgt_lens[b : b + 1])
        torch.testing.assert_close(batched[b : b + 1], model.log_likelihood(*alone), rtol=0, atol=1e-12)
        torch.testing.assert_close(aligned[b, : len(y), : len(s)], model.alignment(*alone)[0], rtol=0, atol=1e-12)
        assert torch.all(aligned[b, :, len(s) :] == 0) and torch.all(aligned[b, len(y) :] == 0)
        memory_alone = model.encode(*alone[:2])
        state_alone = model.init_state(memory_alone)
        for u, prev in enumerate([BOS, *y]):
            log_probs, state_alone, cursor = model.decode_step(memory_alone, state_alone, torch.tensor([prev]))
            torch.testing.assert_close(steps[u][0][b], log_probs[0], rtol=0, atol=1e-10)
            torch.testing.assert_close(steps[u][2][b, : len(s)], cursor[0], rtol=0, atol=1e-10)
            assert torch.all(steps[u][2][b, len(s) :] == 0)  # padded source positions never receive mass


def test_the_alignment_is_the_posterior_over_cursor_positions(model):
    for T, U in [(3, 2), (4, 4), (2, 5), (5, 3)]:
        src, y = _case(T, U)
        _, expected = _brute_force(model, src, y)
        aligned = model.alignment(
            src[None], torch.ones(1, T, dtype=torch.bool), torch.tensor([[BOS, *y]]), torch.tensor([U])
        )
        torch.testing.assert_close(aligned[0], expected, rtol=0, atol=1e-12)
        torch.testing.assert_close(aligned[0].sum(1), torch.ones(U, dtype=torch.float64), rtol=0, atol=1e-12)


def _loss_of(y: torch.Tensor, mask: torch.Tensor):
    """-ln Pr(y | x) of each sentence, summed, as a function of f (batch, T, V) and g (batch, U+1, V)."""
    batch, T = mask.shape
    U, last = y.size(1), mask.sum(1) - 1

    def loss(f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        f_max = f.amax(-1, keepdim=True).detach()
        log_norm = log_normaliser(f, torch.exp(f - f_max), f_max, g)
        log_null = f[:, :, NULL, None] + g[:, None, :, NULL] - log_norm
        log_emit = f.gather(2, y[:, None].expand(-1, T, -1)) + g[:, :-1].gather(2, y[..., None]).squeeze(-1)[:, None]
        log_alpha = forward_rows(log_emit - log_norm[:, :, :-1], log_null, mask)
        return -(log_alpha[torch.arange(batch), last, U] + log_null[torch.arange(batch), last, U]).sum()

    return loss


def test_the_loss_has_the_gradients_autograd_checks():
    """gradcheck of -ln Pr(y | x) through the normaliser and the recursion, in f and g, on tiny sizes."""
    gen = torch.Generator().manual_seed(3)
    for T, U, V in [(3, 2, 5), (2, 4, 6), (4, 0, 5)]:
        f = torch.randn(2, T, V, generator=gen, dtype=torch.float64, requires_grad=True)
        g = torch.randn(2, U + 1, V, generator=gen, dtype=torch.float64, requires_grad=True)
        y = torch.randint(1, V, (2, U), generator=gen)
        loss = _loss_of(y, torch.tensor([[True] * T, [True] * (T - 1) + [False]]))
        assert torch.autograd.gradcheck(loss, (f, g))
        loss(f, g).backward()
        assert torch.all(f.grad[1, T - 1] == 0)  # the padded position contributes nothing


def test_a_beam_as_wide_as_the_hypothesis_space_finds_the_exhaustive_best():
    """Vocabulary {<unk>, 4, 5} plus </s>, outputs of at most 3 words: 40 hypotheses, beam 40."""
    torch.manual_seed(0)
    model = tiny_model("transducer", tgt_vocab=6).double()
    src = torch.tensor([[7, 8, 9]])
    mask = torch.ones_like(src, dtype=torch.bool)
    words = [UNK, 4, 5]  # <unk> is a word the search may emit; <pad> and <s> never are
    space = [list(c) for n in range(4) for c in itertools.product(words, repeat=n)]
    with torch.no_grad():
        scores = [
            float(model.log_likelihood(src, mask, torch.tensor([[BOS, *c]]), torch.tensor([len(c)]))) for c in space
        ]
    best = int(np.argmax(scores))
    hyp = beam_search(model, src, mask, beam=len(space), max_lens=torch.tensor([4]))[0]
    assert hyp.tokens == space[best]
    assert hyp.score == pytest.approx(scores[best], abs=1e-5)  # the search keeps float32 scores
    assert sorted(scores)[-2] < scores[best]  # a unique best: the search had to find it


def test_translations_carry_the_posterior_not_the_search_s_cursor(model):
    """translate_ids hands each finished output to `alignment`: Fig. 3 draws the posterior given the whole
    output, not decode_step's cursor given the prefix (which it replaces)."""
    sources = [_case(T, 0, seed=2)[0].numpy() for T in (5, 3, 7)]
    sc = SearchConfig(beam=3, batch_size=3, max_len_a=1.0, max_len_b=2)
    hyps = translate_ids(model, sources, sc, torch.device("cpu"))
    for s, hyp in zip(sources, hyps):
        assert hyp.tokens, "an empty output has no rows to compare"
        tgt_in, lens = torch.tensor([[BOS, *hyp.tokens]]), torch.tensor([len(hyp.tokens)])
        expected = model.alignment(torch.from_numpy(s)[None], torch.ones(1, len(s), dtype=torch.bool), tgt_in, lens)
        np.testing.assert_allclose(hyp.attention, expected[0].float().numpy(), rtol=0, atol=1e-6)


def _normaliser(f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    f_max = f.amax(-1, keepdim=True)
    return log_normaliser(f, torch.exp(f - f_max), f_max, g)


@pytest.mark.parametrize("dtype, margin", [(torch.float64, 800.0), (torch.float32, 100.0)])
def test_the_normaliser_stays_exact_where_f_and_g_peak_far_apart(dtype, margin):
    """f peaks on word 1 and g on word 2, each `margin` nats above the rest: every product exp(f - max) exp(g - max)
    underflows (float64 at 800 nats, float32 at 100), and the entries are recomputed in log space. Before the
    fallback, float64 gave ln N = -456.2 where logsumexp gives -3.70 at 800 nats."""
    V = 6
    f = torch.zeros(1, 3, V, dtype=dtype)
    g = torch.zeros(1, 2, V, dtype=dtype)
    f[..., 1] = margin
    g[..., 2] = margin
    expected = torch.logsumexp(f[:, :, None] + g[:, None], -1)  # (1, T, U), the definition
    got = _normaliser(f, g)
    torch.testing.assert_close(got, expected, rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=0)
    assert got.dtype == dtype


def test_a_float32_model_gives_the_float64_lattice_s_probabilities():
    """Training runs the lattice in float32: on a 30 x 30 sentence pair, with one word 200 nats below the rest at
    every source position (its Σ_t α exp(f_t) underflows in float32), the reference words' log-probabilities, every
    representable one, ln Pr(y | x) and the gradients match the float64 model's to float32 precision."""
    torch.manual_seed(5)
    model32 = tiny_model("transducer", seed=3)
    with torch.no_grad():
        model32.to_f.bias[7] -= 200.0
    model64 = tiny_model("transducer", seed=3).double()
    model64.load_state_dict(model32.state_dict())
    src = torch.randint(4, SRC_VOCAB, (2, 30))
    mask = torch.ones_like(src, dtype=torch.bool)
    mask[1, 25:] = False
    tgt_in = torch.cat([torch.full((2, 1), BOS), torch.randint(4, TGT_VOCAB, (2, 30))], 1)
    tgt_in[:, 5] = 7  # the improbable word is a reference word too: its loss term is the exact one
    out32, out64 = model32(src, mask, tgt_in), model64(src, mask, tgt_in)
    assert out32.dtype == torch.float32
    assert float(out64[:, :, 7].detach().max()) < -150  # the word is as improbable as built
    representable = out64 > -50  # float32's product floors a word ~60 nats below every peak (not the loss's)
    torch.testing.assert_close(out32.double()[representable], out64[representable], rtol=1e-5, atol=2e-4)
    reference = tgt_in[:, 1:, None]  # the words the loss reads, row u predicting y_{u+1}: exact at any depth
    torch.testing.assert_close(out32[:, :-1].gather(2, reference).double(), out64[:, :-1].gather(2, reference),
                               rtol=1e-5, atol=2e-4)  # fmt: skip
    lens = torch.tensor([30, 30])
    ll32 = model32.log_likelihood(src, mask, tgt_in, lens)
    ll64 = model64.log_likelihood(src, mask, tgt_in, lens)
    torch.testing.assert_close(ll32.double(), ll64, rtol=1e-5, atol=0)
    ll32.sum().backward()
    ll64.sum().backward()
    for (name, p32), p64 in zip(model32.named_parameters(), model64.parameters()):
        scale = float(p64.grad.abs().max())  # a sum over 1 700 nats: float32's error is relative to the largest
        assert float((p32.grad.double() - p64.grad).abs().max()) <= 1e-4 * scale, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_word_the_loss_reads_is_scored_exactly_however_improbable(dtype):
    """Word 1 sits 2 000 nats below the peak at every position where α has mass: Σ_t α/N exp(f_t^1) underflows in
    float32 and float64 alike. Named as the row's reference word, its score is the log-space sum (the loss and its
    gradient are exact); unnamed, it is the product's floor, above its value and still improbable."""
    f = torch.zeros(1, 3, 5, dtype=dtype)
    f[0, 1:, 1] = -2000.0
    f[0, :, 4] = -2000.0
    memory = lattice_memory(f, torch.ones(1, 3, dtype=torch.bool))
    log_alpha = torch.tensor([[[-3000.0], [-1.0], [-2.0]]], dtype=dtype)  # (1, T, U=1)
    log_norm = torch.zeros(1, 3, 1, dtype=dtype)
    log_null = torch.full((1, 3, 1), -1.0, dtype=dtype)
    g = torch.zeros(1, 1, 5, dtype=dtype)
    model = tiny_model("transducer")
    named = model._next_token_scores(memory, log_alpha, g, log_norm, log_null, words=torch.tensor([[1]]))
    unnamed = model._next_token_scores(memory, log_alpha, g, log_norm, log_null)
    expected = torch.logsumexp(log_alpha[0, :, 0, None] + f[0], 0)  # (V,): the definition, in log space
    torch.testing.assert_close(named[0, 0, 1], expected[1], rtol=1e-6, atol=0)
    assert float(expected[1]) == pytest.approx(-2000.0 + math.log(math.exp(-1) + math.exp(-2)))  # α at t = 1, 2
    assert float(expected[4]) < float(unnamed[0, 0, 4]) < -50  # the floor: no search takes it
    for k in (0, 2):  # words near the peak: the product is exact, named or not
        torch.testing.assert_close(unnamed[0, 0, k], expected[k], rtol=1e-6, atol=0)
