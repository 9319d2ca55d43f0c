"""The one place configuration is parsed: YAML -> JSON-schema validation -> frozen dataclasses.

The Snakefile validates `config` against `SCHEMA_PATH` (filling defaults) and writes the
result to `results/{dataset}/config.yaml`; every `attnrepro` verb reads that file back
through `load_config`, so jobs see exactly what the workflow validated.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration that passed the schema but cannot work (names the key)."""


@dataclass(frozen=True)
class SyntheticDataConfig:
    seed: int = 1
    n_train: int = 150000
    n_valid: int = 500
    test_per_bucket: int = 100
    max_train_len: int = 50
    max_test_len: int = 80
    bucket_width: int = 10
    n_nouns: int = 120
    n_adjectives: int = 60
    n_transitive: int = 40
    n_intransitive: int = 20


@dataclass(frozen=True)
class TokenizerConfig:
    kind: str = "word"
    vocab_size: int = 30000
    shared: bool = False
    spm_model_type: str = "unigram"
    spm_sample_sentences: int = 2000000


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
    label_smoothing: float = 0.0
    seed: int = 1
    log_every: int = 50
    valid_every: int = 500
    checkpoint_every: int = 500


@dataclass(frozen=True)
class ModelConfig:
    name: str
    arch: str
    label: str
    params: dict[str, Any] = field(default_factory=dict)
    train: TrainConfig = field(default_factory=TrainConfig)


@dataclass(frozen=True)
class SearchConfig:
    beam: int = 5
    length_penalty: float = 0.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 64


@dataclass(frozen=True)
class EvaluateConfig:
    bucket_width: int = 10
    max_len: int = 80
    n_alignments: int = 4


@dataclass(frozen=True)
class ResourcesConfig:
    threads: int = 1
    gpu: int = 0
    mem_mb: int = 2000
    runtime: int = 60


@dataclass(frozen=True)
class Config:
    dataset: str
    tokenizer: TokenizerConfig
    models: dict[str, ModelConfig]
    synthetic: SyntheticDataConfig | None = None
    search: SearchConfig = field(default_factory=SearchConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)

    def model(self, name: str) -> ModelConfig:
        if name not in self.models:
            known = ", ".join(sorted(self.models))
            raise ConfigError(f"models: no model named {name!r} (configured: {known})")
        return self.models[name]


def _build(cls: type, values: dict[str, Any]) -> Any:
    """Dataclass from a validated mapping (the schema already rejected unknown keys)."""
    known = {f.name for f in fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ConfigError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return cls(**values)


def validate(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate `raw` against the schema, filling defaults in place; raises naming the key."""
    from snakemake.utils import validate as snakemake_validate

    snakemake_validate(raw, str(SCHEMA_PATH))
    return raw


def from_dict(raw: dict[str, Any]) -> Config:
    """Validate a config mapping and build the dataclasses; checks what the schema cannot."""
    raw = validate(copy.deepcopy(raw))
    models = {}
    for name, m in raw["models"].items():
        train = _build(TrainConfig, m["train"])
        models[name] = ModelConfig(
            name=name,
            arch=m["arch"],
            label=m.get("label", name),
            params=dict(m["params"]),
            train=train,
        )
    synthetic = _build(SyntheticDataConfig, raw["data"]["synthetic"]) if "synthetic" in raw["data"] else None
    cfg = Config(
        dataset=raw["dataset"],
        tokenizer=_build(TokenizerConfig, raw["tokenizer"]),
        models=models,
        synthetic=synthetic,
        search=_build(SearchConfig, raw["search"]),
        evaluate=_build(EvaluateConfig, raw["evaluate"]),
        resources=_build(ResourcesConfig, raw["resources"]),
    )
    for name, m in models.items():
        if m.arch == "transformer" and m.params.get("share_embeddings", True) and not raw["tokenizer"]["shared"]:
            raise ConfigError(
                f"models.{name}.params.share_embeddings needs tokenizer.shared: true (one vocabulary, Vaswani §3.4)"
            )
    if synthetic is not None:
        for name, m in models.items():
            if m.train.max_src_len > synthetic.max_train_len:
                raise ConfigError(
                    f"models.{name}.train.max_src_len={m.train.max_src_len} exceeds "
                    f"data.synthetic.max_train_len={synthetic.max_train_len}"
                )
    return cfg


def load_config(path: str | Path) -> Config:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        return from_dict(raw)
    except Exception as err:
        raise ConfigError(f"{path}: {err}") from err
