"""Pieces shared by several models: packed RNN encoding and the maxout deep output."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def run_packed(rnn: nn.RNNBase, inputs: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Run `rnn` (batch_first) over padded `inputs` so padding never reaches a real state.

    Returns outputs (batch, src_len, dirs*hidden), zero on padding, and the final
    hidden state (layers*dirs, batch, hidden) taken at each sentence's own last token.
    """
    lengths = src_mask.sum(1).cpu()
    packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
    outputs, final = rnn(packed)
    outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=inputs.size(1))
    return outputs, final


class ReadGRUCell(nn.GRUCell):
    """GRU decoder cell over the input [E y; r], where r = Σ_j w_j h_j reads the annotations h.

    `cell(torch.cat([y, r], -1), s)` is the plain step (beam search). Teacher forcing uses
    linearity instead: W r = Σ_j w_j (W h_j), so `project` maps every y and every h_j once per
    batch, and `step` needs only the weights w of the step (`read_input`), never r itself.
    """

    def project(self, y: Tensor, annotations: Tensor) -> tuple[Tensor, Tensor]:
        """W_y y + b (batch, tgt_len, 3 hidden) and W_r h_j (batch, src_len, 3 hidden)."""
        w_y, w_r = self.weight_ih.split([y.size(-1), annotations.size(-1)], 1)
        return F.linear(y, w_y, self.bias_ih), annotations @ w_r.T

    @staticmethod
    def read_input(y_proj: Tensor, h_proj: Tensor, weights: Tensor) -> Tensor:
        """W_ih [y; Σ_j w_j h_j] + b_ih = y_proj + Σ_j w_j h_proj_j; y_proj (batch, 3H), weights (batch, src_len)."""
        return torch.baddbmm(y_proj[:, None], weights[:, None], h_proj).squeeze(1)

    def step(self, gi: Tensor, s: Tensor) -> Tensor:
        """One step from the input gates gi = W_ih x + b_ih, with PyTorch's GRUCell equations."""
        return gru_update(gi, F.linear(s, self.weight_hh, self.bias_hh), s)


def gru_update(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """The GRU update from input gates gi and recurrent gates gh (batch, 3 hidden), as nn.GRUCell computes it.

    r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), h̃ = tanh(gi_n + r ⊙ gh_n), h' = (1 - z) ⊙ h̃ + z ⊙ h. The reset
    gate multiplies the recurrent product gh_n = U h + b (Cho 2014, App. A.1.2), not h itself as in U(r ⊙ h).
    """
    (i_r, i_z, i_n), (h_r, h_z, h_n) = gi.chunk(3, -1), gh.chunk(3, -1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return torch.lerp(n, h, z)  # (1 - z) n + z h


class DeepOutput(nn.Module):
    """Bahdanau 2014, App. A.2.2: t~ = U_o s + V_o E y + C_o c; t = maxout(t~); p(y) ∝ exp(W_o t).

    With `maxout` = 0 the readout is a single linear map of [s; E y; c] (no deep output).
    """

    def __init__(self, in_features: int, maxout: int, vocab: int, pool: int = 2):
        super().__init__()
        self.pool = pool
        if maxout > 0:
            self.pre = nn.Linear(in_features, pool * maxout)  # U_o, V_o, C_o stacked
            self.out = nn.Linear(maxout, vocab)  # W_o
        else:
            self.pre = None
            self.out = nn.Linear(in_features, vocab)

    def forward(self, features: Tensor) -> Tensor:
        if self.pre is None:
            return self.out(features)
        t_tilde = self.pre(features)
        t = t_tilde.unflatten(-1, (-1, self.pool)).amax(-1)  # max over pairs (Goodfellow 2013)
        return self.out(t)


def init_bahdanau(module: nn.Module) -> None:
    """Bahdanau 2014, App. B.1: recurrent matrices orthogonal, the rest N(0, 0.01^2), biases 0.

    Alignment matrices W_a, U_a ~ N(0, 0.001^2) and v_a = 0 are set by the model itself.
    """
    for name, p in module.named_parameters():
        if "bias" in name:
            nn.init.zeros_(p)
        elif "weight_hh" in name:
            for chunk in p.data.chunk(p.size(0) // p.size(1)):  # one square matrix per gate
                nn.init.orthogonal_(chunk)
        else:
            nn.init.normal_(p, std=0.01)
