"""The Transformer: Vaswani et al. 2017, "Attention Is All You Need" (arXiv 1706.03762), §3.

N post-norm encoder and decoder layers, LayerNorm(x + Dropout(Sublayer(x))) (§3.1, §5.4);
multi-head scaled dot-product attention (§3.2, eqs. 1-2); position-wise feed-forward
layers (eq. 2 of §3.3); embeddings scaled by √d_model and shared between source, target
and pre-softmax projection (§3.4); sinusoidal positions (§3.5). Decoding keeps each
layer's keys and values (a cache), so one step costs one position, not the whole prefix.
Beam search reorders the cache lazily: `reorder` only records which row each new row
continues, and the next step copies the past once, reordered, into the longer cache.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attnrepro.errors import ConfigError
from attnrepro.models.base import Memory, Seq2SeqModel, State


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / √d_k) V, eq. (1). q (..., n, d_k), k/v (..., m, d_k); mask broadcasts to (..., n, m)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, -1)
    return weights @ v, weights


def sinusoidal_positions(length: int, d_model: int, offset: int = 0, device: torch.device | None = None) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), §3.5; (length, d_model).

    Built on `device` itself: no host-to-device copy in every forward and decoder step."""
    pos = torch.arange(offset, offset + length, dtype=torch.float, device=device)[:, None]
    rates = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float, device=device) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model, device=device)
    pe[:, 0::2] = torch.sin(pos * rates)
    pe[:, 1::2] = torch.cos(pos * rates)
    return pe


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), eq. (2)."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def split(self, x: Tensor) -> Tensor:
        """(batch, n, d_model) -> (batch, heads, n, d_k)."""
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split(self.k(x)), self.split(self.v(x))

    def attend(
        self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool = True, causal: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Without `need_weights` (teacher forcing), PyTorch's fused kernel (flash / memory-efficient attention on
        a GPU) computes eq. (1) and no weights; `causal`: position i sees j <= i, §3.2.3 (no `mask` then)."""
        q = self.split(self.q(x))
        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask)
        else:
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal), None  # eq. (1)
        return self.o(out.transpose(1, 2).flatten(2)), weights  # (batch, n, d_model), (batch, heads, n, m)


class FeedForward(nn.Sequential):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, eq. (2). Dropout on the ReLU's output is tensor2tensor's
    `relu_dropout`, not in the paper (§5.4 drops out only sublayer outputs and embedding sums): 0 by default."""

    def __init__(self, d_model: int, d_ff: int, relu_dropout: float):
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(relu_dropout), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float, ffn_dropout: float):
        super().__init__()
        self.attn, self.ff = MultiHeadAttention(d_model, heads), FeedForward(d_model, d_ff, ffn_dropout)
        self.norm1, self.norm2, self.drop = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.norm1(x + self.drop(self.attn.attend(x, *self.attn.keys_values(x), mask, need_weights=False)[0]))
        return self.norm2(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float, ffn_dropout: float):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHeadAttention(d_model, heads), MultiHeadAttention(d_model, heads)
        self.ff = FeedForward(d_model, d_ff, ffn_dropout)
        self.norms, self.drop = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(3)), nn.Dropout(dropout)

    def forward(self, x, self_k, self_v, cross_k, cross_v, cross_mask, need_weights) -> tuple[Tensor, Tensor | None]:
        """need_weights: decoding one position (its cache holds only the past); else teacher forcing, causal."""
        causal = not need_weights
        x = self.norms[0](x + self.drop(self.self_attn.attend(x, self_k, self_v, None, need_weights, causal)[0]))
        out, weights = self.cross_attn.attend(x, cross_k, cross_v, cross_mask, need_weights)  # encoder-decoder
        x = self.norms[1](x + self.drop(out))
        return self.norms[2](x + self.drop(self.ff(x))), weights


