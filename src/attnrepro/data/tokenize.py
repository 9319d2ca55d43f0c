"""Tokenizers: a word shortlist (top-k words + UNK, as the 2014 papers used), optionally after
Moses tokenization, or sentencepiece (Vaswani et al. 2017's shared subword vocabularies).

All share the special ids <pad>=0, <unk>=1, <s>=2, </s>=3, and all are saved as one file
per language (`src.model`, `tgt.model`; identical files when the vocabulary is shared).
`decode` always returns plain text: sentencepiece detokenizes itself, and the Moses word
path is Moses-detokenized, so sacreBLEU scores hypotheses against the raw reference. A word
vocabulary writes an unknown word as `UNK_WORD` ("UNK"), one alphanumeric token: "<unk>" would
be split into "<", "unk", ">" by both sacreBLEU's 13a and the Moses tokenizer, and one unknown
word would count as three tokens in every BLEU.

Large corpora are streamed: `encode_corpus` writes ids to disk in chunks and assembles the
.npz without holding a corpus in memory (ids as uint16 when the vocabulary fits, else int32).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from attnrepro.config import TokenizerConfig

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
UNK_WORD = "UNK"  # how decoded text writes <unk>: one token for 13a and Moses alike (see the module docstring)
CHUNK_LINES = 10_000  # lines encoded between writes to disk


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
        with open(path, encoding="utf-8", newline="\n") as f:
            return cls([line.rstrip("\n") for line in f])

    def encode(self, line: str) -> list[int]:
        return [self.index.get(w, UNK) for w in line.split()]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.words[i] for i in ids]

    def words_of(self, ids: Iterable[int]) -> list[str]:
        """The words of `ids` without <pad>, <s>, </s>; <unk> is kept as the one token `UNK_WORD`."""
        return [UNK_WORD if i == UNK else self.words[i] for i in ids if i >= len(SPECIALS) or i == UNK]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.words_of(ids))

    def __len__(self) -> int:
        return len(self.words)


class MosesWordVocab:
    """Moses tokenization (sacremoses, `tokenizer.perl -l LANG` without escaping), then a word
    shortlist, as the 2014 papers' pipelines did; `decode` Moses-detokenizes to plain text."""

    def __init__(self, vocab: WordVocab, lang: str):
        from sacremoses import MosesDetokenizer, MosesTokenizer

        self.vocab = vocab
        self.lang = lang
        self.moses = MosesTokenizer(lang)
        self.detokenizer = MosesDetokenizer(lang)

    def tokenize(self, line: str) -> list[str]:
        return self.moses.tokenize(line, escape=False)

    def encode(self, line: str) -> list[int]:
        return [self.vocab.index.get(w, UNK) for w in self.tokenize(line)]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return self.vocab.pieces(ids)

    def decode(self, ids: Iterable[int]) -> str:
        return self.detokenizer.detokenize(self.vocab.words_of(ids))

    def __len__(self) -> int:
        return len(self.vocab)


