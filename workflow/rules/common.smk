# Shared names for every rule file. The validated config is written once to
# results/{dataset}/config.yaml, which every `attnrepro` verb reads back.

import yaml

from attnrepro.config import from_dict

CFG = from_dict(config)  # semantic checks beyond the schema, before any job runs
DATASET = CFG.dataset
RESULTS = f"results/{DATASET}"
MODELS = list(CFG.models)
RESOLVED_CONFIG = f"{RESULTS}/config.yaml"


def _write_resolved_config(path):
    """Write the validated config (defaults filled) only when it changed, keeping mtimes stable."""
    text = yaml.safe_dump(config, sort_keys=False)
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


_write_resolved_config(RESOLVED_CONFIG)


wildcard_constraints:
    dataset=DATASET,
    model="|".join(MODELS),
    split="train|valid|test",
