"""Generated kernel modules live under `tprules.config.cache_dir()/kernels/`, named by the
hash of their source: equal kernels are written and compiled once, and Numba's own cache
(`cache=True`) keeps their machine code beside them across runs."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading

from ..config import cache_dir

_loaded: dict[str, object] = {}
_lock = threading.Lock()


def load(source: str, flavour: str):
    """The module of a generated source (written once, imported once per process)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    name = f"tprules_kernel_{flavour}_{digest}"
    with _lock:
        if name in _loaded:
            return _loaded[name]
        folder = cache_dir() / "kernels" / flavour
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"k_{digest}.py"
        if not path.exists() or path.read_text() != source:
            tmp = folder / f".k_{digest}.{os.getpid()}.tmp"
            tmp.write_text(source)
            os.replace(tmp, path)  # atomic: another process may write the same file
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None  # a .py file has both
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _loaded[name] = module
        return module
