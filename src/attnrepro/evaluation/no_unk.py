"""Bahdanau et al. 2014, Table 1's "No UNK" column: which test sentences it scores, and their
translations by a search that never emits UNK (the table's note: UNK generation disallowed).

The subset exists only for word vocabularies. `attnrepro translate` writes its translations to
`hyp_no_unk.txt` (one line per subset sentence, in test order) and `attnrepro score` scores them.
The second search is skipped when the main translations are its answer (`main_search_serves_no_unk`):
both commands decide that by the same rule on the same text, and `score` records which happened.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attnrepro.data.tokenize import UNK, UNK_WORD, Tokenizer

if TYPE_CHECKING:  # the search (torch) is imported only where a banned search runs: scoring stays torch-free
    import torch

    from attnrepro.config import SearchConfig
    from attnrepro.models.base import Seq2SeqModel

NO_UNK_DEFINITION = (
    "test sentences whose source and reference contain no word outside the model's source and target "
    "vocabularies (Bahdanau et al. 2014, Table 1: 'No UNK')"
)
NO_UNK_BANNED = "ban_unk search of the subset"
NO_UNK_MAIN = "main search: whole test set, no UNK emitted"
NO_UNK_SUBWORD = "does not apply: a subword vocabulary (sentencepiece) spells every word, so there is no UNK subset"
_UNK_WORD_RE = re.compile(rf"(?<!\w){re.escape(UNK_WORD)}(?!\w)")


def has_no_unknown_word(tokenizer: Tokenizer, line: str) -> bool:
    """True when every word of `line` is in the tokenizer's word vocabulary (ids never hit <unk>)."""
    return UNK not in tokenizer.encode(line)


def no_unk_mask(
    sources: Sequence[str], references: Sequence[str], src_tok: Tokenizer, tgt_tok: Tokenizer
) -> list[bool]:
    """Per sentence: neither the source nor the reference has an unknown word (our reading of "No UNK")."""
    return [has_no_unknown_word(src_tok, s) and has_no_unknown_word(tgt_tok, r) for s, r in zip(sources, references)]


def main_search_serves_no_unk(keep: Sequence[bool], translations: Sequence[str]) -> bool:
    """True when the main translations stand for the banned search's: the subset is the whole test set and
    no translation wrote UNK_WORD. (Exact for beam 1; with a wider beam the two could differ only if a
    partial hypothesis with UNK, pruned later, had displaced one that the banned search would keep.)"""
    return all(keep) and not any(_UNK_WORD_RE.search(t) for t in translations)


def no_unk_translations(
    model: Seq2SeqModel,
    tokenizers: tuple[Tokenizer, Tokenizer],
    search: SearchConfig,
    texts: tuple[list[str], list[str], list[str]],
    device: torch.device | None = None,
    precision: str = "fp32",
) -> tuple[list[str], str]:
    """The No UNK subset's translations and how they were decoded (NO_UNK_BANNED or NO_UNK_MAIN);
    `texts`: the test sources, their references and the main search's translations."""
    from attnrepro.decoding.search import translate_lines

    sources, references, translations = texts
    src_tok, tgt_tok = tokenizers
    keep = no_unk_mask(sources, references, src_tok, tgt_tok)
    if main_search_serves_no_unk(keep, translations):
        return translations, NO_UNK_MAIN
    subset = [line for line, k in zip(sources, keep) if k]
    banned = translate_lines(model, src_tok, tgt_tok, subset, search, device=device, precision=precision, ban_unk=True)
    return [tgt_tok.decode(h.tokens) for h in banned], NO_UNK_BANNED


def write_no_unk_translations(
    out: Path,
    model: Seq2SeqModel,
    tokenizers: tuple[Tokenizer, Tokenizer],
    search: SearchConfig,
    texts: tuple[list[str], list[str], list[str]] | None,
    device: torch.device | None = None,
    precision: str = "fp32",
) -> str:
    """Write hyp_no_unk.txt (see `no_unk_translations`; empty when `texts` is None: a subword vocabulary
    has no No UNK subset) and say what was written."""
    if texts is None:
        out.write_text("", encoding="utf-8")
        return f"{out}: empty: a subword vocabulary has no No UNK subset"
    subset, how = no_unk_translations(model, tokenizers, search, texts, device, precision)
    out.write_text("".join(text + "\n" for text in subset), encoding="utf-8")
    return f"{out}: {len(subset)} translations of the No UNK subset ({how})"
