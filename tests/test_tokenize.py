"""Word shortlists and sentencepiece, sharing the special ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnrepro.config import TokenizerConfig
from attnrepro.tokenize import (
    BOS,
    EOS,
    PAD,
    UNK,
    SentencePiece,
    WordVocab,
    encode_corpus,
    load_tokenizer,
    train_tokenizers,
)


def test_word_vocab_keeps_the_top_k_and_maps_the_rest_to_unk(tmp_path):
    vocab = WordVocab.build(["a a a b b c", "a b d"], vocab_size=2)
    assert vocab.words == ["<pad>", "<unk>", "<s>", "</s>", "a", "b"]
    assert vocab.encode("a c b zz") == [4, UNK, 5, UNK]
    assert vocab.decode([4, UNK, 5, EOS, PAD]) == "a <unk> b"
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
