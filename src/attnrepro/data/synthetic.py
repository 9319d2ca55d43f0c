"""The embedded corpus: a synthetic "translation" task that needs the whole sentence.

Source (SVO, adjectives before the noun, clauses joined by conjunctions)::

    A* N_subj V A* N_obj  conj  A* N_subj V A* N_obj  ...

Target (SOV, verb-final, clause order reversed, adjectives after the noun in
reversed order, gender agreement)::

    ... N'_subj A'* ga N'_obj A'* wo V'  conj'  N'_subj A'* ga N'_obj A'* wo V'

Every noun has a gender; adjectives agree with their noun and the verb agrees
with its subject, which stands at the other end of the target clause. A clause of
two words is intransitive (`N V` -> `N' ga V'`); a one-word sentence is a bare noun.

Training lengths are drawn with P(L) proportional to 1/L so that every length
contributes about the same number of tokens (../shared/DESIGN.md: uniform lengths
starve short sentences). The test set covers every length up to `max_test_len`
with the same number of sentences in each bucket, like Bahdanau et al. 2014, Fig. 2.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from attnrepro.config import SyntheticDataConfig

CONSONANTS_SRC = "bdfgklmnprstvz"
CONSONANTS_TGT = "bcdhjkmnpqrstwxy"
VOWELS_SRC = "aeiou"
VOWELS_TGT = "aeiouy"
MAX_CLAUSE_LEN = 8  # words; at most 5 adjectives per clause


@dataclass(frozen=True)
class Lexicon:
    """Source words and their target translations; genders index `GENDER_SUFFIXES`."""

    nouns: list[tuple[str, str, int]]  # (source, target, gender)
    adjectives: list[tuple[str, str]]  # (source, target stem)
    transitive: list[tuple[str, str]]  # (source, target stem)
    intransitive: list[tuple[str, str]]
    conjunctions: list[tuple[str, str]]


GENDER_SUFFIXES = ("o", "a")


def _words(rng: random.Random, consonants: str, vowels: str, n: int, taken: set[str]) -> list[str]:
    """`n` new pronounceable words of 2-3 consonant-vowel syllables."""
    words: list[str] = []
    while len(words) < n:
        syllables = rng.choice((2, 3))
        word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def make_lexicon(cfg: SyntheticDataConfig) -> Lexicon:
    rng = random.Random(cfg.seed)
    src_taken: set[str] = set()
    tgt_taken: set[str] = {"ga", "wo"}
    sizes = {
        "nouns": cfg.n_nouns,
        "adjectives": cfg.n_adjectives,
        "transitive": cfg.n_transitive,
        "intransitive": cfg.n_intransitive,
        "conjunctions": 4,
    }
    pairs = {}
    for kind, n in sizes.items():
        src = _words(rng, CONSONANTS_SRC, VOWELS_SRC, n, src_taken)
        # Inflected categories get a bare stem; the gender suffix completes the word.
        tgt = _words(rng, CONSONANTS_TGT, VOWELS_TGT, n, tgt_taken)
        pairs[kind] = list(zip(src, tgt))
    nouns = [(s, t, rng.randrange(2)) for s, t in pairs["nouns"]]
    return Lexicon(
        nouns,
        pairs["adjectives"],
        pairs["transitive"],
        pairs["intransitive"],
        pairs["conjunctions"],
    )


def _clause_lengths(rng: random.Random, length: int) -> list[int]:
    """Split `length` words into clauses of 2..MAX_CLAUSE_LEN words plus one conjunction between each."""
    if length == 1:
        return [1]
    lengths: list[int] = []
    remaining = length
    while remaining > MAX_CLAUSE_LEN:
        # Leave at least 2 words for the next clause after this clause and its conjunction.
        clause = rng.randint(2, min(MAX_CLAUSE_LEN, remaining - 3))
        lengths.append(clause)
        remaining -= clause + 1
    lengths.append(remaining)
    return lengths


def _noun_phrase(rng: random.Random, lex: Lexicon, n_adjectives: int) -> tuple[list[str], list[str], int]:
    src_noun, tgt_noun, gender = rng.choice(lex.nouns)
    adjectives = [rng.choice(lex.adjectives) for _ in range(n_adjectives)]
    suffix = GENDER_SUFFIXES[gender]
    src = [a[0] for a in adjectives] + [src_noun]
    tgt = [tgt_noun] + [a[1] + suffix for a in reversed(adjectives)]
    return src, tgt, gender


def _clause(rng: random.Random, lex: Lexicon, length: int) -> tuple[list[str], list[str]]:
    if length == 1:
        src, tgt, _ = _noun_phrase(rng, lex, 0)
        return src, tgt
    if length == 2:
        subj_src, subj_tgt, gender = _noun_phrase(rng, lex, 0)
        verb_src, verb_tgt = rng.choice(lex.intransitive)
        return subj_src + [verb_src], subj_tgt + ["ga", verb_tgt + GENDER_SUFFIXES[gender]]
    n_adjectives = length - 3
    n_subj_adj = rng.randint(0, n_adjectives)
    subj_src, subj_tgt, gender = _noun_phrase(rng, lex, n_subj_adj)
    obj_src, obj_tgt, _ = _noun_phrase(rng, lex, n_adjectives - n_subj_adj)
    verb_src, verb_tgt = rng.choice(lex.transitive)
    src = subj_src + [verb_src] + obj_src
    tgt = subj_tgt + ["ga"] + obj_tgt + ["wo", verb_tgt + GENDER_SUFFIXES[gender]]
    return src, tgt


def sentence_pair(rng: random.Random, lex: Lexicon, length: int) -> tuple[list[str], list[str]]:
    """One (source, target) pair whose source has exactly `length` words."""
    clauses = [_clause(rng, lex, n) for n in _clause_lengths(rng, length)]
    conjunctions = [rng.choice(lex.conjunctions) for _ in clauses[1:]]
    src = list(clauses[0][0])
    for (conj_src, _), (clause_src, _) in zip(conjunctions, clauses[1:]):
        src += [conj_src] + clause_src
    # Clause order reversed: the last source clause comes first, conjunctions mirrored.
    tgt = list(clauses[-1][1])
    for (_, conj_tgt), (_, clause_tgt) in zip(reversed(conjunctions), reversed(clauses[:-1])):
        tgt += [conj_tgt] + clause_tgt
    return src, tgt


def generate_splits(cfg: SyntheticDataConfig) -> dict[str, list[tuple[list[str], list[str]]]]:
    """train/valid (lengths ~ 1/L up to max_train_len) and test (every bucket, equal counts)."""
    lex = make_lexicon(cfg)
    splits: dict[str, list[tuple[list[str], list[str]]]] = {}
    weights = [1.0 / n for n in range(1, cfg.max_train_len + 1)]
    lengths = range(1, cfg.max_train_len + 1)
    for offset, (split, n) in enumerate((("train", cfg.n_train), ("valid", cfg.n_valid))):
        rng = random.Random(cfg.seed * 1000 + offset + 1)
        splits[split] = [sentence_pair(rng, lex, L) for L in rng.choices(lengths, weights=weights, k=n)]
    rng = random.Random(cfg.seed * 1000 + 3)
    test = []
    for lo in range(0, cfg.max_test_len, cfg.bucket_width):
        for _ in range(cfg.test_per_bucket):
            test.append(sentence_pair(rng, lex, rng.randint(lo + 1, lo + cfg.bucket_width)))
    splits["test"] = test
    return splits


def write_splits(cfg: SyntheticDataConfig, out_dir: Path) -> dict[str, int]:
    """Write `{split}.src` / `{split}.tgt` (one sentence a line); return sentence counts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, pairs in generate_splits(cfg).items():
        for side, index in (("src", 0), ("tgt", 1)):
            text = "".join(" ".join(pair[index]) + "\n" for pair in pairs)
            tmp = out_dir / f".{split}.{side}.tmp"
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(out_dir / f"{split}.{side}")
        counts[split] = len(pairs)
    return counts
