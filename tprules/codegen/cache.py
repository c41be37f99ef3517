"""Generated kernel modules live under `tprules.config.cache_dir()/kernels/`, named by the
hash of their source: equal kernels are written and compiled once, and Numba's own cache
(`cache=True`) keeps their machine code beside them across runs.

Every file lands whole or not at all: a source is written to a temporary name and renamed,
as Numba writes its index (`.nbi`) and machine code (`.nbc`) files, so a process killed
mid-compile (a pool's worker, runtime/devices/pool.py) leaves no half-written entry, and two
processes compiling the same program at once each find either nothing or a whole file.
An entry that is whole but not Numba's (garbage in an index, random bytes in a `.nbc`) fails
to load: `compiled` drops that source's entries, says so in one warning line, and compiles
it again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

from ..config import cache_dir

_loaded: dict[str, object] = {}
_lock = threading.Lock()


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def folder(flavour: str) -> Path:
    return cache_dir() / "kernels" / flavour


def load(source: str, flavour: str):
    """The module of a generated source (written once, imported once per process)."""
    d = digest(source)
    name = f"tprules_kernel_{flavour}_{d}"
    where = folder(flavour)
    path = where / f"k_{d}.py"
    with _lock:
        if str(path) in _loaded:  # (by path: a process may change its cache folder, as tests do)
            return _loaded[str(path)]
        where.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != source:
            tmp = where / f".k_{d}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(source)
            os.replace(tmp, path)  # atomic: another process may write the same file
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None  # a .py file has both
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _loaded[str(path)] = module
        return module


def sweep(flavour: str) -> None:
    """Delete the temporary files of sources that processes no longer running were writing
    (a killed worker's: never read, as their names are no module's)."""
    for tmp in folder(flavour).glob(".k_*.tmp"):
        try:
            pid = int(tmp.name.split(".")[2])
            os.kill(pid, 0)  # raises where no such process runs
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (ValueError, IndexError, PermissionError):
            continue


def machine_code(source: str, flavour: str) -> list[Path]:
    """Numba's cache files (index and machine code) of a source, where there are any."""
    pycache = folder(flavour) / "__pycache__"
    return sorted(pycache.glob(f"k_{digest(source)}.*.nb[ic]")) if pycache.is_dir() else []


def compiled(source: str, flavour: str, signature: tuple, warn=None):
    """The source's `kernel`, compiled for `signature` now (or loaded from Numba's cache). A
    cache entry that does not load is dropped and the kernel compiled again; `warn(line)`
    (default: stderr) hears of it, once."""
    fn = load(source, flavour).kernel
    try:
        fn.compile(signature)
        return fn
    except Exception:
        dropped = machine_code(source, flavour)
        if not dropped:
            raise  # no cache entry to blame: the compile itself failed
    for path in dropped:
        path.unlink(missing_ok=True)
    forget(source, flavour)
    fn = load(source, flavour).kernel  # a fresh dispatcher: the broken one may hold what it read
    fn.compile(signature)
    line = (f"tprules: warning: dropped a corrupt kernel cache entry ({dropped[0].parent}/"
            f"k_{digest(source)}.*, {len(dropped)} files) and compiled it again")
    (warn or (lambda text: print(text, file=sys.stderr)))(line)
    return fn


def forget(source: str, flavour: str) -> None:
    """Drop the source's module from this process (it is imported afresh next time)."""
    with _lock:
        _loaded.pop(str(folder(flavour) / f"k_{digest(source)}.py"), None)
        sys.modules.pop(f"tprules_kernel_{flavour}_{digest(source)}", None)


def compile_source(source: str, flavour: str, spec: tuple[tuple[str, int], ...]) -> tuple[float, str | None]:
    """In a worker process (runtime/devices/pool.py): compile `source` for the signature
    `spec` ((numpy dtype, ndim) per argument) into the shared cache; (seconds, None), or
    (seconds, the error's first line). Here, not in the pool's module: a worker imports only this."""
    started = time.perf_counter()
    try:
        compiled(source, flavour, signature_of(spec), warn=lambda line: None)
    except Exception as err:  # noqa: BLE001 - one line; the caller compiles it again to name the group
        first = next((line for line in str(err).splitlines() if line.strip()), "")
        return time.perf_counter() - started, f"{type(err).__name__}: {first}"
    return time.perf_counter() - started, None


def signature_of(spec) -> tuple:
    """Numba's signature of C-contiguous arrays, (numpy dtype, ndim) each."""
    import numpy as np
    from numba import from_dtype, types

    return tuple(types.Array(from_dtype(np.dtype(d)), ndim, "C") for d, ndim in spec)
