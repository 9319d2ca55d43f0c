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
Counting a word vocabulary and encoding run over chunks of `CHUNK_LINES` lines in `processes`
worker processes (`attnrepro.data.parallel`); the files are byte-identical whatever their number.
Text is read by `attnrepro.data.text`: a line that is not UTF-8 stops with its file and line.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import zipfile
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, TypeVar

import numpy as np

from attnrepro.config import TokenizerConfig
from attnrepro.data.parallel import ordered_map
from attnrepro.data.text import check_parallel, decode_line, iter_lines, raw_lines, raw_pairs, read_lines
from attnrepro.errors import DataError

if TYPE_CHECKING:
    from sacremoses import MosesTokenizer

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
UNK_WORD = "UNK"  # how decoded text writes <unk>: one token for 13a and Moses alike (see the module docstring)
CHUNK_LINES = 10_000  # lines a worker process counts or encodes at a time, and between writes to disk
PRELOAD = (__name__, "sacremoses")  # imported once by the process that forks the workers
Item = TypeVar("Item")


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
        return cls.from_counts(Counter(word for line in lines for word in line.split()), vocab_size)

    @classmethod
    def from_counts(cls, counts: Counter[str], vocab_size: int) -> WordVocab:
        # Most frequent first; ties broken alphabetically so the vocabulary is deterministic.
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + [w for w in ranked if w not in SPECIALS][:vocab_size])

    def save(self, path: Path) -> None:
        _atomic_write_text(path, "".join(w + "\n" for w in self.words))

    @classmethod
    def load(cls, path: Path) -> WordVocab:
        words = read_lines(path)
        if tuple(words[: len(SPECIALS)]) != SPECIALS:
            raise DataError(f"{path}: not a word vocabulary (its first lines are not {' '.join(SPECIALS)})")
        return cls(words)

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
        return moses_words(self.moses, line)

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
        """Train on the lines of `inputs`, read by `attnrepro.data.text` (a bad line stops naming it)."""
        import sentencepiece as spm

        sentences = _Sentences(inputs)
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model,
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
        except RuntimeError:
            sentences.raise_read_error()  # sentencepiece reports our DataError as a RuntimeError of its own
            raise
        _atomic_write_bytes(path, model.getvalue())

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
    """Write `out_dir/src.model` and `out_dir/tgt.model` from the training text (streamed): sentencepiece
    on `threads` threads, or word vocabularies counted in `threads` processes."""
    check_parallel(src_text, tgt_text)
    out_dir.mkdir(parents=True, exist_ok=True)
    src_path, tgt_path = out_dir / "src.model", out_dir / "tgt.model"
    if cfg.kind == "spm" and cfg.shared:
        SentencePiece.train([src_text, tgt_text], src_path, cfg, cfg.vocab_size, threads)
    elif cfg.kind == "spm":
        SentencePiece.train([src_text], src_path, cfg, cfg.side_vocab_size("src"), threads)
        SentencePiece.train([tgt_text], tgt_path, cfg, cfg.side_vocab_size("tgt"), threads)
    else:
        moses = languages if cfg.pretokenize == "moses" else None
        src_counts, tgt_counts = count_words([src_text, tgt_text], moses, threads)
        if cfg.shared:
            src_counts = src_counts + tgt_counts
        WordVocab.from_counts(src_counts, cfg.side_vocab_size("src")).save(src_path)
        if not cfg.shared:
            WordVocab.from_counts(tgt_counts, cfg.side_vocab_size("tgt")).save(tgt_path)
    if cfg.shared:
        shutil.copyfile(src_path, tgt_path)  # one vocabulary, trained once


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


def moses_words(moses: MosesTokenizer, line: str) -> list[str]:
    """Moses' `tokenizer.perl -l LANG` without escaping (sacremoses)."""
    return moses.tokenize(line, escape=False)


def count_words(paths: list[Path], moses: tuple[str, ...] | None, processes: int = 1) -> list[Counter[str]]:
    """How often each word occurs in each of `paths`: whitespace words, or with `moses` the Moses tokens
    of file i under the rules of language moses[i]. Chunks of every file are counted in one pool."""
    chunks = ((i, path, first, lines) for i, path in enumerate(paths) for first, lines in _chunks(raw_lines(path)))
    counts: list[Counter[str]] = [Counter() for _ in paths]
    for i, chunk_counts in ordered_map(_WordCounter(moses), chunks, processes, PRELOAD):
        counts[i].update(chunk_counts)  # a sum: the same counts in any grouping
    return counts


class _WordCounter:
    """The word counts of one chunk of a file (a picklable worker for `ordered_map`)."""

    def __init__(self, moses_langs: tuple[str, ...] | None):
        from sacremoses import MosesTokenizer

        self.moses = [MosesTokenizer(lang) for lang in moses_langs] if moses_langs else None

    def __call__(self, chunk: tuple[int, Path, int, list[bytes]]) -> tuple[int, Counter[str]]:
        file_index, path, first, lines = chunk
        counts: Counter[str] = Counter()
        for lineno, raw in enumerate(lines, start=first):
            line = decode_line(raw, path, lineno)
            counts.update(line.split() if self.moses is None else moses_words(self.moses[file_index], line))
        return file_index, counts


