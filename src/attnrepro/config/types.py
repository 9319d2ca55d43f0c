"""The configuration's frozen dataclasses: what every `attnrepro` verb reads, one section of the YAML each.

`attnrepro.config.load.from_dict` builds them from a config the schema has validated, then runs the
cross-key checks of `attnrepro.constraints` on them; this module imports neither, so the checks can
name these types without an import cycle.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field, replace
from typing import Any

from attnrepro.errors import ConfigError

__all__ = [  # what attnrepro.config re-exports
    "SyntheticDataConfig",
    "DownloadFile",
    "CorpusSpec",
    "CleanConfig",
    "WmtDataConfig",
    "EuroparlSample",
    "EuroparlDataConfig",
    "TokenizerConfig",
    "TrainConfig",
    "MeasuredThroughput",
    "ResourcesConfig",
    "ModelConfig",
    "SearchConfig",
    "EvaluateConfig",
    "Config",
]


@dataclass(frozen=True)
class SyntheticDataConfig:
    seed: int = 1
    n_train: int = 150000
    n_valid: int = 500
    valid_lengths: str = "like_train"  # like_train (P(L) ∝ 1/L) | per_bucket (n_valid spread evenly over buckets)
    test_per_bucket: int = 100
    max_train_len: int = 50
    max_test_len: int = 80
    bucket_width: int = 10
    n_nouns: int = 120
    n_adjectives: int = 60
    n_transitive: int = 40
    n_separable: int = 20
    n_intransitive: int = 20
    clause_order: str = "keep"


@dataclass(frozen=True)
class DownloadFile:
    """One published file: URL, bytes and checksums (None where nothing is published)."""

    url: str
    name: str = ""  # file name on disk; from_dict fills in the URL's last path segment
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None


@dataclass(frozen=True)
class CorpusSpec:
    """A parallel corpus and its published line count. Each side is a member (`src`, `tgt`) of a
    downloaded archive (`file` for both, or `src_file`/`tgt_file`), or, without a member, a downloaded
    file of its own (`src_file`/`tgt_file`: plain text, .gz or .sgm), as Multi30k publishes them."""

    file: str | None = None
    src: str | None = None
    tgt: str | None = None
    lines: int | None = None
    src_file: str | None = None
    tgt_file: str | None = None

    def file_of(self, side: str) -> str | None:
        """The name under data.wmt.files that holds `side` ("src" or "tgt")."""
        return (self.src_file if side == "src" else self.tgt_file) or self.file

    def member_of(self, side: str) -> str | None:
        """`side`'s member inside its file, None when the file itself is that side's text."""
        return self.src if side == "src" else self.tgt


@dataclass(frozen=True)
class CleanConfig:
    min_len: int = 1
    max_len: int = 80
    max_ratio: float = 9.0
    invalid_utf8: str = "error"


@dataclass(frozen=True)
class WmtDataConfig:
    src_lang: str
    tgt_lang: str
    files: dict[str, DownloadFile]
    corpora: dict[str, CorpusSpec]
    splits: dict[str, tuple[str, ...]]
    clean: CleanConfig = field(default_factory=CleanConfig)
    download_dir: str = "results/downloads"
    mirror: str | None = None  # a folder of the published files under their names, looked in before downloading
    lock_file: str | None = None
    retries: int = 8
    timeout_s: float = 60.0

    def side_file(self, corpus: str, side: str) -> DownloadFile:
        """The downloaded file holding `side` ("src" or "tgt") of data.wmt.corpora[corpus]."""
        return self.files[self.corpora[corpus].file_of(side)]


@dataclass(frozen=True)
class EuroparlSample:
    """A window of sitting days and the per-bucket sample of its sentence pairs that is scored (or validated)."""

    first_day: dt.date
    last_day: dt.date
    per_bucket: int = 300
    bucket_width: int = 10
    max_len: int = 80  # source words of the longest sampled sentence
    seed: int = 1
    ids: str | None = None  # a committed sample (day, line per row): taken instead of drawn


@dataclass(frozen=True)
class EuroparlDataConfig:
    """Europarl release v1, one file a day (attnrepro.data.europarl): splits by date, samples per length bucket."""

    src_lang: str
    tgt_lang: str
    url: str  # the corpus root: a day file is URL/PATH, PATH as the manifest gives it
    manifest: str  # TSV: path, bytes, lines, sha256 of every day file
    first_day: dt.date
    last_day: dt.date
    valid: EuroparlSample
    test: EuroparlSample
    encoding: str = "iso-8859-1"
    clean: CleanConfig = field(default_factory=CleanConfig)
    download_dir: str = "results/downloads/europarl"
    mirror: str | None = None  # a folder laid out as the corpus root (PATH under it), looked in before downloading
    retries: int = 8
    timeout_s: float = 60.0

    @property
    def splits(self) -> dict[str, tuple[str, ...]]:
        """Split -> the raw corpora cleaned into it: each split is one corpus of its own days (as data.wmt.splits)."""
        return {split: (split,) for split in ("train", "valid", "test")}


@dataclass(frozen=True)
class TokenizerConfig:
    kind: str = "word"
    vocab_size: int = 30000
    src_vocab_size: int | None = None
    tgt_vocab_size: int | None = None
    shared: bool = False
    pretokenize: str = "none"
    train_split: str = "train"
    spm_model_type: str = "unigram"
    spm_sample_sentences: int = 2000000

    def side_vocab_size(self, side: str) -> int:
        """Words or pieces kept on `side` ("src" or "tgt")."""
        specific = self.src_vocab_size if side == "src" else self.tgt_vocab_size
        return self.vocab_size if specific is None else specific


@dataclass(frozen=True)
class TrainConfig:
    optimizer: str = "adadelta"
    lr: float = 1.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6
    rho: float = 0.95
    schedule: str = "constant"
    warmup_steps: int = 4000
    halving_start_epoch: float = 5.0
    halving_every_epochs: float = 0.5
    clip_norm: float = 1.0
    batch_tokens: int = 4000
    max_steps: int = 1000
    max_src_len: int = 50
    max_tgt_len: int | None = None  # None: max_src_len (filled in by __post_init__)
    label_smoothing: float = 0.0
    loss_norm: str = "token"  # token | sentence: the update's loss divided by its target tokens or sentences
    seed: int = 1
    log_every: int = 50
    valid_every: int = 500
    checkpoint_every: int = 500
    patience: int = 0  # validations in a row whose perplexity did not fall by min_delta (relative); 0 = never stop
    min_delta: float = 0.01
    plateau_decay: float = 0.5  # on a plateau, the learning rate's factor instead of stopping ...
    plateau_decays: int = 0  # ... this many times (0: stop at the first plateau)
    valid_length_filter: bool = False  # validate on the pairs within max_src_len / max_tgt_len only
    valid_average: str = "token"  # token (the log of the perplexity) | sentence (every sentence weighs the same)
    update_tokens: int = 0
    device: str = "auto"
    precision: str = "fp32"
    compile: bool = False
    step_compile: str = "none"  # none | fused | graphed: the 2014 decoders' teacher-forced steps (models.step_compile)
    loss_chunk_tokens: int = 0  # > 0: the loss of that many target positions at a time (training.objective)
    average_last: int = 1
    ema_decay: float = 0.0  # > 0: validate and translate an exponential moving average of the weights
    valid_bleu: bool = False

    def __post_init__(self) -> None:
        if self.max_tgt_len is None:  # the -30/-50 filter is on pairs: the target side defaults to the source's
            object.__setattr__(self, "max_tgt_len", self.max_src_len)

    def batches_per_update(self, world_size: int) -> int:
        """Batches in one update: one per rank, or enough for `update_tokens`, rounded up to a multiple of ranks."""
        wanted = max(1, math.ceil(self.update_tokens / self.batch_tokens))
        return math.ceil(wanted / world_size) * world_size


@dataclass(frozen=True)
class MeasuredThroughput:
    """A model's training throughput measured on one GPU (benchmarks/gpu_train.py): what `attnrepro estimate`
    prices it from instead of `throughput_tflops`. `train` holds the train settings it was measured with."""

    tokens_per_s: float  # padded source + target tokens per second per GPU, at the model's batch
    gpu: str
    source: str  # where the number comes from: a record of docs/measurements.md, a commit
    train: dict[str, Any] = field(default_factory=dict)  # e.g. {precision: bf16, compile: false}


@dataclass(frozen=True)
class ResourcesConfig:
    """What a model's train/translate jobs ask for: top-level `resources`, `models.NAME.resources` over it."""

    threads: int = 1
    gpu: int = 0
    gpu_model: str | None = None
    cpus_per_gpu: int | None = None
    mem_mb: int = 2000
    runtime: int | None = None  # minutes of a train job; None: the estimate (attnrepro.training.estimate)
    max_runtime: int = 2880
    translate_runtime: int = 120
    slurm_extra: tuple[str, ...] = ()
    signal_s: int = 600
    throughput_tflops: float = 40.0
    measured: MeasuredThroughput | None = None  # models.NAME.resources only; None: priced at throughput_tflops
    priority: int = 0  # Snakemake starts the higher first when jobs wait for cores; scores and figures: 0


