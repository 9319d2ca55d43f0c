"""Word shortlists and sentencepiece, sharing the special ids."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from attnrepro.config import ConfigError, TokenizerConfig, from_dict
from attnrepro.data.tokenize import (
    BOS,
    EOS,
    PAD,
    SPECIALS,
    UNK,
    MosesWordVocab,
    SentencePiece,
    WordVocab,
    encode_corpus,
    encode_lines,
    id_dtype,
    load_tokenizer,
    load_tokenizer_pair,
    train_tokenizers,
)
from attnrepro.errors import DataError

from conftest import REPO


def test_word_vocab_keeps_the_top_k_and_maps_the_rest_to_unk(tmp_path):
    vocab = WordVocab.build(["a a a b b c", "a b d"], vocab_size=2)
    assert vocab.words == ["<pad>", "<unk>", "<s>", "</s>", "a", "b"]
    assert vocab.encode("a c b zz") == [4, UNK, 5, UNK]
    assert vocab.decode([4, UNK, 5, EOS, PAD]) == "a UNK b"  # one token for 13a and Moses, unlike "<unk>"
    vocab.save(tmp_path / "v.model")
    assert WordVocab.load(tmp_path / "v.model").words == vocab.words


def test_ties_are_broken_alphabetically():
    assert WordVocab.build(["b a c"], vocab_size=3).words[4:] == ["a", "b", "c"]


def test_sentencepiece_round_trip_and_special_ids(tmp_path):
    text = tmp_path / "train.txt"
    text.write_text(
        "".join(f"the cat {w} sat on the mat number {i}\n" for i, w in enumerate(["red", "big", "old"] * 50))
    )
    cfg = TokenizerConfig(kind="spm", vocab_size=60)
    train_tokenizers(cfg, text, text, tmp_path / "tok")
    sp = load_tokenizer(cfg, tmp_path / "tok/src.model")
    assert isinstance(sp, SentencePiece)
    assert sp.pieces([PAD, UNK, BOS, EOS]) == ["<pad>", "<unk>", "<s>", "</s>"]
    ids = sp.encode("the old cat sat on the mat")
    assert min(ids) > EOS
    assert sp.decode(ids) == "the old cat sat on the mat"


def test_shared_vocabulary_writes_one_model_for_both_sides(tmp_path):
    (tmp_path / "s").write_text("a b c\n")
    (tmp_path / "t").write_text("x y z\n")
    train_tokenizers(
        TokenizerConfig(kind="word", vocab_size=10, shared=True), tmp_path / "s", tmp_path / "t", tmp_path / "tok"
    )
    assert (tmp_path / "tok/src.model").read_text() == (tmp_path / "tok/tgt.model").read_text()
    assert WordVocab.load(tmp_path / "tok/src.model").encode("a x") != [UNK, UNK]


def test_encode_corpus_offsets_and_line_count_check(tmp_path):
    vocab = WordVocab.build(["a b c"], 10)
    (tmp_path / "s").write_text("a b\nc\n")
    (tmp_path / "t").write_text("b\na c a\n")
    assert encode_corpus(vocab, vocab, tmp_path / "s", tmp_path / "t", tmp_path / "out/c.npz") == 2
    with np.load(tmp_path / "out/c.npz") as f:
        assert f["src_offsets"].tolist() == [0, 2, 3]
        assert f["tgt_ids"].tolist() == vocab.encode("b a c a")
    (tmp_path / "t").write_text("b\n")
    with pytest.raises(DataError, match=rf"^{tmp_path}/s:2: line 2 has no counterpart: {tmp_path}/t has only 1 line$"):
        encode_corpus(vocab, vocab, tmp_path / "s", tmp_path / "t", tmp_path / "c2.npz")
    assert not Path(tmp_path / "c2.npz").exists()


def test_encoding_streams_in_chunks_and_matches_encoding_all_at_once(tmp_path, monkeypatch):
    import attnrepro.data.tokenize as tokenize

    monkeypatch.setattr(tokenize, "CHUNK_LINES", 3)  # 7 lines: chunks of 3, 3, 1
    src = [f"a b {'c ' * i}".strip() for i in range(7)]
    tgt = [f"b {'a ' * (6 - i)}".strip() for i in range(7)]
    (tmp_path / "s").write_text("".join(line + "\n" for line in src))
    (tmp_path / "t").write_text("".join(line + "\n" for line in tgt))
    vocab = WordVocab.build(src + tgt, 10)
    assert encode_corpus(vocab, vocab, tmp_path / "s", tmp_path / "t", tmp_path / "c.npz") == 7
    ids, offsets = encode_lines(vocab, src)
    with np.load(tmp_path / "c.npz") as f:
        assert f["src_ids"].dtype == np.uint16 and f["src_offsets"].dtype == np.int64
        assert f["src_ids"].tolist() == ids.tolist() and f["src_offsets"].tolist() == offsets.tolist()
        assert f["tgt_offsets"].tolist() == encode_lines(vocab, tgt)[1].tolist()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # temporary files gone


def test_ids_past_uint16_are_stored_as_int32(tmp_path):
    assert id_dtype(65536) == np.uint16 and id_dtype(65537) == np.int32
    words = [f"w{i}" for i in range(70000)]
    vocab = WordVocab(list(SPECIALS) + words)
    (tmp_path / "s").write_text("w69999 w0\n")
    encode_corpus(vocab, vocab, tmp_path / "s", tmp_path / "s", tmp_path / "c.npz")
    with np.load(tmp_path / "c.npz") as f:
        assert f["src_ids"].dtype == np.int32 and f["src_ids"].tolist() == [70003, 4]


def test_per_side_vocabulary_sizes(tmp_path):
    (tmp_path / "s").write_text("a b c d e f\n")
    (tmp_path / "t").write_text("u v w x y z\n")
    cfg = TokenizerConfig(kind="word", src_vocab_size=5, tgt_vocab_size=2)  # Sutskever: 160 000 / 80 000
    train_tokenizers(cfg, tmp_path / "s", tmp_path / "t", tmp_path / "tok")
    assert len(WordVocab.load(tmp_path / "tok/src.model")) == 4 + 5
    assert len(WordVocab.load(tmp_path / "tok/tgt.model")) == 4 + 2


def test_moses_word_path_tokenizes_per_language_and_detokenizes_to_plain_text(tmp_path):
    (tmp_path / "s").write_text("The cat's mat, isn't it?\nHello, world.\n")
    (tmp_path / "t").write_text("L'homme « chante », n'est-ce pas ?\nBonjour, le monde.\n")
    cfg = TokenizerConfig(kind="word", vocab_size=50, pretokenize="moses")
    train_tokenizers(cfg, tmp_path / "s", tmp_path / "t", tmp_path / "tok", languages=("en", "fr"))
    words = WordVocab.load(tmp_path / "tok/tgt.model").words
    assert {"L'", "homme", "«", "»", ",", "?"} <= set(words)  # French Moses rules split the elision
    assert {"isn", "'t", "cat", "'s"} <= set(WordVocab.load(tmp_path / "tok/src.model").words)
    fr = load_tokenizer(cfg, tmp_path / "tok/tgt.model", "fr")
    assert isinstance(fr, MosesWordVocab)
    ids = fr.encode("Bonjour, le monde.")
    assert fr.pieces(ids) == ["Bonjour", ",", "le", "monde", "."]
    assert fr.decode([BOS, *ids, EOS, PAD]) == "Bonjour, le monde."  # what sacreBLEU scores
    assert fr.decode(fr.encode("L'homme chante.")) == "L'homme chante."
    assert fr.decode([UNK, *fr.encode("le monde.")]) == "UNK le monde."


def test_spm_rejects_moses_pretokenization_and_shared_sizes_must_agree():
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["tokenizers"]["spm"]["pretokenize"] = "moses"
    with pytest.raises(ConfigError, match=r"tokenizers.spm.pretokenize"):
        from_dict(raw)
    raw["tokenizers"]["spm"].update(pretokenize="none", shared=True, src_vocab_size=100)
    with pytest.raises(ConfigError, match=r"tokenizers.spm: a shared vocabulary has one size"):
        from_dict(raw)


def test_load_tokenizer_pair_reads_each_side_with_its_language(tmp_path):
    WordVocab(list(SPECIALS) + ["cat"]).save(tmp_path / "src.model")
    WordVocab(list(SPECIALS) + ["chat", "le"]).save(tmp_path / "tgt.model")
    src, tgt = load_tokenizer_pair(TokenizerConfig(kind="word", pretokenize="moses"), tmp_path, ("en", "fr"))
    assert (src.lang, tgt.lang) == ("en", "fr") and (len(src), len(tgt)) == (5, 6)
    assert tgt.encode("le chat") == [5, 4]


def _corpus(tmp_path, n: int) -> tuple[Path, Path]:
    """`n` English/French pairs with punctuation the Moses rules split, and enough distinct words
    that the vocabulary cut (and its ties) falls inside the counts."""
    tmp_path.mkdir(exist_ok=True)
    src, tgt = tmp_path / "train.en", tmp_path / "train.fr"
    src.write_text("".join(f"The cat's {i % 13} mats, isn't it? w{i % 7} w{i % 5}\n" for i in range(n)), "utf-8")
    tgt.write_text("".join(f"L'homme « {i % 11} » n'est-ce pas ? m{i % 7} m{i % 3}\n" for i in range(n)), "utf-8")
    return src, tgt


TOKENIZERS = {
    "word": TokenizerConfig(kind="word", vocab_size=12),
    "moses": TokenizerConfig(kind="word", vocab_size=12, pretokenize="moses"),
    "moses_shared": TokenizerConfig(kind="word", vocab_size=20, pretokenize="moses", shared=True),
    "spm": TokenizerConfig(kind="spm", vocab_size=60),
}


@pytest.mark.parametrize("kind", sorted(TOKENIZERS))
@pytest.mark.parametrize("pairs", [23, 0])  # 23: chunks of 5, 5, 5, 5, 3
def test_one_and_two_processes_write_byte_identical_vocabularies_and_npz(tmp_path, monkeypatch, kind, pairs):
    import attnrepro.data.tokenize as tokenize

    monkeypatch.setattr(tokenize, "CHUNK_LINES", 5)
    cfg = TOKENIZERS[kind]
    src, tgt = _corpus(tmp_path, pairs)
    if kind == "spm":  # sentencepiece trains on its own threads; encoding runs in our processes
        train_src, train_tgt = _corpus(tmp_path / "spm", 40) if pairs == 0 else (src, tgt)
        train_tokenizers(cfg, train_src, train_tgt, tmp_path / "tok1", ("en", "fr"))
        shutil.copytree(tmp_path / "tok1", tmp_path / "tok2")
    for processes in (1, 2):
        tok_dir = tmp_path / f"tok{processes}"
        if kind != "spm":
            train_tokenizers(cfg, src, tgt, tok_dir, ("en", "fr"), threads=processes)
        src_tok = load_tokenizer(cfg, tok_dir / "src.model", "en")
        tgt_tok = load_tokenizer(cfg, tok_dir / "tgt.model", "fr")
        assert encode_corpus(src_tok, tgt_tok, src, tgt, tmp_path / f"c{processes}.npz", processes) == pairs
    for name in ("src.model", "tgt.model"):
        assert (tmp_path / "tok1" / name).read_bytes() == (tmp_path / "tok2" / name).read_bytes()
    assert (tmp_path / "c1.npz").read_bytes() == (tmp_path / "c2.npz").read_bytes()
    with np.load(tmp_path / "c2.npz") as f:
        assert len(f["src_offsets"]) == pairs + 1 and f["tgt_offsets"][-1] == len(f["tgt_ids"])
        expected = encode_lines(tgt_tok, tgt.read_text("utf-8").splitlines())
        assert f["tgt_ids"].tolist() == expected[0].tolist() and f["tgt_offsets"].tolist() == expected[1].tolist()
    if kind != "spm" and pairs:
        words = WordVocab.load(tmp_path / "tok2/tgt.model").words
        assert len(words) == 4 + TOKENIZERS[kind].vocab_size  # the cut falls inside the counted words
        if kind.startswith("moses"):
            assert {"L'", "«", "?"} <= set(words)


def test_the_parallel_vocabulary_is_the_one_process_count_of_every_word(tmp_path, monkeypatch):
    import attnrepro.data.tokenize as tokenize
    from attnrepro.data.tokenize import count_words

    monkeypatch.setattr(tokenize, "CHUNK_LINES", 4)
    src, tgt = _corpus(tmp_path, 30)
    words = [w for line in src.read_text().splitlines() for w in line.split()]
    assert count_words([src], None, processes=2) == [Counter(words)]
    en, fr = count_words([src, tgt], ("en", "fr"), processes=2)
    assert en["'t"] == en["?"] == fr["L'"] == fr["?"] == 30 and "L'" not in en  # English clitic, French elision
    assert [en, fr] == count_words([src, tgt], ("en", "fr"), processes=1)


def test_a_bad_line_in_a_later_chunk_is_named_by_its_line_in_the_file(tmp_path, monkeypatch):
    import attnrepro.data.tokenize as tokenize

    monkeypatch.setattr(tokenize, "CHUNK_LINES", 4)
    src, tgt = _corpus(tmp_path, 10)
    lines = tgt.read_bytes().splitlines(keepends=True)
    lines[8] = b"caf\xe9\n"
    tgt.write_bytes(b"".join(lines))
    vocab = WordVocab.build(["a"], 10)
    for processes in (1, 2):
        with pytest.raises(DataError, match=rf"^{tgt}:9: not UTF-8 \(byte 0xe9 at column 4\)$"):
            encode_corpus(vocab, vocab, src, tgt, tmp_path / "c.npz", processes)
        with pytest.raises(DataError, match=rf"^{tgt}:9: not UTF-8"):
            tokenize.train_tokenizers(TOKENIZERS["moses"], src, tgt, tmp_path / "tok", ("en", "fr"), processes)
    assert not (tmp_path / "c.npz").exists() and not list(tmp_path.glob(".c.npz*"))


def test_sentencepiece_reads_through_the_checked_reader_and_writes_the_same_model_twice(tmp_path):
    src, tgt = _corpus(tmp_path, 400)
    cfg = TokenizerConfig(kind="spm", vocab_size=60)  # every line in the sample: nothing random
    train_tokenizers(cfg, src, tgt, tmp_path / "a")
    train_tokenizers(cfg, src, tgt, tmp_path / "b")
    assert (tmp_path / "a/src.model").read_bytes() == (tmp_path / "b/src.model").read_bytes()  # no temporary path
    tgt.write_bytes(tgt.read_bytes().replace(b"m2\n", b"m2\x00\n", 1))
    with pytest.raises(DataError, match=rf"^{tgt}:3: NUL byte at column 35 "):
        train_tokenizers(cfg, src, tgt, tmp_path / "c")
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(DataError, match="no text to train sentencepiece on"):
        train_tokenizers(cfg, empty, empty, tmp_path / "d")


def test_a_sentencepiece_sample_of_100_or_fewer_sentences_is_refused_by_the_config():
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["tokenizers"]["spm"]["spm_sample_sentences"] = 100  # sentencepiece's trainer needs > 100
    with pytest.raises(
        ConfigError, match=r"^tokenizers\.spm\.spm_sample_sentences: 100 is less than the minimum of 101"
    ):
        from_dict(raw)
    raw["tokenizers"]["spm"]["spm_sample_sentences"] = 101
    assert from_dict(raw).tokenizers["spm"].spm_sample_sentences == 101


def test_a_file_that_is_not_a_word_vocabulary_is_named(tmp_path):
    src, tgt = _corpus(tmp_path, 40)
    train_tokenizers(TokenizerConfig(kind="spm", vocab_size=60), src, tgt, tmp_path / "spm")
    with pytest.raises(DataError, match=rf"^{tmp_path}/spm/src.model:\d+: (not UTF-8|NUL byte)"):  # kind changed
        WordVocab.load(tmp_path / "spm/src.model")
    (tmp_path / "words.model").write_text("a\nb\n")
    with pytest.raises(DataError, match=rf"^{tmp_path}/words.model: not a word vocabulary"):
        WordVocab.load(tmp_path / "words.model")
