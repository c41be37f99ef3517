"""Write an imported program folder, whole or not at all.

Everything goes into a temporary folder beside DIR, renamed into place at the end, so a
failure leaves no partial DIR. A DIR that exists is replaced only when it holds an
earlier import (its `source.json`). The facts are the program's `Facts` (program/facts.py),
its candidates among them (program/candidates.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ...paths import display_path
from ...program.facts import Facts
from ..errors import ImportFailed

MARKER = "source.json"


def check_out(out: Path) -> None:
    if out.exists() and not (out / MARKER).is_file() and (not out.is_dir() or any(out.iterdir())):
        raise ImportFailed(f"--out {display_path(out)} exists and holds no earlier import ({MARKER}); "
                           "remove it or choose another folder")


def write_folder(out: Path, facts: Facts, data: dict[str, np.ndarray], expected: dict[str, np.ndarray],
                 source: dict, validate=None, progress=None) -> None:
    """The program's `facts`, data/, expected/ and source.json into `out`, atomically (after
    `validate(tmp)`)."""
    out = Path(out)
    check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if progress is not None:
            progress.phase("write facts", 1)
        facts.write(tmp)
        if progress is not None:
            progress.advance()
            progress.phase("check the program", 1)
        if data:
            (tmp / "data").mkdir(exist_ok=True)
            for name, array in data.items():
                np.save(tmp / "data" / f"{name}.npy", array)
        if expected:
            (tmp / "expected").mkdir()
            for name, array in expected.items():
                np.save(tmp / "expected" / f"{name}.npy", array)
        (tmp / MARKER).write_text(json.dumps(source, indent=2) + "\n")
        if validate is not None:
            validate(tmp)
        if progress is not None:
            progress.advance()
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "dir")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
