"""Settings read from the environment, in this one place."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Where compiled rule programs and generated kernels are cached (never in the repository)."""
    explicit = os.environ.get("TPRULES_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tprules"


def default_rules_dir() -> Path:
    return PROJECT_ROOT / "rules"


def shim_library_dir() -> Path:
    return PROJECT_ROOT / "facts" / "shims"


DEFAULT_SHIM = "cuda-lane:h100:Bf16"