class Transformer(Seq2SeqModel):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int,
        d_ff: int,
        heads: int,
        layers: int,
        dropout: float,
        share_embeddings: bool,
        ffn_dropout: float,
    ):
        super().__init__()
        if share_embeddings and src_vocab != tgt_vocab:
            raise ConfigError(
                f"params.share_embeddings needs one vocabulary; got {src_vocab} source, {tgt_vocab} target"
            )
        self.d_model = d_model
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=self.pad_id)
        self.src_embed = (
            self.tgt_embed if share_embeddings else nn.Embedding(src_vocab, d_model, padding_idx=self.pad_id)
        )
        nn.init.normal_(self.tgt_embed.weight, std=d_model**-0.5)
        if not share_embeddings:
            nn.init.normal_(self.src_embed.weight, std=d_model**-0.5)
        sizes = (d_model, heads, d_ff, dropout, ffn_dropout)
        self.encoder = nn.ModuleList(EncoderLayer(*sizes) for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderLayer(*sizes) for _ in range(layers))
        self.dropout = nn.Dropout(dropout)

    def embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        pe = sinusoidal_positions(tokens.size(1), self.d_model, offset, tokens.device)
        return self.dropout(embedding(tokens) * math.sqrt(self.d_model) + pe)  # §3.4, §3.5, §5.4

    def logits(self, x: Tensor) -> Tensor:
        return x @ self.tgt_embed.weight.T  # pre-softmax weights shared with the embeddings, §3.4

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        x = self.embed(self.src_embed, src)
        mask = src_mask[:, None, None]  # (batch, 1, 1, src_len)
        for layer in self.encoder:
            x = layer(x, mask)
        memory: Memory = {"src_mask": src_mask}
        for i, layer in enumerate(self.decoder):  # cross-attention keys/values, once per sentence
            memory[f"ck{i}"], memory[f"cv{i}"] = layer.cross_attn.keys_values(x)
        return memory

    def init_state(self, memory: Memory) -> State:
        rows, heads = memory["src_mask"].size(0), self.decoder[0].self_attn.heads
        empty = memory["ck0"].new_zeros(rows, heads, 0, self.d_model // heads)  # (rows, heads, t, d_k)
        order = torch.arange(rows, device=empty.device)
        return {f"{kv}{i}": empty for i in range(len(self.decoder)) for kv in "kv"} | {"order": order}

    def reorder(self, memory: Memory | None, state: State, index: Tensor) -> tuple[Memory | None, State]:
        """Lazily: the caches keep their rows, `order` says which row each new row reads (decode_step copies them)."""
        memory, _ = super().reorder(memory, {}, index)
        return memory, state | {"order": state["order"][index]}

    def _decode(self, memory: Memory, x: Tensor, state: State | None = None) -> tuple[Tensor, Tensor | None, State]:
        """Decoder layers over x (batch, n, d_model): their output, and, decoding (given the `state` of the
        positions before x), the last layer's attention averaged over heads and the caches of every position.
        Without a state, teacher forcing: causal self-attention, no attention weights."""
        cross_mask = memory["src_mask"][:, None, None]
        new_state, weights = {}, None
        for i, layer in enumerate(self.decoder):
            k, v = layer.self_attn.keys_values(x)  # (batch, heads, n, d_k)
            if state is not None:
                k, v = _extend(state[f"k{i}"], state["order"], k), _extend(state[f"v{i}"], state["order"], v)
                new_state[f"k{i}"], new_state[f"v{i}"] = k, v
            x, weights = layer(x, k, v, memory[f"ck{i}"], memory[f"cv{i}"], cross_mask, state is not None)
        if state is not None:
            new_state["order"] = torch.arange(x.size(0), device=x.device)
            weights = weights.mean(1)
        return x, weights, new_state

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        x = self.embed(self.tgt_embed, prev_tokens[:, None], offset=state["k0"].size(2))  # (batch, 1, d_model)
        x, weights, state = self._decode(memory, x, state)  # the cache holds only the past
        return torch.log_softmax(self.logits(x[:, 0]), -1), state, weights[:, 0]

    def decoder_states(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing up to the pre-softmax layer: (batch, tgt_len, d_model); `logits` maps them to words."""
        return self._decode(self.encode(src, src_mask), self.embed(self.tgt_embed, tgt_in))[0]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        return self.logits(self.decoder_states(src, src_mask, tgt_in))  # (batch, tgt_len, vocab)


def _extend(cache: Tensor, order: Tensor, new: Tensor) -> Tensor:
    """Rows `order` of `cache` (rows, heads, t, d_k), then `new` (batch, heads, 1, d_k) at position t.

    One copy of the past per step, into a buffer of the new length (a reordered copy, then a concatenated
    one, would be two).
    """
    if torch.is_grad_enabled():  # out= records no graph: select, then concatenate
        return torch.cat([cache.index_select(0, order), new], 2)
    extended = cache.new_empty(order.size(0), cache.size(1), cache.size(2) + 1, cache.size(3))
    torch.index_select(cache, 0, order, out=extended[:, :, :-1])
    extended[:, :, -1:] = new
    return extended
