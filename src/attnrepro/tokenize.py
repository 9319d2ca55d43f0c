"""Tokenizers: a word shortlist (top-k words + UNK, as the 2014 papers used) or sentencepiece.

Both share the special ids <pad>=0, <unk>=1, <s>=2, </s>=3, and both are saved as one file
per language (`src.model`, `tgt.model`; identical files when the vocabulary is shared).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import numpy as np

from attnrepro.config import TokenizerConfig

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


class Tokenizer(Protocol):
    def encode(self, line: str) -> list[int]: ...
    def decode(self, ids: Iterable[int]) -> str: ...
    def pieces(self, ids: Iterable[int]) -> list[str]: ...
    def __len__(self) -> int: ...


class WordVocab:
    """Whitespace words; the `vocab_size` most frequent are kept, the rest map to <unk>."""

    def __init__(self, words: list[str]):
        if tuple(words[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a word vocabulary starts with {SPECIALS}, got {words[:4]}")
        self.words = words
        self.index = {w: i for i, w in enumerate(words)}

    @classmethod
    def build(cls, lines: Iterable[str], vocab_size: int) -> WordVocab:
        counts = Counter(word for line in lines for word in line.split())
        # Most frequent first; ties broken alphabetically so the vocabulary is deterministic.
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + [w for w in ranked if w not in SPECIALS][:vocab_size])

    def save(self, path: Path) -> None:
        _atomic_write_text(path, "".join(w + "\n" for w in self.words))

    @classmethod
    def load(cls, path: Path) -> WordVocab:
        return cls(Path(path).read_text(encoding="utf-8").splitlines())

    def encode(self, line: str) -> list[int]:
        return [self.index.get(w, UNK) for w in line.split()]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.words[i] for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.words[i] for i in ids if i >= len(SPECIALS) or i == UNK)

    def __len__(self) -> int:
        return len(self.words)


class SentencePiece:
    def __init__(self, path: Path):
        import sentencepiece as spm

        self.processor = spm.SentencePieceProcessor(model_file=str(path))

    @staticmethod
    def train(inputs: list[Path], path: Path, cfg: TokenizerConfig) -> None:
        import sentencepiece as spm

        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            prefix = Path(tmp) / "spm"
            spm.SentencePieceTrainer.train(
                input=",".join(str(p) for p in inputs),
                model_prefix=str(prefix),
                vocab_size=cfg.vocab_size,
                model_type=cfg.spm_model_type,
                pad_id=PAD,
                unk_id=UNK,
                bos_id=BOS,
                eos_id=EOS,
                input_sentence_size=cfg.spm_sample_sentences,  # a sample keeps memory bounded
                shuffle_input_sentence=True,
                hard_vocab_limit=False,  # tiny corpora may not support vocab_size pieces
                character_coverage=1.0,
                num_threads=1,
                minloglevel=2,
            )
            os.replace(f"{prefix}.model", path)

    def encode(self, line: str) -> list[int]:
        return self.processor.encode(line)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.processor.id_to_piece(i) for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        return self.processor.decode(list(ids))

    def __len__(self) -> int:
        return self.processor.get_piece_size()


def train_tokenizers(cfg: TokenizerConfig, src_text: Path, tgt_text: Path, out_dir: Path) -> None:
    """Write `out_dir/src.model` and `out_dir/tgt.model` from the training text."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sides = {"src": [src_text], "tgt": [tgt_text]}
    if cfg.shared:
        sides = {"src": [src_text, tgt_text], "tgt": [src_text, tgt_text]}
    for side, inputs in sides.items():
        path = out_dir / f"{side}.model"
        if cfg.kind == "spm":
            SentencePiece.train(inputs, path, cfg)
        else:
            WordVocab.build(_lines(inputs), cfg.vocab_size).save(path)


def load_tokenizer(cfg: TokenizerConfig, path: Path) -> Tokenizer:
    return SentencePiece(path) if cfg.kind == "spm" else WordVocab.load(path)


def _lines(paths: list[Path]) -> Iterable[str]:
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from f


def encode_lines(tokenizer: Tokenizer, lines: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids (int32) and offsets (int64, len n+1): sentence i is ids[offsets[i]:offsets[i+1]]."""
    ids: list[int] = []
    offsets = [0]
    for line in lines:
        ids.extend(tokenizer.encode(line.rstrip("\n")))
        offsets.append(len(ids))
    return np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64)


def encode_corpus(src_tok: Tokenizer, tgt_tok: Tokenizer, src_text: Path, tgt_text: Path, out: Path) -> int:
    """Encode a parallel corpus into one .npz; returns the number of sentence pairs."""
    src_ids, src_offsets = encode_lines(src_tok, _lines([src_text]))
    tgt_ids, tgt_offsets = encode_lines(tgt_tok, _lines([tgt_text]))
    if len(src_offsets) != len(tgt_offsets):
        raise ValueError(f"{src_text} has {len(src_offsets) - 1} lines but {tgt_text} has {len(tgt_offsets) - 1}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez(tmp, src_ids=src_ids, src_offsets=src_offsets, tgt_ids=tgt_ids, tgt_offsets=tgt_offsets)
    os.replace(tmp, out)
    return len(src_offsets) - 1


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
