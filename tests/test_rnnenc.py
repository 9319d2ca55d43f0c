"""rnnenc (Cho et al. 2014, RNN Encoder-Decoder): the decoder GRU of App. A.1.2, c inside the reset gate."""

from __future__ import annotations

import torch

from attnrepro.data.tokenize import BOS
from attnrepro.models import build_model

from conftest import SRC_VOCAB, TGT_VOCAB, TINY_PARAMS, tiny_model

HIDDEN = TINY_PARAMS["rnnenc"]["hidden"]


def _first_state(model, context: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    _, state, _ = model.decode_step({"context": context}, {"h": h0}, torch.full((context.size(0),), BOS))
    return state["h"]


def test_a_shut_reset_gate_shuts_out_the_context_too():
    """r' = 0 and z' = 0 leave h'_1 = tanh(W' e(y_0) + b): c sits inside the reset gate (App. A.1.2).

    A GRU over the input [e(y); c] would add C c outside the gate, so h'_1 would still change with c.
    """
    model = tiny_model("rnnenc").double()
    with torch.no_grad():
        for name, p in model.decoder.named_parameters():
            if "bias" in name:
                p[: 2 * HIDDEN] = -50.0  # r' and z' saturate at 0 (both biases add into each gate)
    h0 = torch.randn(1, HIDDEN, dtype=torch.double).expand(2, -1)
    contexts = torch.randn(2, HIDDEN, dtype=torch.double)
    h1 = _first_state(model, contexts, h0)
    torch.testing.assert_close(h1[0], h1[1], rtol=0, atol=1e-12)


def test_decoder_step_is_cho_appendix_a12_by_hand():
    model = tiny_model("rnnenc").double()
    context = torch.randn(3, HIDDEN, dtype=torch.double)
    h_prev = torch.tanh(torch.randn(3, HIDDEN, dtype=torch.double))
    e = model.tgt_embed(torch.full((3,), BOS))
    (W_r, W_z, W), (U_r, U_z, U) = model.decoder.weight_ih.chunk(3), model.decoder.weight_hh.chunk(3)
    C_r, C_z, C = model.context_gates.weight.chunk(3)
    (b_ir, b_iz, b_in), (b_hr, b_hz, b_hn) = model.decoder.bias_ih.chunk(3), model.decoder.bias_hh.chunk(3)
    r = torch.sigmoid(e @ W_r.T + b_ir + h_prev @ U_r.T + b_hr + context @ C_r.T)
    z = torch.sigmoid(e @ W_z.T + b_iz + h_prev @ U_z.T + b_hz + context @ C_z.T)
    candidate = torch.tanh(e @ W.T + b_in + r * (h_prev @ U.T + b_hn + context @ C.T))
    expected = z * h_prev + (1 - z) * candidate  # h'_t = z' ⊙ h'_{t-1} + (1 - z') ⊙ h~'_t
    torch.testing.assert_close(_first_state(model, context, h_prev), expected, rtol=1e-12, atol=1e-12)


def test_decoder_has_as_many_parameters_as_a_gru_over_embedding_and_context():
    """3 gates x (W' emb + U' hidden + C hidden) + 2 biases: the count of nn.GRU(emb + hidden, hidden)."""
    emb, hidden = 8, 12
    model = build_model("rnnenc", SRC_VOCAB, TGT_VOCAB, {"emb": emb, "hidden": hidden, "maxout": 6})
    decoder = sum(p.numel() for p in (*model.decoder.parameters(), *model.context_gates.parameters()))
    assert decoder == sum(p.numel() for p in torch.nn.GRU(emb + hidden, hidden).parameters())