@dataclass(frozen=True)
class ModelConfig:
    name: str
    arch: str
    label: str
    params: dict[str, Any] = field(default_factory=dict)
    train: TrainConfig = field(default_factory=TrainConfig)
    tokenizer: str = ""  # a name under `tokenizers` (from_dict resolves the default)
    search: dict[str, Any] = field(default_factory=dict)  # overrides of the top-level search
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)  # top-level, then the model's keys
    base: str = ""  # the configured model this is a run of: NAME of NAME_seed2; without seeds its own name

    def __post_init__(self) -> None:
        if not self.base:
            object.__setattr__(self, "base", self.name)  # frozen: set once, here


@dataclass(frozen=True)
class SearchConfig:
    beam: int = 5
    length_penalty: float = 0.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 64
    batch_tokens: int = 0  # source tokens x beam per batch; 0: batch_size sentences
    ban_unk: bool = False
    device: str = "auto"


@dataclass(frozen=True)
class EvaluateConfig:
    bucket_width: int = 10
    max_len: int = 80
    n_alignments: int = 4
    bootstrap_resamples: int = 1000  # 0: no confidence intervals
    bootstrap_seed: int = 12345  # sacreBLEU's default SACREBLEU_SEED
    bleu_lc_tok: bool = False  # also lowercased tokenized BLEU on lc.norm.tok text (the Multi30k literature's)
    length_bleu: str = "sacrebleu"  # sacrebleu | tokenized: the score of Fig. 2 and the by-length tables


