"""The training objective: chunked cross-entropy and bucket padding give the plain loss and its gradients."""

from __future__ import annotations

import pytest
import torch

from attnrepro.data.tokenize import PAD
from attnrepro.training.objective import Objective, bucket_rows, chunked_cross_entropy, pad_to_buckets
from attnrepro.training.validation import loss_fn

from conftest import SRC_VOCAB, TGT_VOCAB, TINY_PARAMS, tiny_model

# float32 on the CPU: a different order of the same sums, nothing else. A gradient's error is measured against
# its tensor's largest entry (tiny_model's weights give gradients up to ~60, whose float32 rounding is ~1e-5).
LOSS_RTOL, GRAD_TOL, GRAD_ATOL = 1e-6, 1e-5, 1e-6  # (a gradient that is 0 in exact arithmetic: ~1e-7)


def _batch(rows: int = 5, src_len: int = 9, tgt_len: int = 7, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random ids with padding at the ends of some rows (every row keeps a real token)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, SRC_VOCAB, (rows, src_len), generator=g)
    tgt = torch.randint(4, TGT_VOCAB, (rows, tgt_len + 1), generator=g)
    src[1, 4:], tgt[2, 3:], src[-1, 1:], tgt[-1, 2:] = PAD, PAD, PAD, PAD
    return src, src != PAD, tgt[:, :-1], tgt[:, 1:]


def _loss_and_grads(model: torch.nn.Module, loss: torch.Tensor) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same(a: tuple[float, dict], b: tuple[float, dict], tol: tuple[float, float, float] | None = None) -> None:
    loss_rtol, grad_tol, grad_atol = tol or (LOSS_RTOL, GRAD_TOL, GRAD_ATOL)
    assert b[0] == pytest.approx(a[0], rel=loss_rtol)
    assert a[1].keys() == b[1].keys()
    for name, grad in a[1].items():
        error, scale = float((b[1][name] - grad).abs().max()), float(grad.abs().max())
        assert error <= grad_tol * scale + grad_atol, (name, error, scale)


@pytest.mark.parametrize("chunk_tokens", [1, 4, 6, 1000])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_chunked_cross_entropy_is_the_plain_loss_with_the_same_gradients(chunk_tokens, label_smoothing):
    model = tiny_model("transformer", tgt_vocab=SRC_VOCAB).train()  # (dropout 0: the two passes see the same net)
    src, src_mask, tgt_in, tgt_out = _batch()
    plain = _loss_and_grads(model, loss_fn(model(src, src_mask, tgt_in), tgt_out, label_smoothing))
    states = model.decoder_states(src, src_mask, tgt_in)
    chunked = chunked_cross_entropy(states, model.logits, tgt_out, label_smoothing, chunk_tokens)
    _assert_same(plain, _loss_and_grads(model, chunked))


def test_the_objective_chunks_only_a_model_with_decoder_states():
    transformer, rnn = tiny_model("transformer", tgt_vocab=SRC_VOCAB), tiny_model("rnnsearch")
    assert Objective(transformer, 0.1, chunk_tokens=8).chunk_tokens == 8
    assert Objective(rnn, 0.1, chunk_tokens=8).chunk_tokens == 0  # its loss is the plain one
    src, src_mask, tgt_in, tgt_out = _batch()
    objective = Objective(transformer, 0.1, chunk_tokens=8)
    plain = _loss_and_grads(transformer, loss_fn(transformer(src, src_mask, tgt_in), tgt_out, 0.1))
    _assert_same(plain, _loss_and_grads(transformer, objective(src, src_mask, tgt_in, tgt_out)))


@pytest.mark.parametrize(("rows", "bucket"), [(1, 1), (4, 4), (5, 5), (7, 7), (8, 8), (9, 10), (80, 80), (81, 96),
                                              (150, 160), (600, 640), (1000, 1024)])  # fmt: skip
def test_rows_are_rounded_up_to_four_sizes_per_octave(rows, bucket):
    assert bucket_rows(rows) == bucket
    assert (bucket - rows) / rows <= 0.25


@pytest.mark.parametrize("arch", sorted(TINY_PARAMS))
def test_a_batch_padded_to_its_bucket_gives_the_same_loss_and_gradients(arch):
    model = tiny_model(arch, tgt_vocab=SRC_VOCAB if arch == "transformer" else TGT_VOCAB).train()
    src, src_mask, tgt_in, tgt_out = _batch(rows=9, src_len=11)
    padded = pad_to_buckets(src, src_mask, tgt_in, tgt_out)
    assert padded[0].shape == (10, 16) and padded[2].shape == (10, 7)
    assert bool(padded[1][9, 0]) and not bool(padded[1][9, 1:].any()) and not bool(padded[3][9:].ne(PAD).any())
    plain = _loss_and_grads(model, Objective(model, 0.1)(src, src_mask, tgt_in, tgt_out))
    _assert_same(plain, _loss_and_grads(model, Objective(model, 0.1, bucket=True)(src, src_mask, tgt_in, tgt_out)))