class SentencePiece:
    def __init__(self, path: Path):
        import sentencepiece as spm

        self.processor = spm.SentencePieceProcessor(model_file=str(path))

    @staticmethod
    def train(inputs: list[Path], path: Path, cfg: TokenizerConfig, vocab_size: int, threads: int = 1) -> None:
        import sentencepiece as spm

        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            prefix = Path(tmp) / "spm"
            spm.SentencePieceTrainer.train(
                input=",".join(str(p) for p in inputs),
                model_prefix=str(prefix),
                vocab_size=vocab_size,
                model_type=cfg.spm_model_type,
                pad_id=PAD,
                unk_id=UNK,
                bos_id=BOS,
                eos_id=EOS,
                input_sentence_size=cfg.spm_sample_sentences,  # a sample keeps memory bounded
                shuffle_input_sentence=True,
                hard_vocab_limit=False,  # tiny corpora may not support vocab_size pieces
                character_coverage=1.0,
                num_threads=threads,
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


def train_tokenizers(
    cfg: TokenizerConfig,
    src_text: Path,
    tgt_text: Path,
    out_dir: Path,
    languages: tuple[str, str] = ("en", "en"),
    threads: int = 1,
) -> None:
    """Write `out_dir/src.model` and `out_dir/tgt.model` from the training text (streamed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sides = {"src": [src_text], "tgt": [tgt_text]}
    if cfg.shared:
        sides = {"src": [src_text, tgt_text], "tgt": [src_text, tgt_text]}
    langs = dict(zip(("src", "tgt"), languages))
    for side, inputs in sides.items():
        path = out_dir / f"{side}.model"
        if cfg.shared and side == "tgt":
            shutil.copyfile(out_dir / "src.model", path)  # one vocabulary, trained once
        elif cfg.kind == "spm":
            SentencePiece.train(inputs, path, cfg, cfg.side_vocab_size(side), threads)
        elif cfg.pretokenize == "moses":
            lines = _moses_lines(inputs, languages if cfg.shared else (langs[side],))
            WordVocab.build(lines, cfg.side_vocab_size(side)).save(path)
        else:
            WordVocab.build(_lines(inputs), cfg.side_vocab_size(side)).save(path)


def load_tokenizer(cfg: TokenizerConfig, path: Path, lang: str = "en") -> Tokenizer:
    """The tokenizer saved at `path`; `lang` picks the Moses rules of its side."""
    if cfg.kind == "spm":
        return SentencePiece(path)
    vocab = WordVocab.load(path)
    return MosesWordVocab(vocab, lang) if cfg.pretokenize == "moses" else vocab


def load_tokenizer_pair(
    cfg: TokenizerConfig, folder: Path, languages: tuple[str, str] = ("en", "en")
) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers saved in `folder` (src.model, tgt.model), each with its language's rules."""
    src_lang, tgt_lang = languages
    return load_tokenizer(cfg, folder / "src.model", src_lang), load_tokenizer(cfg, folder / "tgt.model", tgt_lang)


def _lines(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        with open(path, encoding="utf-8", newline="\n") as f:
            yield from f


def _moses_lines(paths: list[Path], langs: tuple[str, ...]) -> Iterator[str]:
    """Moses-tokenized lines of each file, file i with the rules of langs[i] (or the only one)."""
    from sacremoses import MosesTokenizer

    for i, path in enumerate(paths):
        moses = MosesTokenizer(langs[min(i, len(langs) - 1)])
        for line in _lines([path]):
            yield " ".join(moses.tokenize(line.rstrip("\n"), escape=False))


def encode_lines(tokenizer: Tokenizer, lines: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids (int32) and offsets (int64, len n+1): sentence i is ids[offsets[i]:offsets[i+1]]."""
    ids: list[int] = []
    offsets = [0]
    for line in lines:
        ids.extend(tokenizer.encode(line.rstrip("\n")))
        offsets.append(len(ids))
    return np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64)


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest dtype holding every id: uint16 up to 65 536 entries (halves a 36 M-pair corpus)."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.int32)


def encode_corpus(src_tok: Tokenizer, tgt_tok: Tokenizer, src_text: Path, tgt_text: Path, out: Path) -> int:
    """Encode a parallel corpus into one .npz (src_ids, src_offsets, tgt_ids, tgt_offsets), streaming:
    ids go to temporary files a chunk of lines at a time, then into the archive. Returns the pair count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        parts = {name: Path(tmp) / name for name in ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")}
        dtypes = {"src_ids": id_dtype(len(src_tok)), "tgt_ids": id_dtype(len(tgt_tok))}
        files = {name: open(path, "wb") for name, path in parts.items()}
        try:
            counts = {"src_ids": 0, "tgt_ids": 0}
            for f in (files["src_offsets"], files["tgt_offsets"]):
                np.zeros(1, dtype=np.int64).tofile(f)
            n = 0
            for chunk in _paired_chunks(src_text, tgt_text):
                for side, tok, lines in (("src", src_tok, chunk[0]), ("tgt", tgt_tok, chunk[1])):
                    dtype = dtypes[f"{side}_ids"]
                    ids, lengths = array(dtype.char), array("q")  # compact buffers, not lists of ints
                    for line in lines:
                        encoded = tok.encode(line)
                        ids.extend(encoded)
                        lengths.append(len(encoded))
                    np.frombuffer(ids, dtype=dtype).tofile(files[f"{side}_ids"])
                    (counts[f"{side}_ids"] + np.cumsum(np.frombuffer(lengths, dtype=np.int64))).tofile(
                        files[f"{side}_offsets"]
                    )
                    counts[f"{side}_ids"] += len(ids)
                n += len(chunk[0])
        finally:
            for f in files.values():
                f.close()
        lengths = {**counts, "src_offsets": n + 1, "tgt_offsets": n + 1}
        tmp_out = Path(tmp) / "out.npz"
        with zipfile.ZipFile(tmp_out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, path in parts.items():
                dtype = dtypes.get(name, np.dtype(np.int64))
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member, open(path, "rb") as raw:
                    _write_npy(member, raw, dtype, lengths[name])
        os.replace(tmp_out, out)
    return n


def _paired_chunks(src_text: Path, tgt_text: Path) -> Iterator[tuple[list[str], list[str]]]:
    """Lines of both files, CHUNK_LINES at a time; a line-count mismatch raises naming both files."""
    with open(src_text, encoding="utf-8", newline="\n") as src, open(tgt_text, encoding="utf-8", newline="\n") as tgt:
        n = 0
        while True:
            src_lines = [line.rstrip("\n") for _, line in zip(range(CHUNK_LINES), src)]
            tgt_lines = [line.rstrip("\n") for _, line in zip(range(CHUNK_LINES), tgt)]
            if len(src_lines) != len(tgt_lines):
                n_src = n + len(src_lines) + sum(1 for _ in src)
                n_tgt = n + len(tgt_lines) + sum(1 for _ in tgt)
                raise ValueError(f"{src_text} has {n_src} lines but {tgt_text} has {n_tgt}")
            if not src_lines:
                return
            n += len(src_lines)
            yield src_lines, tgt_lines


def _write_npy(member: BinaryIO, raw: BinaryIO, dtype: np.dtype, length: int) -> None:
    """A 1-D .npy of `length` items whose data are the bytes of `raw`, copied in 1 MiB blocks."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
    np.lib.format.write_array_header_1_0(member, header)
    shutil.copyfileobj(raw, member, 2**20)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
