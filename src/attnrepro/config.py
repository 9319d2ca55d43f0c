"""The one place configuration is parsed: YAML -> JSON-schema validation -> frozen dataclasses.

The Snakefile validates `config` against `SCHEMA_PATH` (filling defaults); a run writes the
result to `results/{dataset}/config.yaml` when it starts, and every `attnrepro` verb reads that
file back through `load_config`, so jobs see exactly what the workflow validated. Constraints
between keys are checked by `attnrepro.constraints`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from attnrepro import constraints
from attnrepro.errors import ConfigError

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


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


@dataclass(frozen=True)
class Config:
    dataset: str
    tokenizers: dict[str, TokenizerConfig]
    models: dict[str, ModelConfig]
    synthetic: SyntheticDataConfig | None = None
    wmt: WmtDataConfig | None = None
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
    def languages(self) -> tuple[str, str]:
        """(source, target) language codes; the synthetic corpus is treated as English (Moses rules)."""
        return (self.wmt.src_lang, self.wmt.tgt_lang) if self.wmt is not None else ("en", "en")

    @property
    def splits(self) -> tuple[str, ...]:
        """Names of the plain-text splits under results/{dataset}/data/."""
        return tuple(self.wmt.splits) if self.wmt is not None else ("train", "valid", "test")


def _build(cls: type, values: dict[str, Any]) -> Any:
    """Dataclass from a validated mapping (the schema already rejected unknown keys)."""
    known = {f.name for f in fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return cls(**values)


def validate(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate `raw` against the schema, filling defaults in place; a violation raises `ConfigError` naming the key."""
    from jsonschema import ValidationError
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate as snakemake_validate

    _refuse_non_finite(raw)
    try:
        snakemake_validate(raw, str(SCHEMA_PATH))
    except WorkflowError as err:
        violation = err.__context__  # Snakemake raises its WorkflowError while handling jsonschema's
        if not isinstance(violation, ValidationError):
            raise
        key = ".".join(str(part) for part in violation.absolute_path) or "(top level)"
        raise ConfigError(f"{key}: {violation.message}") from err
    return raw


def _refuse_non_finite(value: Any, key: str = "") -> None:
    """A `ConfigError` naming the first number that is NaN or infinite (YAML's .nan, .inf), wherever it is:
    JSON Schema's bounds are comparisons, and NaN passes every comparison. `x-` anchors are checked where
    they are merged."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}: {value} is not a finite number")
    if isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, f"{key}[{i}]")
    for name, item in value.items() if isinstance(value, dict) else ():
        if not (key == "" and str(name).startswith("x-")):
            _refuse_non_finite(item, f"{key}.{name}" if key else str(name))


def _build_wmt(raw: dict[str, Any]) -> WmtDataConfig:
    """data.wmt with file names filled in (constraints.py checks its cross-references, naming the key)."""
    files = {}
    for key, f in raw["files"].items():
        name = f.get("name") or Path(urlparse(f["url"]).path).name
        if not name:
            raise ConfigError(f"data.wmt.files.{key}.url: {f['url']!r} has no file name; set data.wmt.files.{key}.name")
        files[key] = _build(DownloadFile, {**f, "name": name})
    corpora = {key: _build(CorpusSpec, c) for key, c in raw["corpora"].items()}
    splits = {split: tuple(names) for split, names in raw["splits"].items()}
    rest = {k: v for k, v in raw.items() if k not in ("files", "corpora", "splits", "clean")}
    return WmtDataConfig(files=files, corpora=corpora, splits=splits, clean=_build(CleanConfig, raw["clean"]), **rest)


def _model_resources(top: ResourcesConfig, own: dict[str, Any]) -> ResourcesConfig:
    """The top-level resources with the model's own keys over them."""
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in own.items()}
    if "measured" in values:
        values["measured"] = MeasuredThroughput(**values["measured"])
    return replace(top, **values)


def _seed_runs(models: dict[str, ModelConfig], seeds: list[int] | None) -> dict[str, ModelConfig]:
    """Without `seeds` the configured models; with them, NAME_seed{s} for every model and seed, train.seed = s.
    Distinct by construction: every model is expanded, a name ends in `_seed` + digits, the schema has no repeats."""
    if seeds is None:
        return models
    return {
        f"{name}_seed{seed}": replace(m, name=f"{name}_seed{seed}", train=replace(m.train, seed=seed))
        for name, m in models.items()
        for seed in seeds
    }


