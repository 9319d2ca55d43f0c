"""Pieces shared by several models: packed RNN encoding and the maxout deep output."""

from __future__ import annotations

from torch import Tensor, nn
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
