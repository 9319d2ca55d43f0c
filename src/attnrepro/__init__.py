"""attnrepro: the history of attention in neural machine translation, reproduced side by side."""

__version__ = "0.1.0"
