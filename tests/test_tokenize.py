"""Word shortlists and sentencepiece, sharing the special ids."""

from __future__ import annotations

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
    try:
        encode_corpus(vocab, vocab, tmp_path / "s", tmp_path / "t", tmp_path / "c2.npz")
    except ValueError as err:
        assert str(tmp_path / "s") in str(err) and "2 lines" in str(err)
    else:
        raise AssertionError("mismatched line counts were accepted")
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
