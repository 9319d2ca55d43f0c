"""The embedded corpus: deterministic, Fig. 2 lengths, a transduction that needs the whole sentence."""

from __future__ import annotations

import random
from collections import Counter

from attnrepro.config import SyntheticDataConfig
from attnrepro.data.synthetic import GENDER_SUFFIXES, generate_splits, make_lexicon, sentence_pair, write_splits

CFG = SyntheticDataConfig(n_train=3000, n_valid=50, test_per_bucket=100, max_train_len=50, max_test_len=80)


def test_same_seed_same_corpus_other_seed_other_corpus(tmp_path):
    write_splits(CFG, tmp_path / "a")
    write_splits(CFG, tmp_path / "b")
    for name in ("train.src", "train.tgt", "test.src", "test.tgt", "valid.src"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    other = generate_splits(SyntheticDataConfig(seed=2, n_train=50, n_valid=5, test_per_bucket=1))
    assert (
        other["train"]
        != generate_splits(SyntheticDataConfig(seed=1, n_train=50, n_valid=5, test_per_bucket=1))["train"]
    )


def test_split_sizes_and_lengths():
    splits = generate_splits(CFG)
    assert len(splits["train"]) == 3000 and len(splits["valid"]) == 50
    train_lens = [len(s) for s, _ in splits["train"]]
    assert min(train_lens) == 1 and max(train_lens) <= 50
    # P(L) ∝ 1/L: every length carries about the same number of tokens, so 1-10 has ~ as many tokens as 41-50.
    tokens = Counter(min((n - 1) // 10, 4) for n in train_lens for _ in range(n))
    assert 0.6 < tokens[0] / tokens[4] < 1.6
    # The test set covers every 10-word bucket up to 80 with 100 sentences each.
    buckets = Counter((len(s) - 1) // 10 for s, _ in splits["test"])
    assert buckets == {b: 100 for b in range(8)}


def test_vocabulary_is_a_few_hundred_words():
    splits = generate_splits(CFG)
    src_words = {w for s, _ in splits["train"] for w in s}
    tgt_words = {w for _, t in splits["train"] for w in t}
    assert 150 <= len(src_words) <= 400
    assert 200 <= len(tgt_words) <= 600


def test_transduction_reorders_clauses_and_agrees_across_the_clause():
    lex = make_lexicon(CFG)
    gender = {t: g for _, t, g in lex.nouns}
    noun_tgt = {s: t for s, t, _ in lex.nouns}
    verb_tgt = dict(lex.transitive)
    conj = dict(lex.conjunctions)
    rng = random.Random(0)
    for length in (3, 8, 17, 40, 80):
        src, tgt = sentence_pair(rng, lex, length)
        assert len(src) == length
        # Split both sides at conjunctions: target clauses are the source clauses in reverse order.
        src_clauses, tgt_clauses = _split(src, set(conj)), _split(tgt, set(conj.values()))
        assert len(src_clauses) == len(tgt_clauses)
        for s_clause, t_clause in zip(src_clauses, reversed(tgt_clauses)):
            assert t_clause[0] == noun_tgt[[w for w in s_clause if w in noun_tgt][0]]  # subject first
            if len(s_clause) >= 3:
                assert t_clause[-2] == "wo"  # verb-final: object marker, then the verb
                verb = next(w for w in s_clause if w in verb_tgt)
                # the final verb agrees with the subject at the other end of the clause
                assert t_clause[-1] == verb_tgt[verb] + GENDER_SUFFIXES[gender[t_clause[0]]]


def _split(words: list[str], separators: set[str]) -> list[list[str]]:
    clauses, current = [], []
    for w in words:
        if w in separators:
            clauses.append(current)
            current = []
        else:
            current.append(w)
    return clauses + [current]


def test_one_word_sentences_are_bare_nouns():
    lex = make_lexicon(CFG)
    src, tgt = sentence_pair(random.Random(1), lex, 1)
    assert (src[0], tgt[0]) in {(s, t) for s, t, _ in lex.nouns} and len(tgt) == 1