def from_dict(raw: dict[str, Any]) -> Config:
    """Validate a config mapping and build the dataclasses; checks what the schema cannot."""
    raw = validate(copy.deepcopy(raw))
    tokenizers = {name: _build(TokenizerConfig, t) for name, t in raw["tokenizers"].items()}
    resources = _build(ResourcesConfig, raw["resources"])
    models = {}
    for name, m in raw["models"].items():
        train = _build(TrainConfig, m["train"])
        tokenizer = m.get("tokenizer")
        if tokenizer is None:
            if len(tokenizers) != 1:
                raise ConfigError(
                    f"models.{name}.tokenizer: required when there are several tokenizers ({', '.join(tokenizers)})"
                )
            tokenizer = next(iter(tokenizers))
        if tokenizer not in tokenizers:
            raise ConfigError(
                f"models.{name}.tokenizer: no tokenizer named {tokenizer!r} (configured: {', '.join(tokenizers)})"
            )
        models[name] = ModelConfig(
            name=name,
            arch=m["arch"],
            label=m.get("label", name),
            params=dict(m["params"]),
            train=train,
            tokenizer=tokenizer,
            search=dict(m.get("search", {})),
            resources=_model_resources(resources, m.get("resources", {})),
        )
    synthetic = _build(SyntheticDataConfig, raw["data"]["synthetic"]) if "synthetic" in raw["data"] else None
    wmt = _build_wmt(raw["data"]["wmt"]) if "wmt" in raw["data"] else None
    cfg = Config(
        dataset=raw["dataset"],
        tokenizers=tokenizers,
        models=_seed_runs(models, raw.get("seeds")),  # constraints name the configured model (ModelConfig.base)
        synthetic=synthetic,
        wmt=wmt,
        search=_build(SearchConfig, raw["search"]),
        evaluate=_build(EvaluateConfig, raw["evaluate"]),
        resources=resources,
    )
    constraints.check(cfg)
    return cfg


def _refuse_duplicate_keys(loader: yaml.SafeLoader, node: yaml.Node, path: Path, key_path: str, seen: set) -> None:
    """Raise `ConfigError` for a key given twice in one mapping under `node`: YAML would keep the last silently.

    Keys a `<<` merge brings in are not duplicates: a key of its own beside them is the override it means.
    """
    if id(node) in seen:  # an alias: its anchor was checked where it was defined
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(loader, item, path, f"{key_path}[{i}]", seen)
    if not isinstance(node, yaml.MappingNode):
        return
    first_line: dict[Any, int] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            _refuse_duplicate_keys(loader, value_node, path, key_path, seen)
            continue
        key = loader.construct_object(key_node, deep=True)
        name = f"{key_path}.{key}" if key_path else str(key)
        line = key_node.start_mark.line + 1
        if isinstance(key, (str, int, float, bool)) and key in first_line:
            raise ConfigError(
                f"{path}:{line}: {name} is given twice (lines {first_line[key]} and {line}); "
                "YAML would keep only the second: rename or remove one"
            )
        if isinstance(key, (str, int, float, bool)):
            first_line[key] = line
        _refuse_duplicate_keys(loader, value_node, path, name, seen)


def read_yaml(path: str | Path) -> Any:
    """A config file's data (YAML, or JSON as Snakemake also accepts); a `ConfigError` naming the file (and
    line) when it is missing, not YAML, or gives a key twice in one mapping."""
    path = Path(path)
    try:
        loader = yaml.SafeLoader(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read: {err}") from err
    try:
        node = loader.get_single_node()
        if node is None:  # an empty file
            return None
        _refuse_duplicate_keys(loader, node, path, "", set())
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)  # where the parser stopped, for a syntax error
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from err
    finally:
        loader.dispose()


def check_config_files(paths: list[str | Path]) -> dict[Path, Any]:
    """Each config file Snakemake was given, read with `read_yaml`: Snakemake's own loader keeps the last of
    a key given twice without a word, so the Snakefile reads its files with ours before anything runs."""
    return {Path(path): read_yaml(path) for path in paths}


def lock_file_of(files: dict[Path, Any]) -> Path:
    """Where sizes and sha256 that data.wmt.files does not give are pinned: NAME.lock.yaml beside the first
    config file that names data.wmt.files, so that an overlay given after it (seeds, a mirror) reads and
    writes the same pins; beside the last config file when none names them."""
    for path, raw in files.items():
        data = raw.get("data") if isinstance(raw, dict) else None
        wmt = data.get("wmt") if isinstance(data, dict) else None
        if isinstance(wmt, dict) and "files" in wmt:
            return path.with_name(f"{path.stem}.lock.yaml")
    last = list(files)[-1] if files else Path("config.yaml")
    return last.with_name(f"{last.stem}.lock.yaml")


def check_mirror(cfg: Config) -> None:
    """data.wmt.mirror must be a folder when the workflow is parsed, so that a dry run names a mistyped one
    (the download job checks it again: a folder can go away between the plan and the run)."""
    mirror = cfg.wmt.mirror if cfg.wmt is not None else None
    if mirror is not None and not Path(mirror).is_dir():
        where = "" if Path(mirror).is_absolute() else f" (relative to {Path.cwd()})"
        raise ConfigError(f"data.wmt.mirror: {mirror} is not a folder{where}")


def load_config(path: str | Path) -> Config:
    """Read, validate and build a config file; every problem with it is a `ConfigError` naming the file."""
    path = Path(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return from_dict(raw)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from err
