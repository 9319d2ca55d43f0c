"""The embedded corpus: a synthetic "translation" task with the word order of a real language pair.

The source is English-like, the target German-like (with French adjective order): clause order
is kept, as in En->De and En->Fr, and the reorderings happen inside a clause::

    source  N-phrase V [prt] N-phrase   (conj | comp)  N-phrase V [prt] N-phrase  ...
    main    N-phrase' V' N-phrase' [prt']               verb second, separable particle last
    subord. comp' N-phrase' N-phrase' [prt'+]V'          verb last, the particle joined to it

A noun phrase is a noun with up to three adjectives and a chain of prepositional modifiers,
`A* N (P A* N)*` -> `N' A'* (P' N' A'*)*`: adjectives follow their noun in mirror order and
agree with its gender; the chain keeps its order. Every noun has a gender, and the verb agrees
with its subject, which in a subordinate clause stands at the other end of the clause. Each
clause after the first is joined by a coordinating conjunction (a main clause) or a
complementiser (a subordinate clause), one or the other with equal chance.

Sentence length is the variable under study, so the reorderings grow with it, as they do in
text: a sentence of L words has about 0.6 √L clauses of about 1.6 √L words (1.9 clauses of 5
words at L = 10, 4.2 of 11 at L = 50, 5.4 of 14 at L = 80), and the object is the longest
part of a clause, so the distance a subordinate verb or a separable particle moves grows with
L. `clause_order: reverse` also reverses the order of the target's clauses: a stress test that
no language pair of the papers needs.

What makes the corpus usable, kept: deterministic from the seed; training lengths drawn with
P(L) proportional to 1/L, so that every length contributes about the same number of tokens
(uniform lengths starve short sentences); a test set with the same number of sentences in each
`bucket_width` bucket up to `max_test_len`, like Bahdanau et al. 2014, Fig. 2; a few hundred
words a side, every one of them seen in training.

The splits share no source sentence: test is drawn first, then validation, then training, and a
draw whose source an earlier split holds is drawn again at the same length from a stream of its
own (`Draws`), so the lengths stay as drawn and every other sentence is the one drawn without the
rule. Only short sentences collide, where the lexicon allows few (120 of one word by default).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from attnrepro.config import SyntheticDataConfig
from attnrepro.errors import ConfigError

CONSONANTS_SRC = "bdfgklmnprstvz"
CONSONANTS_TGT = "bcdhjkmnpqrstwxy"
VOWELS_SRC = "aeiou"
VOWELS_TGT = "aeiouy"
GENDER_SUFFIXES = ("o", "a")
MAX_ADJECTIVES = 3  # per noun; a longer noun phrase grows a modifier chain
P_INTRANSITIVE, P_SEPARABLE, P_SUBORDINATE = 0.2, 0.3, 0.5
MAX_REDRAWS = 1000  # of one sentence whose source an earlier split holds, before the lexicon is called too small
Pairs = list[tuple[list[str], list[str]]]


@dataclass(frozen=True)
class Lexicon:
    """Source words and their target translations; genders index `GENDER_SUFFIXES`."""

    nouns: list[tuple[str, str, int]]  # (source, target, gender)
    adjectives: list[tuple[str, str]]  # (source, target stem)
    transitive: list[tuple[str, str]]  # (source, target stem)
    separable: list[tuple[str, str, str, str]]  # (source verb, source particle, target stem, target particle)
    intransitive: list[tuple[str, str]]
    prepositions: list[tuple[str, str]]
    conjunctions: list[tuple[str, str]]  # a main clause follows
    complementisers: list[tuple[str, str]]  # a subordinate (verb-final) clause follows


def _words(
    rng: random.Random, consonants: str, vowels: str, n: int, taken: set[str], syllables: tuple[int, ...] = (2, 3)
) -> list[str]:
    """`n` new pronounceable words of consonant-vowel syllables."""
    words: list[str] = []
    while len(words) < n:
        word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.choice(syllables)))
        if word not in taken:
            taken.add(word)
            words.append(word)
    return words


def make_lexicon(cfg: SyntheticDataConfig) -> Lexicon:
    rng = random.Random(cfg.seed)
    src_taken: set[str] = set()
    tgt_taken: set[str] = set()
    sizes = {
        "nouns": cfg.n_nouns,
        "adjectives": cfg.n_adjectives,
        "transitive": cfg.n_transitive,
        "separable": cfg.n_separable,
        "intransitive": cfg.n_intransitive,
        "prepositions": 4,
        "conjunctions": 3,
        "complementisers": 4,
    }
    pairs = {}
    for kind, n in sizes.items():
        src = _words(rng, CONSONANTS_SRC, VOWELS_SRC, n, src_taken)
        # Inflected categories get a bare stem; the gender suffix completes the word.
        tgt = _words(rng, CONSONANTS_TGT, VOWELS_TGT, n, tgt_taken)
        pairs[kind] = list(zip(src, tgt))
    # Particles of two syllables: a particle joined to a stem (≥ 4 syllables) is never another word.
    src_particles = _words(rng, CONSONANTS_SRC, VOWELS_SRC, 4, src_taken, syllables=(2,))
    tgt_particles = _words(rng, CONSONANTS_TGT, VOWELS_TGT, 4, tgt_taken, syllables=(2,))
    separable = [(s, rng.choice(src_particles), t, rng.choice(tgt_particles)) for s, t in pairs["separable"]]
    nouns = [(s, t, rng.randrange(2)) for s, t in pairs["nouns"]]
    return Lexicon(
        nouns,
        pairs["adjectives"],
        pairs["transitive"],
        separable,
        pairs["intransitive"],
        pairs["prepositions"],
        pairs["conjunctions"],
        pairs["complementisers"],
    )


def _composition(rng: random.Random, total: int, parts: int, minimum: int) -> list[int]:
    """`total` split into `parts` sizes of at least `minimum`, uniform over all such splits."""
    spare = total - parts * minimum
    cuts = sorted(rng.sample(range(spare + parts - 1), parts - 1))
    bounds = [-1, *cuts, spare + parts - 1]
    return [minimum + bounds[i + 1] - bounds[i] - 1 for i in range(parts)]


def _clause_lengths(rng: random.Random, length: int) -> list[int]:
    """Words of each clause (at least 2) when `length` words include one joining word between clauses."""
    most = max(1, (length + 1) // 3)  # k clauses need 2k words and k - 1 joining words
    clauses = min(most, max(1, round(math.sqrt(length) * rng.uniform(0.3, 0.9))))
    return _composition(rng, length - (clauses - 1), clauses, 2) if length > 1 else [1]


def _noun_phrase(rng: random.Random, lex: Lexicon, length: int) -> tuple[list[str], list[str], int]:
    """A noun phrase of exactly `length` source words: `A* N (P A* N)*`; the head noun's gender."""
    lowest = max(0, math.ceil((length - 1 - MAX_ADJECTIVES) / (MAX_ADJECTIVES + 2)))
    n_modifiers = rng.randint(lowest, (length - 1) // 2)  # each modifier: a preposition and a noun
    n_nouns = n_modifiers + 1
    adjective_counts = [0] * n_nouns
    for slot in rng.sample(range(MAX_ADJECTIVES * n_nouns), length - 2 * n_modifiers - 1):  # slots filled
        adjective_counts[slot // MAX_ADJECTIVES] += 1
    src: list[str] = []
    tgt: list[str] = []
    for i, n_adjectives in enumerate(adjective_counts):
        if i > 0:
            preposition = rng.choice(lex.prepositions)
            src.append(preposition[0])
            tgt.append(preposition[1])
        noun_src, noun_tgt, gender = rng.choice(lex.nouns)
        if i == 0:
            head_gender = gender
        adjectives = [rng.choice(lex.adjectives) for _ in range(n_adjectives)]
        src += [a[0] for a in adjectives] + [noun_src]
        tgt += [noun_tgt] + [a[1] + GENDER_SUFFIXES[gender] for a in reversed(adjectives)]  # after the noun, agreeing
    return src, tgt, head_gender


def _clause(rng: random.Random, lex: Lexicon, length: int, subordinate: bool) -> tuple[list[str], list[str]]:
    """One clause of exactly `length` source words (its joining word not counted)."""
    if length == 1:
        src, tgt, _ = _noun_phrase(rng, lex, 1)
        return src, tgt
    if length == 2 or rng.random() < P_INTRANSITIVE:
        subj_src, subj_tgt, gender = _noun_phrase(rng, lex, length - 1)
        verb_src, verb_tgt = rng.choice(lex.intransitive)
        return subj_src + [verb_src], subj_tgt + [verb_tgt + GENDER_SUFFIXES[gender]]
    separable = length >= 4 and rng.random() < P_SEPARABLE
    phrase_words = length - 1 - separable
    subj_len = 1 + rng.randint(0, (phrase_words - 2) // 3)  # the object takes most of the clause
    subj_src, subj_tgt, gender = _noun_phrase(rng, lex, subj_len)
    obj_src, obj_tgt, _ = _noun_phrase(rng, lex, phrase_words - subj_len)
    if separable:
        verb, particle, stem, particle_tgt = rng.choice(lex.separable)
        verb_words = [verb, particle]
    else:
        (verb, stem), particle_tgt = rng.choice(lex.transitive), ""
        verb_words = [verb]
    src = subj_src + verb_words + obj_src
    verb_tgt = stem + GENDER_SUFFIXES[gender]  # agrees with the subject
    if subordinate:  # verb-final; a separable particle is joined to the verb
        return src, subj_tgt + obj_tgt + [particle_tgt + verb_tgt]
    return src, subj_tgt + [verb_tgt] + obj_tgt + ([particle_tgt] if separable else [])  # verb second


def sentence_pair(
    rng: random.Random, lex: Lexicon, length: int, clause_order: str = "keep"
) -> tuple[list[str], list[str]]:
    """One (source, target) pair whose source has exactly `length` words."""
    lengths = _clause_lengths(rng, length)
    subordinate = [False] + [rng.random() < P_SUBORDINATE for _ in lengths[1:]]
    joins = [rng.choice(lex.complementisers if sub else lex.conjunctions) for sub in subordinate[1:]]
    clauses = [_clause(rng, lex, n, sub) for n, sub in zip(lengths, subordinate)]
    src = list(clauses[0][0])
    for (join_src, _), (clause_src, _) in zip(joins, clauses[1:]):
        src += [join_src] + clause_src
    targets = [clause[1] for clause in clauses]
    if clause_order == "reverse":  # the last source clause first, joining words mirrored
        targets, joins = targets[::-1], joins[::-1]
    tgt = list(targets[0])
    for (_, join_tgt), clause_tgt in zip(joins, targets[1:]):
        tgt += [join_tgt] + clause_tgt
    return src, tgt


class Draws:
    """Sentence pairs drawn from `rng`, each source outside `taken` (the earlier splits' sources): a draw
    whose source is taken is drawn again, at the same length, from `redraw`, so `rng`'s stream and every
    other draw stay as they are."""

    def __init__(self, rng: random.Random, redraw: random.Random, lex: Lexicon, cfg: SyntheticDataConfig,
                 taken: set[tuple[str, ...]]):  # fmt: skip
        self.rng, self.redraw, self.lex, self.cfg, self.taken = rng, redraw, lex, cfg, taken

    def pair(self, length: int) -> tuple[list[str], list[str]]:
        src, tgt = sentence_pair(self.rng, self.lex, length, self.cfg.clause_order)
        for _ in range(MAX_REDRAWS):
            if tuple(src) not in self.taken:
                return src, tgt
            src, tgt = sentence_pair(self.redraw, self.lex, length, self.cfg.clause_order)
        raise ConfigError(
            f"data.synthetic: {MAX_REDRAWS} sentences of {length} word(s) in a row were already in the test or"
            " validation split; a larger lexicon (n_nouns, ...) or fewer test or validation sentences leaves"
            " the training split sentences of its own"
        )


def _per_bucket(draws: Draws, counts: list[int], longest: int) -> Pairs:
    """`counts[b]` pairs of source length uniform in bucket b, (b * width, (b + 1) * width], at most `longest`."""
    pairs, width = [], draws.cfg.bucket_width
    for b, n in enumerate(counts):
        lo, hi = b * width + 1, min((b + 1) * width, longest)
        pairs += [draws.pair(draws.rng.randint(lo, hi)) for _ in range(n)]
    return pairs


def _like_training(draws: Draws, n: int) -> Pairs:
    """`n` pairs of 1..max_train_len source words, P(L) ∝ 1/L: every length gives about the same tokens."""
    longest = draws.cfg.max_train_len
    lengths = draws.rng.choices(range(1, longest + 1), [1.0 / L for L in range(1, longest + 1)], k=n)
    return [draws.pair(L) for L in lengths]


def generate_splits(cfg: SyntheticDataConfig) -> dict[str, Pairs]:
    """train (lengths ~ 1/L up to max_train_len); valid drawn like train, or (`valid_lengths: per_bucket`)
    n_valid spread evenly over the buckets up to max_train_len, so that early stopping sees long sentences as
    often as short ones; test: test_per_bucket in every bucket up to max_test_len. No source is in two splits
    (test drawn first, then valid, then train: see the module's docstring)."""
    lex = make_lexicon(cfg)
    train_rng, valid_rng, test_rng, redraw_rng = (random.Random(cfg.seed * 1000 + offset) for offset in (1, 2, 3, 4))
    test_buckets = math.ceil(cfg.max_test_len / cfg.bucket_width)
    test = _per_bucket(Draws(test_rng, redraw_rng, lex, cfg, set()), [cfg.test_per_bucket] * test_buckets,
                       test_buckets * cfg.bucket_width)  # fmt: skip
    taken = {tuple(src) for src, _ in test}
    if cfg.valid_lengths == "per_bucket":
        buckets = math.ceil(cfg.max_train_len / cfg.bucket_width)
        counts = [cfg.n_valid // buckets + (b < cfg.n_valid % buckets) for b in range(buckets)]
        valid = _per_bucket(Draws(valid_rng, redraw_rng, lex, cfg, taken), counts, cfg.max_train_len)
    else:
        valid = _like_training(Draws(valid_rng, redraw_rng, lex, cfg, taken), cfg.n_valid)
    taken = taken | {tuple(src) for src, _ in valid}
    train = _like_training(Draws(train_rng, redraw_rng, lex, cfg, taken), cfg.n_train)
    return {"train": train, "valid": valid, "test": test}


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
