"""transformer (Vaswani et al. 2017): causal mask, scaled dot-product attention, sizes."""

from __future__ import annotations

import math

import pytest
import torch

from attnrepro.models import build_model, count_parameters
from attnrepro.models.transformer import scaled_dot_product_attention, sinusoidal_positions

from conftest import tiny_model


def test_changing_a_later_target_token_leaves_earlier_logits_unchanged():
    model = tiny_model("transformer")
    src = torch.tensor([[5, 6, 7, 8, 9]])
    mask = torch.ones_like(src, dtype=torch.bool)
    a = model(src, mask, torch.tensor([[2, 10, 11, 12, 13]]))
    b = model(src, mask, torch.tensor([[2, 10, 11, 17, 4]]))
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_scaled_dot_product_attention_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    k = torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, 0.0]])
    v = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    out, weights = scaled_dot_product_attention(q, k, v, torch.tensor([True, True, False]))
    # row 1: scores (1, 2, -) / sqrt(2); row 2: (2, 0, -) / sqrt(2)
    e = math.exp
    w1 = [e(1 / math.sqrt(2)), e(2 / math.sqrt(2))]
    w2 = [e(2 / math.sqrt(2)), e(0.0)]
    expected_w = torch.tensor([[w1[0] / sum(w1), w1[1] / sum(w1), 0], [w2[0] / sum(w2), w2[1] / sum(w2), 0]])
    torch.testing.assert_close(weights, expected_w)
    torch.testing.assert_close(out, expected_w @ v)


def test_sinusoidal_positions():
    pe = sinusoidal_positions(50, 8)
    assert float(pe[0, 0]) == 0.0 and float(pe[0, 1]) == 1.0
    assert abs(float(pe[7, 2]) - math.sin(7 / 10000 ** (2 / 8))) < 1e-6
    assert abs(float(pe[7, 3]) - math.cos(7 / 10000 ** (2 / 8))) < 1e-6


def test_shared_embeddings_are_one_tensor_and_scaled():
    model = build_model("transformer", 30, 30, {"d_model": 8, "d_ff": 16, "heads": 2, "layers": 1})
    assert model.src_embed.weight is model.tgt_embed.weight
    with pytest.raises(ValueError, match="one vocabulary"):
        build_model("transformer", 30, 31, {"d_model": 8, "d_ff": 16, "heads": 2, "layers": 1})


@pytest.mark.parametrize(
    ("params", "paper"),
    [
        ({"d_model": 512, "d_ff": 2048, "heads": 8, "layers": 6}, 65e6),
        ({"d_model": 1024, "d_ff": 4096, "heads": 16, "layers": 6}, 213e6),
    ],
)
def test_base_and_big_have_the_papers_size_at_a_shared_37000_vocabulary(params, paper):
    with torch.device("meta"):
        model = build_model("transformer", 37000, 37000, params)
    assert abs(count_parameters(model) - paper) / paper < 0.05


def test_feed_forward_has_no_dropout_inside_unless_asked():
    """Vaswani §5.4 drops out sublayer outputs, not the ReLU's: ffn_dropout (t2t's relu_dropout) defaults to 0."""
    params = {"d_model": 8, "d_ff": 16, "heads": 2, "layers": 1, "dropout": 0.3, "share_embeddings": False}
    x = torch.randn(4, 5, 8)
    torch.manual_seed(0)
    paper = build_model("transformer", 30, 30, params).train()
    torch.testing.assert_close(paper.encoder[0].ff(x), paper.encoder[0].ff(x))  # deterministic in training
    relu_dropout = build_model("transformer", 30, 30, {**params, "ffn_dropout": 0.5}).train()
    assert not torch.equal(relu_dropout.decoder[0].ff(x), relu_dropout.decoder[0].ff(x))
