"""memnet (MemN2N adapted to translation): hops add up, K matters, position encoding and tying."""

from __future__ import annotations

import torch

from attnrepro.data.batching import pad
from attnrepro.data.tokenize import PAD
from attnrepro.models import build_model
from attnrepro.models.memnet import position_encoding

from conftest import SRC_VOCAB, TGT_VOCAB, tiny_model


def _memory(model):
    src = pad([torch.arange(4, 4 + n).numpy() for n in (7, 3)])
    return model.encode(src, src != PAD), src


def test_query_after_hop_k_is_the_previous_query_plus_hop_k_output():
    model = tiny_model("memnet")
    memory, src = _memory(model)
    u1 = torch.randn(2, 8)
    hops = model.read(memory, u1)
    assert len(hops) == 3
    torch.testing.assert_close(hops[0][0], u1)
    for (u, o, _), (u_next, _, _) in zip(hops, hops[1:]):
        torch.testing.assert_close(u_next, u + o)  # u^{k+1} = u^k + o^k
    for _, _, p in hops:
        torch.testing.assert_close(p.sum(-1), torch.ones(2))
        assert torch.all(p[1, 3:] == 0)  # padding is never read


def test_changing_the_number_of_hops_changes_the_output():
    torch.manual_seed(0)
    three = build_model("memnet", SRC_VOCAB, TGT_VOCAB, {"dim": 8, "hidden": 12, "hops": 3}).eval()
    one = build_model("memnet", SRC_VOCAB, TGT_VOCAB, {"dim": 8, "hidden": 12, "hops": 1}).eval()
    one.load_state_dict(three.state_dict(), strict=False)  # same weights for what they share
    src = torch.tensor([[5, 6, 7, 8]])
    mask = torch.ones_like(src, dtype=torch.bool)
    tgt = torch.tensor([[2, 9, 10]])
    assert not torch.allclose(three(src, mask, tgt), one(src, mask, tgt))


def test_adjacent_weight_tying_uses_k_plus_one_embeddings():
    model = build_model("memnet", SRC_VOCAB, TGT_VOCAB, {"dim": 8, "hidden": 12, "hops": 3})
    assert len(model.memory_embed) == 4  # A^1, C^1 = A^2, C^2 = A^3, C^3
    memory, _ = _memory(model)
    hops = model.read(memory, torch.randn(2, 8))
    # hop 2 scores against memory m1, the same tensor hop 1 read its output from (C^1 = A^2)
    torch.testing.assert_close(hops[0][1], torch.bmm(hops[0][2][:, None], memory["m1"]).squeeze(1))
    scores = torch.bmm(memory["m1"], hops[1][0][:, :, None]).squeeze(-1)
    torch.testing.assert_close(hops[1][2], torch.softmax(scores.masked_fill(~memory["src_mask"], float("-inf")), -1))


def test_position_encoding_is_sukhbaatar_4_1():
    pe = position_encoding(torch.tensor([4, 2]), 4, 3)
    J, d = 4, 3
    for j in range(1, J + 1):
        for k in range(1, d + 1):
            assert abs(float(pe[0, j - 1, k - 1]) - ((1 - j / J) - (k / d) * (1 - 2 * j / J))) < 1e-6
    assert torch.all(pe[1, 2:] == 0)
