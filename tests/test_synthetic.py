"""The embedded corpus: deterministic, Fig. 2 lengths, the word order of a real language pair."""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections import Counter

import pytest

from attnrepro.config import SyntheticDataConfig
from attnrepro.data.synthetic import (
    GENDER_SUFFIXES,
    Lexicon,
    generate_splits,
    make_lexicon,
    sentence_pair,
    write_splits,
)
from attnrepro.errors import ConfigError

CFG = SyntheticDataConfig(n_train=3000, n_valid=50, test_per_bucket=100, max_train_len=50, max_test_len=80)
LEX = make_lexicon(CFG)


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


def test_per_bucket_validation_has_as_many_long_sentences_as_short_ones_and_leaves_the_rest_alone():
    balanced = generate_splits(dataclasses.replace(CFG, n_valid=52, valid_lengths="per_bucket"))
    buckets = Counter((len(s) - 1) // 10 for s, _ in balanced["valid"])
    assert buckets == {0: 11, 1: 11, 2: 10, 3: 10, 4: 10}  # 52 over the 5 buckets up to max_train_len
    assert max(len(s) for s, _ in balanced["valid"]) <= 50
    drawn = generate_splits(CFG)  # like_train: P(L) ∝ 1/L, most sentences short
    assert sum(len(s) <= 10 for s, _ in drawn["valid"]) > 2 * sum(len(s) > 40 for s, _ in drawn["valid"])
    assert balanced["test"] == drawn["test"]  # only validation changes, and the short training sentences it takes:
    changed = [i for i, (a, b) in enumerate(zip(balanced["train"], drawn["train"])) if a != b]
    assert 0 < len(changed) < 0.05 * CFG.n_train  # 120 of 3 000, all of 1 word
    assert all(len(balanced["train"][i][0]) == len(drawn["train"][i][0]) <= 3 for i in changed)


# The embedded default's generation (config/config.yaml: lexicon, lengths, per-bucket validation) with 20 000 of
# its 150 000 training pairs (0.4 s, not 4-6): enough short ones that every 1-word sentence is drawn.
DEFAULT_LIKE = SyntheticDataConfig(n_train=20000, valid_lengths="per_bucket")
TEST_YAML_LIKE = SyntheticDataConfig(  # config/test.yaml's
    seed=7,
    n_train=2000,
    n_valid=50,
    test_per_bucket=4,
    max_train_len=20,
    max_test_len=40,
    n_nouns=20,
    n_adjectives=10,
    n_transitive=8,
    n_intransitive=4,
)


@pytest.mark.parametrize("cfg", [CFG, TEST_YAML_LIKE, DEFAULT_LIKE], ids=["small", "test_yaml", "default_lengths"])
def test_no_source_sentence_is_in_two_splits_and_training_lengths_stay_1_over_L(cfg):
    """The old draws put 20 of the default's 500 validation and 16 of its 800 test pairs in training (1-3 words)
    and one pair in both validation and test. A redraw keeps its length: P(L) ∝ 1/L holds (chi-square over the
    lengths below its 99.999th percentile), 1-word sentences included."""
    splits = generate_splits(cfg)
    train, valid, test = ({tuple(src) for src, _ in splits[k]} for k in ("train", "valid", "test"))
    assert not train & valid and not train & test and not valid & test
    counts, lengths = Counter(len(src) for src, _ in splits["train"]), range(1, cfg.max_train_len + 1)
    expected = {L: cfg.n_train / L / sum(1 / n for n in lengths) for L in lengths}
    assert sum((counts[L] - expected[L]) ** 2 / expected[L] for L in lengths) < {20: 57.4, 50: 103.1}[cfg.max_train_len]


def test_a_lexicon_whose_short_sentences_the_test_split_takes_is_refused():
    """Two nouns: the test split's 1-word sentences are both of them, and no training sentence of 1 word is left."""
    tiny = SyntheticDataConfig(
        n_train=100, n_valid=10, test_per_bucket=100, max_train_len=10, max_test_len=10, n_nouns=2
    )
    with pytest.raises(ConfigError, match=r"data.synthetic: 1000 sentences of 1 word\(s\) in a row were already in"):
        generate_splits(tiny)


def test_a_few_hundred_words_a_side_every_one_seen_in_training():
    splits = generate_splits(CFG)
    src_words = {w for s, _ in splits["train"] for w in s}
    tgt_words = {w for _, t in splits["train"] for w in t}
    assert 200 <= len(src_words) <= 400
    assert 300 <= len(tgt_words) <= 600
    assert {w for s, _ in splits["test"] for w in s} <= src_words
    assert {w for _, t in splits["test"] for w in t} <= tgt_words


class Grammar:
    """The lexicon read back: which word is which, so that a test can parse a pair."""

    def __init__(self, lex: Lexicon):
        self.noun = {s: t for s, t, _ in lex.nouns}
        self.gender = {t: g for _, t, g in lex.nouns}
        self.verb = dict(lex.transitive) | dict(lex.intransitive) | {s[0]: s[2] for s in lex.separable}
        self.particle = {s[0]: s[3] for s in lex.separable}  # source verb -> its target particle
        self.joins_src = {s for s, _ in lex.conjunctions + lex.complementisers}
        self.joins_tgt = {t for _, t in lex.conjunctions + lex.complementisers}
        self.complementisers = {t for _, t in lex.complementisers}

    def clauses(self, words: list[str], joins: set[str]) -> list[tuple[int, str | None, list[str]]]:
        """(position of the clause's first word, its joining word, its words), in order."""
        clauses, start, join = [], 0, None
        for i, w in enumerate([*words, None]):
            if w is None or w in joins:
                clauses.append((start, join, words[start:i]))
                start, join = i + 1, w
        return clauses

    def parallel_clauses(self, src: list[str], tgt: list[str]):
        """Source and target clauses side by side (clause order kept)."""
        src_clauses, tgt_clauses = self.clauses(src, self.joins_src), self.clauses(tgt, self.joins_tgt)
        assert len(src_clauses) == len(tgt_clauses)
        return zip(src_clauses, tgt_clauses)


GRAMMAR = Grammar(LEX)


def _pairs(n: int, lengths: range, clause_order: str = "keep", seed: int = 0):
    rng = random.Random(seed)
    return [sentence_pair(rng, LEX, rng.choice(lengths), clause_order) for _ in range(n)]


def _nouns(words: list[str], lexicon: dict[str, str] | None = None) -> list[str]:
    if lexicon is None:
        return [w for w in words if w in GRAMMAR.gender]
    return [lexicon[w] for w in words if w in lexicon]


@pytest.mark.parametrize("clause_order", ["keep", "reverse"])
def test_clause_order_is_kept_or_reversed(clause_order):
    for src, tgt in _pairs(200, range(2, 60), clause_order):
        src_clauses = GRAMMAR.clauses(src, GRAMMAR.joins_src)
        tgt_clauses = GRAMMAR.clauses(tgt, GRAMMAR.joins_tgt)
        if clause_order == "reverse":
            tgt_clauses = tgt_clauses[::-1]
        # clause i of the target holds the translations of clause i's nouns, in their order
        assert [_nouns(c[2], GRAMMAR.noun) for c in src_clauses] == [_nouns(c[2]) for c in tgt_clauses]


def test_verb_second_in_main_clauses_last_in_subordinate_ones_and_agreeing_with_the_subject():
    counts = Counter()
    for src, tgt in _pairs(300, range(2, 60)):
        for (_, _, s_words), (_, join, t_words) in GRAMMAR.parallel_clauses(src, tgt):
            verb = next((w for w in s_words if w in GRAMMAR.verb), None)
            if verb is None:
                continue  # a one-word sentence: a bare noun
            subject_gender = GRAMMAR.gender[t_words[0]]  # every clause starts with its subject's noun
            form = GRAMMAR.verb[verb] + GENDER_SUFFIXES[subject_gender]
            particle = GRAMMAR.particle.get(verb, "")
            if join in GRAMMAR.complementisers:
                assert t_words[-1] == particle + form  # verb-final, a separable particle joined to it
                counts["subordinate"] += 1
            else:
                subject_len = s_words.index(verb)  # source: SVO, the verb right after the subject
                assert t_words[subject_len] == form  # verb second, after the whole subject
                if particle:
                    assert t_words[-1] == particle  # separable particle at the end of the clause
                    counts["separable"] += 1
                counts["main"] += 1
    assert min(counts.values()) > 30


def test_adjectives_follow_their_noun_and_agree_with_it():
    adjective_stems = {t for _, t in LEX.adjectives}
    for _, tgt in _pairs(100, range(2, 60)):
        gender = None
        for w in tgt:
            if w in GRAMMAR.gender:
                gender = GRAMMAR.gender[w]
            elif w[:-1] in adjective_stems:
                assert gender is not None and w[-1] == GENDER_SUFFIXES[gender]
            else:
                gender = None  # a verb, preposition or joining word ends the noun's adjectives


def _subordinate_verb_distances(pairs) -> list[int]:
    """|target position - source position| of each transitive subordinate clause's verb."""
    distances = []
    for src, tgt in pairs:
        for (s_start, _, s_words), (t_start, join, t_words) in GRAMMAR.parallel_clauses(src, tgt):
            verb = next((i for i, w in enumerate(s_words) if w in GRAMMAR.verb), None)
            if join in GRAMMAR.complementisers and verb is not None and verb < len(s_words) - 1:
                distances.append(abs(t_start + len(t_words) - 1 - (s_start + verb)))
    return distances


def test_the_subordinate_verb_moves_further_in_longer_sentences():
    means = [
        statistics.mean(_subordinate_verb_distances(_pairs(300, range(lo + 1, lo + 11), seed=lo)))
        for lo in (0, 20, 40, 70)
    ]
    assert all(a < b for a, b in zip(means, means[1:])), means
    assert means[-1] > 2 * means[0], means


def test_one_word_sentences_are_bare_nouns():
    src, tgt = sentence_pair(random.Random(1), LEX, 1)
    assert (src[0], tgt[0]) in {(s, t) for s, t, _ in LEX.nouns} and len(tgt) == 1
