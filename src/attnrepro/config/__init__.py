"""The one place configuration is parsed: YAML -> JSON-schema validation -> frozen dataclasses.

`types.py` holds the frozen dataclasses; `load.py` reads a config file, validates it against the
schema and builds them, running the cross-key checks of `config/constraints.py` (which reads the
dataclasses from `types.py` and nothing from here: the imports run one way); `arch_params.py` writes the
schema's per-arch params from the registry (`attnrepro regenerate schema`). Everything is
re-exported here, so `from attnrepro.config import Config, load_config` is the one import a
module needs. Importing this package loads no torch and no matplotlib.
"""

from attnrepro.config import types
from attnrepro.config.load import (
    SCHEMA_PATH,
    anchor_paths,
    check_config_files,
    check_mirror,
    from_dict,
    load_config,
    lock_file_of,
    read_yaml,
    validate,
)
from attnrepro.config.types import *  # noqa: F403  (the dataclasses: types.__all__)
from attnrepro.errors import ConfigError

__all__ = [
    "SCHEMA_PATH",
    "ConfigError",
    "anchor_paths",
    "check_config_files",
    "check_mirror",
    "from_dict",
    "load_config",
    "lock_file_of",
    "read_yaml",
    "validate",
    *types.__all__,
]