@dataclass(frozen=True)
class Config:
    dataset: str
    tokenizers: dict[str, TokenizerConfig]
    models: dict[str, ModelConfig]
    synthetic: SyntheticDataConfig | None = None
    wmt: WmtDataConfig | None = None
    europarl: EuroparlDataConfig | None = None
    search: SearchConfig = field(default_factory=SearchConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)

    def model(self, name: str, any_seed: bool = False) -> ModelConfig:
        """The run `name`; with `any_seed`, a configured model trained once per seed gives its first run (what
        does not depend on the seed: its size, its settings)."""
        runs = [m for m in self.models.values() if m.base == name]
        if any_seed and name not in self.models and runs:
            return runs[0]
        if name not in self.models:
            known = ", ".join(sorted(self.models))
            seeds = f"; {name} is trained once per seed: name one of its runs" if runs else ""
            raise ConfigError(f"models: no model named {name!r} (configured: {known}){seeds}")
        return self.models[name]

    def tokenizer_named(self, name: str) -> TokenizerConfig:
        if name not in self.tokenizers:
            known = ", ".join(sorted(self.tokenizers))
            raise ConfigError(f"tokenizers: no tokenizer named {name!r} (configured: {known})")
        return self.tokenizers[name]

    def tokenizer_of(self, model: str) -> TokenizerConfig:
        """The tokenizer a model trains and translates with."""
        return self.tokenizers[self.model(model).tokenizer]

    @property
    def tokenizer(self) -> TokenizerConfig:
        """The only tokenizer, for configs that have exactly one."""
        if len(self.tokenizers) != 1:
            raise ConfigError(f"tokenizers: {len(self.tokenizers)} configured; name one (Config.tokenizer_of)")
        return next(iter(self.tokenizers.values()))

    def search_of(self, model: str) -> SearchConfig:
        """The top-level search with the model's own `search:` keys applied over it."""
        return replace(self.search, **self.model(model).search)

    @property
    def published(self) -> WmtDataConfig | EuroparlDataConfig | None:
        """The downloaded corpus (data.wmt or data.europarl): splits, cleaning, languages; None when generated."""
        return self.wmt if self.wmt is not None else self.europarl

    @property
    def languages(self) -> tuple[str, str]:
        """(source, target) language codes; the synthetic corpus is treated as English (Moses rules)."""
        data = self.published
        return (data.src_lang, data.tgt_lang) if data is not None else ("en", "en")

    @property
    def splits(self) -> tuple[str, ...]:
        """Names of the plain-text splits under results/{dataset}/data/."""
        return tuple(self.published.splits) if self.published is not None else ("train", "valid", "test")
