"""Location and content addressing over the source, after Alex Graves:

- `graves_window`: the soft window of Graves 2013, "Generating Sequences With Recurrent
  Neural Networks" (arXiv 1308.0850), §5.1, eqs. 46-51: a mixture of K Gaussians whose
  centres κ only move forward, the mechanism that let a network write a text by hand.
- `graves_ntm`: the read head of Graves, Wayne & Danihelka 2014, "Neural Turing Machines"
  (arXiv 1410.5401), §3.3: content addressing by cosine similarity, interpolation with the
  previous weights, a circular shift and sharpening.

Neither paper translates. Here the memory is the BiGRU annotations of the source (as in
RNNsearch), and the read vector is fed back to the GRU decoder as in Graves 2013: the
decoder state s_t = f(s_{t-1}, y_{t-1}, r_{t-1}) sets the head, the head reads r_t, and the
output is a maxout layer over [s_t; E y_{t-1}; r_t].
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attnrepro.models.base import Memory, Seq2SeqModel, State, dot_rows, masked_softmax
from attnrepro.models.layers import DeepOutput, ReadGRUCell, run_packed
from attnrepro.models.step_compile import step_function


class _ReadHeadDecoder(Seq2SeqModel):
    """BiGRU encoder + GRU decoder that reads the annotations through an addressing head."""

    def __init__(self, src_vocab: int, tgt_vocab: int, emb: int, hidden: int, maxout: int, dropout: float):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, emb, padding_idx=self.pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, emb, padding_idx=self.pad_id)
        self.encoder = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.init_proj = nn.Linear(hidden, hidden)  # s_0 = tanh(W_s ←h_1), as RNNsearch
        self.decoder = ReadGRUCell(emb + 2 * hidden, hidden)  # input [E y_{t-1}; r_{t-1}]
        self.readout = DeepOutput(hidden + emb + 2 * hidden, maxout, tgt_vocab)
        self.dropout = nn.Dropout(dropout)

    def head_state(self, memory: Memory) -> State:
        raise NotImplementedError

    @staticmethod
    def _head(state: State) -> State:
        """The addressing head's part of a decoder state (everything but s and the read vector)."""
        return {k: v for k, v in state.items() if k not in ("s", "read")}

    def address(self, memory: Memory, s: Tensor, head: State) -> tuple[Tensor, State]:
        """Weights (batch, src_len) over the annotations for decoder state s, and the new head state."""
        raise NotImplementedError

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        annotations, final = run_packed(self.encoder, self.dropout(self.src_embed(src)), src_mask)
        return {"annotations": annotations, "src_mask": src_mask, "s0": torch.tanh(self.init_proj(final[1]))}

    def init_state(self, memory: Memory) -> State:
        read = memory["annotations"].new_zeros(memory["annotations"].size(0), memory["annotations"].size(2))
        return {"s": memory["s0"], "read": read} | self.head_state(memory)

    def _step(self, memory: Memory, state: State, y_prev: Tensor) -> tuple[Tensor, Tensor, State]:
        s = self.decoder(torch.cat([y_prev, state["read"]], -1), state["s"])
        head = self._head(state)
        weights, head = self.address(memory, s, head)
        read = torch.bmm(weights[:, None], memory["annotations"]).squeeze(1)  # r_t = Σ_u w(u) h_u
        features = torch.cat([s, y_prev, read], -1)
        return features, weights, {"s": s, "read": read} | head

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        features, weights, state = self._step(memory, state, self.tgt_embed(prev_tokens))
        return torch.log_softmax(self.readout(features), -1), state, weights

    def teacher_step(
        self, memory: Memory, h_proj: Tensor, s: Tensor, weights: Tensor, head: State, y_t: Tensor
    ) -> tuple[Tensor, Tensor, State]:
        """One position of teacher forcing: s_t, then the head's weights w_t and state; r_{t-1} enters as w_{t-1}."""
        s = self.decoder.step(self.decoder.read_input(y_t, h_proj, weights), s)
        weights, head = self.address(memory, s, head)
        return s, weights, head

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encode(src, src_mask)
        y_prev = self.dropout(self.tgt_embed(tgt_in))  # (batch, tgt_len, emb)
        y_proj, h_proj = self.decoder.project(y_prev, memory["annotations"])  # once per batch, not per step
        state = self.init_state(memory)
        s, head = state["s"], self._head(state)
        weights = torch.zeros_like(memory["src_mask"], dtype=s.dtype)  # r_0 = 0: nothing read yet
        states, all_weights = [], []
        teacher_step = step_function(self, self.teacher_step)  # eager, fused or graphed: train.step_compile
        for y_t in y_proj.unbind(1):  # the steps of `_step`, with r_{t-1} entering through its weights
            s, weights, head = teacher_step(memory, h_proj, s, weights, head, y_t)
            states.append(s)
            all_weights.append(weights)
        reads = torch.bmm(torch.stack(all_weights, 1), memory["annotations"])  # every r_t = Σ_u w_t(u) h_u
        features = torch.cat([self.dropout(torch.stack(states, 1)), y_prev, self.dropout(reads)], -1)
        return self.readout(features)  # (batch, tgt_len, vocab); E y dropped out once, above


def at_least_fp32(x: Tensor) -> Tensor:
    """`x` in float32 where autocast made it bf16/fp16; float32 and float64 stay as they are."""
    return x.float() if x.is_floating_point() and x.element_size() < 4 else x


def gaussian_window(alpha: Tensor, beta: Tensor, kappa: Tensor, src_mask: Tensor) -> Tensor:
    """φ(t, u) = Σ_k α_k exp(-β_k (κ_k - u)^2) for u = 1..U (Graves 2013, eq. 46); 0 on padding."""
    u = torch.arange(1, src_mask.size(1) + 1, device=src_mask.device, dtype=kappa.dtype)  # (src_len,)
    phi = (alpha[..., None] * torch.exp(-beta[..., None] * (kappa[..., None] - u) ** 2)).sum(1)  # (batch, src_len)
    return phi * src_mask