class _Sentences:
    """The lines of `paths` for sentencepiece's trainer, keeping the DataError that stopped them."""

    def __init__(self, paths: list[Path]):
        self.paths = paths
        self.error: DataError | None = None
        self.nonempty = 0

    def __iter__(self) -> Iterator[str]:
        try:
            for line in chain.from_iterable(iter_lines(path) for path in self.paths):
                self.nonempty += bool(line)
                yield line
        except DataError as err:
            self.error = err
            raise

    def raise_read_error(self) -> None:
        if self.error is not None:
            raise self.error from None
        if self.nonempty == 0:
            raise DataError(f"{', '.join(map(str, self.paths))}: no text to train sentencepiece on")


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


ARRAYS = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")
TOKENIZER_FILES = ("src.model", "tgt.model")  # a tokenizer's files; their sha256 name it (tokenizer_fingerprint)
# The .npz member that says which tokenizer encoded it: its files' sha256 (not the folder: the bytes stay the same
# wherever the tokenizer lies, and the run fingerprint hashes them)
STAMP = "tokenizer"


def tokenizer_differences(saved: dict[str, str] | None, now: dict[str, str]) -> list[str]:
    """The tokenizer files whose sha256 in a recorded fingerprint (`saved`) differ from `now`'s; none when
    nothing was recorded (a file written before fingerprints)."""
    return [name for name in TOKENIZER_FILES if saved and saved.get(name) != now[name]]


def encode_corpus(
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    src_text: Path,
    tgt_text: Path,
    out: Path,
    processes: int = 1,
    tokenizer: dict[str, str] | None = None,
) -> int:
    """Encode a parallel corpus into one .npz (src_ids, src_offsets, tgt_ids, tgt_offsets), streaming:
    chunks of lines are encoded in `processes` processes, their ids appended in order to temporary
    files, then copied into the archive. `tokenizer` (`checkpoint.tokenizer_fingerprint` of the folder the
    tokenizers came from) is stored beside them as `tokenizer`, so that a reader given another tokenizer of
    the same sizes can tell (`Corpus.load`). Returns the pair count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        parts = {name: Path(tmp) / name for name in ARRAYS}
        dtypes = {"src_ids": id_dtype(len(src_tok)), "tgt_ids": id_dtype(len(tgt_tok))}
        lengths = {"src_ids": 0, "tgt_ids": 0, "src_offsets": 1, "tgt_offsets": 1}
        files = {name: open(path, "wb") for name, path in parts.items()}
        try:
            for f in (files["src_offsets"], files["tgt_offsets"]):
                np.zeros(1, dtype=np.int64).tofile(f)
            encoder = _PairEncoder(src_tok, tgt_tok, src_text, tgt_text)
            for encoded in ordered_map(encoder, _chunks(raw_pairs(src_text, tgt_text)), processes, PRELOAD):
                for side, (ids, sentence_lengths) in zip(("src", "tgt"), encoded):
                    ids.tofile(files[f"{side}_ids"])
                    (lengths[f"{side}_ids"] + np.cumsum(sentence_lengths)).tofile(files[f"{side}_offsets"])
                    lengths[f"{side}_ids"] += len(ids)
                    lengths[f"{side}_offsets"] += len(sentence_lengths)
        finally:
            for f in files.values():
                f.close()
        tmp_out = Path(tmp) / "out.npz"
        with zipfile.ZipFile(tmp_out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, path in parts.items():
                dtype = dtypes.get(name, np.dtype(np.int64))
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member, open(path, "rb") as raw:
                    _write_npy(member, raw, dtype, lengths[name])
            if tokenizer is not None:
                with archive.open(f"{STAMP}.npy", "w") as member:
                    np.lib.format.write_array(member, np.array([tokenizer[k] for k in TOKENIZER_FILES]))
        os.replace(tmp_out, out)
    return lengths["src_offsets"] - 1


@dataclass(frozen=True)
class _PairEncoder:
    """The ids and sentence lengths of both sides of one chunk of pairs (a picklable worker for `ordered_map`)."""

    src_tok: Tokenizer
    tgt_tok: Tokenizer
    src_text: Path
    tgt_text: Path

    def __call__(self, chunk: tuple[int, list[tuple[bytes, bytes]]]) -> list[tuple[np.ndarray, np.ndarray]]:
        first, pairs = chunk
        texts = [
            (decode_line(src, self.src_text, lineno), decode_line(tgt, self.tgt_text, lineno))
            for lineno, (src, tgt) in enumerate(pairs, start=first)
        ]
        encoded = []
        for side, tok in enumerate((self.src_tok, self.tgt_tok)):
            dtype = id_dtype(len(tok))
            ids, lengths = array(dtype.char), array("q")  # compact buffers, not lists of ints
            for pair in texts:
                sentence = tok.encode(pair[side])
                ids.extend(sentence)
                lengths.append(len(sentence))
            encoded.append((np.frombuffer(ids, dtype=dtype), np.frombuffer(lengths, dtype=np.int64)))
        return encoded


def _chunks(items: Iterable[Item]) -> Iterator[tuple[int, list[Item]]]:
    """(line number of the first item, the next CHUNK_LINES items) until `items` ends."""
    iterator, first = iter(items), 1
    while chunk := list(islice(iterator, CHUNK_LINES)):
        yield first, chunk
        first += len(chunk)


def _write_npy(member: BinaryIO, raw: BinaryIO, dtype: np.dtype, length: int) -> None:
    """A 1-D .npy of `length` items whose data are the bytes of `raw`, copied in 1 MiB blocks."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
    np.lib.format.write_array_header_1_0(member, header)
    shutil.copyfileobj(raw, member, 2**20)


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write_bytes(path, text.encode("utf-8"))


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
