"""RNN Transducer: Graves 2012, "Sequence Transduction with Recurrent Neural Networks" (arXiv 1211.3711), §2.

The first idea of the e-mail behind Bahdanau et al. 2014: two cursors, one over the source and one over the
target, whose trajectories are marginalised by dynamic programming. A bidirectional GRU (the transcription
network, RNNsearch's encoder) gives f_1..f_T; a GRU over (<s>, y_1..y_U) (the prediction network) gives
g_0..g_U. At lattice node (t, u) the output is Pr(k | t, u) = softmax_k(f_t^k + g_u^k) (eqs. 12-13) over the
target vocabulary, whose </s> slot is the null symbol ∅: it moves the source cursor one word on, and ∅ at the
last source word ends the sentence (eq. 17). The forward variables α(t, u) = α(t-1, u) ∅(t-1, u)
+ α(t, u-1) y(t, u-1) (eq. 16) give Pr(y | x) = α(T, U) ∅(T, U).

Inside the one model interface (docs/design.md): `forward` returns the exact next-token log-probabilities
log p(k | y_<=u, x) = log Σ_t α(t, u) Pr(k | t, u) - log Z_u, with p(</s> | y_<=u, x) ∝ α(T, u) ∅(T, u); their
sum along the reference is ln Pr(y | x) (the chain rule), so training, label smoothing, validation and the
beam search need no branch. The additive form makes the normaliser N(t, u) = Σ_k exp(f_t^k + g_u^k) a batched
matrix product exp(F) exp(G)^T: no (batch, T, U+1, vocab) tensor is built.

The lattice runs in the weights' precision, at least float32 (float64 for a float64 model: the tests' exact
checks). α lives in log space, so a row spanning hundreds of nats loses nothing. The normaliser's scaled
product exp(F) exp(G)^T underflows where f and g put their peaks more than ~60 nats (float32; ~700 in float64)
apart: those entries are found by their size and recomputed in log space (`exact_where_small`), so every
lattice probability is exact. The next-token sums Σ_t α exp(f_t) are exact for the words the loss reads
(`_next_token_scores`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnrepro.data.tokenize import EOS
from attnrepro.models.base import Memory, Seq2SeqModel, State
from attnrepro.models.layers import init_bahdanau, run_packed

NULL = EOS  # ∅ (Graves 2012, §2.1) shares the </s> slot: ∅ at the last source word is the end (eq. 17)
NEG = -1e9  # log of "no mass": finite, so padded source positions give zeros, never NaN, in gradients


EXACT_CHUNK = 1 << 14  # entries recomputed in log space at once: bounds the (entries, terms) tensor


def exact_where_small(log_sums: Tensor, sums: Tensor, terms: int, exact) -> Tensor:
    """`log_sums` with every entry whose scaled sum of `terms` exponentials is too small to be exact in its dtype
    (terms flushed to zero could carry more than one rounding error of it) replaced by `exact(index)`, the log-space
    sum of the entries at `index` (a tuple of index tensors), computed EXACT_CHUNK at a time."""
    info = torch.finfo(sums.dtype)
    small = (sums < terms * info.tiny / info.eps).nonzero(as_tuple=True)
    if not small[0].numel():
        return log_sums
    values = [exact(tuple(i[at : at + EXACT_CHUNK] for i in small)) for at in range(0, small[0].numel(), EXACT_CHUNK)]
    return log_sums.index_put(small, torch.cat(values))


def log_normaliser(f: Tensor, f_exp: Tensor, f_max: Tensor, g: Tensor) -> Tensor:
    """log N(t, u) = log Σ_k exp(f_t^k + g_u^k) (eq. 13's denominator) as one batched product.

    f (batch, T, V), f_exp = exp(f - f_max), f_max (batch, T, 1), g (batch, U, V) -> (batch, T, U)."""
    g_max = g.amax(-1, keepdim=True)  # (batch, U, 1)
    products = torch.bmm(f_exp, torch.exp(g - g_max).transpose(1, 2))  # (batch, T, U)
    log_n = torch.log(products.clamp_min(torch.finfo(products.dtype).tiny)) + f_max + g_max.transpose(1, 2)
    return exact_where_small(log_n, products, f.size(2), lambda i: torch.logsumexp(f[i[0], i[1]] + g[i[0], i[2]], -1))


def propagate(log_entry: Tensor, log_null: Tensor, src_mask: Tensor) -> Tensor:
    """One row of eq. (16): α(t, u) = Σ_{t'<=t} E(t') Π_{t'<=k<t} ∅(k, u), with E the mass that enters row u at t'.

    All (batch, T) in log space: logcumsumexp(E - C) + C, C the exclusive cumulative sum of log ∅ along t."""
    log_null = log_null.masked_fill(~src_mask, 0.0)
    carried = torch.cumsum(log_null, 1) - log_null  # C(t) = Σ_{k<t} log ∅(k, u)
    return (torch.logcumsumexp(log_entry - carried, 1) + carried).masked_fill(~src_mask, NEG)


def start_row(like: Tensor) -> Tensor:
    """The mass that enters row 0 (batch, T), in log space: α(1, 0) = 1, nothing elsewhere."""
    entry = torch.full_like(like, NEG)
    entry[:, 0] = 0.0
    return entry


def end_of(log_alpha: Tensor, log_null: Tensor, last: Tensor, tgt_lens: Tensor) -> Tensor:
    """ln α(T, U) ∅(T, U) = ln Pr(y | x) (eq. 17) of each sentence (batch,): last = T - 1, tgt_lens = U."""
    batch = torch.arange(log_alpha.size(0), device=log_alpha.device)
    return log_alpha[batch, last, tgt_lens] + log_null[batch, last, tgt_lens]


def lattice_memory(f: Tensor, src_mask: Tensor) -> Memory:
    """What the lattice reads of the source: f (batch, T, V), exp(f - max_k f), its peak, the mask and T."""
    f_max = f.amax(-1, keepdim=True)  # (batch, T, 1)
    last = src_mask.sum(1, keepdim=True) - 1  # (batch, 1): the last real source position, T
    return {"f": f, "f_exp": torch.exp(f - f_max), "f_max": f_max, "src_mask": src_mask, "last": last}


def forward_rows(log_emit: Tensor, log_null: Tensor, src_mask: Tensor) -> Tensor:
    """log α (batch, T, U+1) of eq. (16), row by row: α(1, 0) = 1; row u is entered from row u-1 by y(t, u-1)."""
    rows = [propagate(start_row(log_null[:, :, 0]), log_null[:, :, 0], src_mask)]
    for u in range(1, log_null.size(2)):
        rows.append(propagate(rows[-1] + log_emit[:, :, u - 1], log_null[:, :, u], src_mask))
    return torch.stack(rows, 2)


class Transducer(Seq2SeqModel):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        dropout: float,
        init: str,
    ):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, emb, padding_idx=self.pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, emb, padding_idx=self.pad_id)
        self.encoder = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)  # transcription network, §2.1
        self.to_f = nn.Linear(2 * hidden, tgt_vocab)  # f_t = W_f [→h_t; ←h_t] + b_f
        self.predictor = nn.GRU(emb, hidden, batch_first=True)  # prediction network over (<s>, y_1..y_U), §2.2
        self.to_g = nn.Linear(hidden, tgt_vocab)  # g_u
        self.dropout = nn.Dropout(dropout)
        if init == "paper":  # at WMT scale the recipe is RNNsearch's (Bahdanau App. B.1); Graves 2012 has none for MT
            init_bahdanau(self)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        annotations, _ = run_packed(self.encoder, self.dropout(self.src_embed(src)), src_mask)  # (batch, T, 2H)
        f = self.to_f(self.dropout(annotations))  # (batch, T, V)
        f = f.to(torch.promote_types(self.to_f.weight.dtype, torch.float32))  # the lattice's dtype (autocast: float32)
        return lattice_memory(f, src_mask)

    def _null(self, memory: Memory, g: Tensor, log_norm: Tensor) -> Tensor:
        """log ∅(t, u) (batch, T, U) for g (batch, U, V) and log N (batch, T, U)."""
        return memory["f"][:, :, NULL, None] + g[:, None, :, NULL] - log_norm

    def _next_token_scores(
        self,
        memory: Memory,
        log_alpha: Tensor,
        g: Tensor,
        log_norm: Tensor,
        log_null: Tensor,
        words: Tensor | None = None,
    ) -> Tensor:
        """log Σ_t α(t, u) Pr(k | t, u) for every k, the </s> slot α(T, u) ∅(T, u), rows unnormalised.

        log_alpha, log_norm, log_null (batch, T, U); g (batch, U, V) -> (batch, U, V). The sum over t is one
        product scaled by each f_t's peak; a word more than ~60 nats (float32; ~700 in float64) below the peak at
        every position where α is gets the floor of that product instead of its value: a probability no search
        takes, and the softmax's gradient there is nil either way. Where the loss reads a word, its score must be
        exact: `words` (batch, W <= U) names it at each row, and those entries are computed in log space."""
        log_mass = (log_alpha - log_norm).transpose(1, 2)  # log α/N (batch, U, T)
        weights = log_mass + memory["f_max"].transpose(1, 2)  # log α/N + max_k f_t^k
        top = weights.amax(-1, keepdim=True)
        sums = torch.bmm(torch.exp(weights - top), memory["f_exp"])  # Σ_t α/N exp(f_t^k) / e^top, (batch, U, V)
        scores = torch.log(sums.clamp_min(torch.finfo(sums.dtype).tiny)) + top + g
        if words is not None:  # log Σ_t exp(log α/N (b, u, t) + f_t^k) for the named words, exactly
            f_words = memory["f"].gather(2, words[:, None].expand(-1, log_mass.size(2), -1))  # (batch, T, W)
            exact = torch.logsumexp(log_mass[:, : words.size(1)] + f_words.transpose(1, 2), -1)  # (batch, W)
            exact = exact + g[:, : words.size(1)].gather(2, words[..., None]).squeeze(-1)
            scores = torch.cat([scores[:, : words.size(1)].scatter(2, words[..., None], exact[..., None]),
                                scores[:, words.size(1):]], 1)  # fmt: skip
        last = memory["last"][:, :, None].expand(-1, 1, log_alpha.size(2))  # (batch, 1, U)
        end = (log_alpha.gather(1, last) + log_null.gather(1, last)).squeeze(1)  # α(T, u) ∅(T, u), eq. (17)
        return scores.index_copy(2, torch.tensor([NULL], device=scores.device), end[:, :, None])

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: log p(k | y_<=u, x) (batch, U+1, V) for tgt_in = (<s>, y_1..y_U), exact."""
        memory = self.encode(src, src_mask)
        g, log_norm, log_null, log_emit = self._lattice(memory, tgt_in)
        log_alpha = forward_rows(log_emit, log_null, src_mask)
        scores = self._next_token_scores(memory, log_alpha, g, log_norm, log_null, words=tgt_in[:, 1:])
        return torch.log_softmax(scores, -1).to(self.to_g.weight.dtype)

    def _lattice(self, memory: Memory, tgt_in: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """g (batch, U+1, V), log N and log ∅ (batch, T, U+1), and log y(t, u) of each reference word (batch, T, U)."""
        states, _ = self.predictor(self.dropout(self.tgt_embed(tgt_in)))  # (batch, U+1, H): after <s>, y_1..y_u
        g = self.to_g(self.dropout(states)).to(memory["f"].dtype)  # (batch, U+1, V)
        log_norm = log_normaliser(memory["f"], memory["f_exp"], memory["f_max"], g)  # (batch, T, U+1)
        words = tgt_in[:, 1:]  # y_{u+1}, the word that leaves row u (batch, U)
        log_emit = (  # log y(t, u) = log Pr(y_{u+1} | t, u), eq. (12)
            memory["f"].gather(2, words[:, None].expand(-1, log_norm.size(1), -1))
            + g[:, :-1].gather(2, words[..., None]).squeeze(-1)[:, None]
            - log_norm[:, :, :-1]
        )
        return g, log_norm, self._null(memory, g, log_norm), log_emit

    def log_likelihood(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_lens: Tensor) -> Tensor:
        """ln Pr(y | x) = ln α(T, U) ∅(T, U) (eq. 17) per sentence (batch,), the lattice's dtype; tgt_lens = U."""
        memory = self.encode(src, src_mask)
        _, _, log_null, log_emit = self._lattice(memory, tgt_in)
        return end_of(forward_rows(log_emit, log_null, src_mask), log_null, memory["last"][:, 0], tgt_lens)

    def alignment(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_lens: Tensor) -> Tensor:
        """The posterior of the source position at which each target word was emitted given the whole output,
        α(t, u) y(t, u) β(t, u+1) / Pr(y | x): (batch, U, T), rows past a sentence's tgt_lens zero.

        It is ∂ ln Pr(y | x) / ∂ ln y(t, u) (Graves 2012, §2.4): autograd's backward pass computes the β."""
        with torch.no_grad():
            memory = self.encode(src, src_mask)
            _, _, log_null, log_emit = self._lattice(memory, tgt_in)
        if not log_emit.numel():
            return log_emit.to(self.to_g.weight.dtype).transpose(1, 2)
        with torch.enable_grad():
            log_emit.requires_grad_()
            log_p = end_of(forward_rows(log_emit, log_null, src_mask), log_null, memory["last"][:, 0], tgt_lens)
            (posterior,) = torch.autograd.grad(log_p.sum(), log_emit)  # (batch, T, U)
        return posterior.transpose(1, 2).to(self.to_g.weight.dtype)

    def init_state(self, memory: Memory) -> State:
        batch, src_len, _ = memory["f"].shape
        hidden = self.predictor.hidden_size
        return {
            "h": memory["f"].new_zeros(batch, hidden, dtype=self.to_g.weight.dtype),  # prediction network
            "w": memory["f"].new_zeros(batch, src_len),  # log α̃(t, u-1) - log N(t, u-1)
            "step": torch.zeros(batch, dtype=torch.long, device=memory["f"].device),
        }

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev_tokens = y_u (<s> first): emit it from row u-1, advance the prediction network, then move the
        row along t with ∅(·, u). The state keeps the row normalised by the prefix's probability."""
        f = memory["f"]
        # log α̃(t, u-1) y(t, u-1) up to g_{u-1}^{y_u}, a constant along t that the normalisation below cancels
        emitted = state["w"] + f.gather(2, prev_tokens[:, None, None].expand(-1, f.size(1), 1)).squeeze(2)
        entry = torch.where((state["step"] == 0)[:, None], start_row(emitted), emitted)
        h = self.predictor(self.tgt_embed(prev_tokens)[:, None], state["h"][None])[1][0]  # (batch, H)
        g = self.to_g(h).to(f.dtype)[:, None]  # (batch, 1, V)
        log_norm = log_normaliser(f, memory["f_exp"], memory["f_max"], g)  # (batch, T, 1)
        log_null = self._null(memory, g, log_norm)
        log_alpha = propagate(entry, log_null[:, :, 0], memory["src_mask"])[:, :, None]
        scores = self._next_token_scores(memory, log_alpha, g, log_norm, log_null)[:, 0]  # (batch, V)
        log_z = torch.logsumexp(scores, -1, keepdim=True)  # the prefix's probability, relative to the last row's
        w = (log_alpha - log_norm)[:, :, 0] - log_z
        state = {"h": h, "w": w, "step": state["step"] + 1}
        return (scores - log_z).to(h.dtype), state, self._cursor(log_alpha[:, :, 0], log_null[:, :, 0], memory)

    def _cursor(self, log_alpha: Tensor, log_null: Tensor, memory: Memory) -> Tensor:
        """Where the source cursor stands when the next token is emitted, given the prefix (batch, T): α(t, u)
        (1 - ∅(t, u)), and α(T, u) ∅(T, u) at the last word for </s>; the alignment figures replace it with the
        posterior given the whole output (`alignment`)."""
        mass = log_alpha + torch.log1p(-torch.exp(log_null).clamp_max(1.0 - 1e-12))
        end = log_alpha.gather(1, memory["last"]) + log_null.gather(1, memory["last"])
        mass = mass.scatter(1, memory["last"], torch.logaddexp(mass.gather(1, memory["last"]), end))
        return torch.softmax(mass.masked_fill(~memory["src_mask"], float("-inf")), -1).to(self.to_g.weight.dtype)