class GravesWindow(_ReadHeadDecoder):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        maxout: int,
        components: int,
        dropout: float,
    ):
        super().__init__(src_vocab, tgt_vocab, emb, hidden, maxout, dropout)
        self.window = nn.Linear(hidden, 3 * components)  # (α̂, β̂, κ̂) = W h_t + b, eq. (48)

    def head_state(self, memory: Memory) -> State:
        batch = memory["s0"].size(0)
        # float32 under bf16 autocast too: κ accumulates positions, which bf16 resolves to 0.25 beyond 32
        return {"kappa": at_least_fp32(memory["s0"]).new_zeros(batch, self.window.out_features // 3)}

    def address(self, memory: Memory, s: Tensor, head: State) -> tuple[Tensor, State]:
        alpha_hat, beta_hat, kappa_hat = at_least_fp32(self.window(s)).chunk(3, -1)  # each (batch, K)
        kappa = head["kappa"] + torch.exp(kappa_hat)  # eq. (51): κ only moves forward
        phi = gaussian_window(torch.exp(alpha_hat), torch.exp(beta_hat), kappa, memory["src_mask"])  # eqs. (46, 49, 50)
        return phi, {"kappa": kappa}


def circular_shift_index(src_mask: Tensor) -> Tensor:
    """(batch, 3 * src_len) gather index: w(i - o) for o = -1, 0, +1, circular over each sentence's length."""
    lengths = src_mask.sum(1, keepdim=True).clamp(min=1)[:, None]  # (batch, 1, 1)
    positions = torch.arange(src_mask.size(1), device=src_mask.device)  # (src_len,)
    offsets = torch.tensor([-1, 0, 1], device=src_mask.device)[:, None]  # (3, 1)
    return torch.remainder(positions - offsets, lengths).flatten(1)


def ntm_address(
    unit_memory: Tensor,
    src_mask: Tensor,
    prev_weights: Tensor,
    key: Tensor,
    beta: Tensor,
    gate: Tensor,
    shift: Tensor,
    gamma: Tensor,
    shift_index: Tensor | None = None,
) -> Tensor:
    """NTM read weights (Graves et al. 2014, §3.3), circular over each sentence's real length.

    unit_memory (batch, src_len, dim): the memory rows scaled to unit norm, once per sentence;
    prev_weights (batch, src_len); key (batch, dim); beta, gate, gamma (batch,); shift (batch, 3)
    over offsets (-1, 0, +1); shift_index: `circular_shift_index(src_mask)`, once per sentence.
    """
    # In float32 even under bf16 autocast: the weights carry over from step to step, and the sharpening's
    # power (eq. 9) and the similarity's softmax lose too much in 8 bits of mantissa.
    unit_memory, prev_weights, key, beta, gate, shift, gamma = (
        at_least_fp32(x) for x in (unit_memory, prev_weights, key, beta, gate, shift, gamma)
    )
    with torch.autocast(unit_memory.device.type, enabled=False):
        similarity = dot_rows(unit_memory, F.normalize(key, dim=-1))  # cosine K[k, M_i], eq. (6)
    content = masked_softmax(beta[:, None] * similarity, src_mask)  # w^c, eq. (5)
    gated = torch.lerp(prev_weights, content, gate[:, None])  # w^g = g w^c + (1 - g) w_{t-1}, eq. (7)
    if shift_index is None:
        shift_index = circular_shift_index(src_mask)
    rolled = gated.gather(1, shift_index).unflatten(1, (3, -1))  # (batch, 3, src_len): w^g(i - o)
    shifted = (shift[:, :, None] * rolled).sum(1)  # w̃(i) = Σ_j w^g(j) s(i - j), eq. (8)
    sharpened = shifted.clamp(min=1e-12) ** gamma[:, None]  # w̃^γ, eq. (9)
    sharpened = sharpened.masked_fill(~src_mask, 0.0)
    return sharpened / sharpened.sum(1, keepdim=True)


class GravesNTM(_ReadHeadDecoder):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        maxout: int,
        dropout: float,
    ):
        super().__init__(src_vocab, tgt_vocab, emb, hidden, maxout, dropout)
        self.head = nn.Linear(hidden, 2 * hidden + 1 + 1 + 3 + 1)  # key k, β, g, s, γ (§3.1-3.3)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        memory = super().encode(src, src_mask)
        unit = F.normalize(memory["annotations"], dim=-1)  # for cosine similarity
        return memory | {"unit": unit, "shift_index": circular_shift_index(src_mask)}

    def head_state(self, memory: Memory) -> State:
        weights = torch.zeros_like(memory["src_mask"], dtype=at_least_fp32(memory["s0"]).dtype)  # fp32 under autocast
        weights[:, 0] = 1.0  # the head starts on the first source word
        return {"weights": weights}

    def address(self, memory: Memory, s: Tensor, head: State) -> tuple[Tensor, State]:
        dim = memory["annotations"].size(2)
        out = self.head(s)
        key, beta, gate, shift, gamma = out.split([dim, 1, 1, 3, 1], -1)
        weights = ntm_address(
            memory["unit"],
            memory["src_mask"],
            head["weights"],
            key,
            F.softplus(beta[:, 0]),  # β ≥ 0
            torch.sigmoid(gate[:, 0]),  # g ∈ (0, 1)
            torch.softmax(shift, -1),  # a distribution over shifts
            1 + F.softplus(gamma[:, 0]),  # γ ≥ 1
            memory["shift_index"],
        )
        return weights, {"weights": weights}
