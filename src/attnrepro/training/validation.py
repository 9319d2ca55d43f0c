"""What the training loop measures: cross-entropy per target token, on training batches and on
the validation set, and the validation set's BLEU under beam search."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import torch
from torch import nn

from attnrepro.config import SearchConfig
from attnrepro.data.batching import Corpus, collate, pad, sentence_batches, token_batches
from attnrepro.data.tokenize import PAD, Tokenizer
from attnrepro.decoding.search import beam_search
from attnrepro.evaluation.scoring import corpus_bleu
from attnrepro.models.base import Seq2SeqModel


def loss_fn(logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Mean cross-entropy per real target token."""
    return nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


@torch.no_grad()
def valid_loss(
    model: Seq2SeqModel,
    corpus: Corpus,
    batch_tokens: int,
    device: torch.device | None = None,
    autocast: contextlib.AbstractContextManager | None = None,
) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for indices in token_batches(corpus.src_lens, corpus.tgt_lens, batch_tokens, seed=0):
        batch = collate(corpus, indices).to(device or torch.device("cpu"))
        with autocast or contextlib.nullcontext():
            logits = model(batch.src, batch.src_mask, batch.tgt_in)
        n = batch.n_tgt_tokens
        total += float(loss_fn(logits, batch.tgt_out, 0.0)) * n
        tokens += n
    model.train()
    return total / max(tokens, 1)


class ValidBleu:
    """sacreBLEU of the beam-search translations of the validation set.

    The references are the validation targets decoded from their ids (lossless for
    sentencepiece; word vocabularies show their <unk>). Beam search runs on the CPU
    (attnrepro.decoding.search is CPU-only), on a copy of the model when it trains on a GPU.
    """

    def __init__(self, corpus: Corpus, tgt_tok: Tokenizer, sc: SearchConfig):
        self.corpus, self.tgt_tok, self.sc = corpus, tgt_tok, sc
        self.references = [tgt_tok.decode(corpus.tgt(i).tolist()) for i in range(len(corpus))]

    def __call__(self, model: Seq2SeqModel) -> float:
        cpu_model = model if next(model.parameters()).device.type == "cpu" else copy.deepcopy(model).cpu()
        src_lens = self.corpus.src_lens
        hypotheses = [""] * len(self.corpus)
        for indices in sentence_batches(src_lens, self.sc.batch_size):
            indices = [i for i in indices if src_lens[i] > 0]
            if not indices:
                continue
            src = pad([self.corpus.src(i) for i in indices])
            max_lens = torch.from_numpy(
                np.floor(self.sc.max_len_a * src_lens[indices] + self.sc.max_len_b).astype(np.int64) + 1
            )
            for i, hyp in zip(
                indices, beam_search(cpu_model, src, src != PAD, self.sc.beam, max_lens, self.sc.length_penalty)
            ):
                hypotheses[i] = self.tgt_tok.decode(hyp.tokens)
        model.train()
        return corpus_bleu(hypotheses, self.references)[0]
