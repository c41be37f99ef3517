"""Compare the device's program outputs with the reference.

The error of an output is its largest absolute difference from the reference, over every
chip that holds it (a spine tensor must agree on all of them), relative to the largest
magnitude of the reference output. When the program folder holds `expected/<tensor>.npy`
(an import's torch forward), the output is also compared with it, with the same
tolerance, and both must hold. Tolerances: f32 1e-4; an output that depends on a
quantized read 1e-3; f16 and bf16 a few units of their precision; integers off by at most 1.
Infinities and NaNs must sit where the reference has them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import IllFormed
from ...pos import Pos
from ...program.model import Program
from .reference import Values

TOLERANCE = {"f32": 1e-4, "f16": 4e-3, "bf16": 3e-2}
QUANTIZED_TOLERANCE = 1e-3


@dataclass(frozen=True)
class OutputCheck:
    tensor: str
    shape: tuple[int, ...]
    dtype: str
    chips: tuple[int, ...]  # where it was compared
    max_abs_err: float
    max_rel_err: float
    tolerance: float
    ok: bool  # against the reference, and against expected/ when there is one
    expected: "ExpectedCheck | None" = None

    def to_json(self) -> dict:
        return {"tensor": self.tensor, "shape": list(self.shape), "dtype": self.dtype, "chips": list(self.chips),
                "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err, "tolerance": self.tolerance,
                "ok": self.ok, "expected": self.expected.to_json() if self.expected else None}


@dataclass(frozen=True)
class ExpectedCheck:
    """An output against `expected/<tensor>.npy` (e.g. torch's own forward of an imported model)."""

    path: str
    max_abs_err: float
    max_rel_err: float
    ok: bool

    def to_json(self) -> dict:
        return {"path": self.path, "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err, "ok": self.ok}


def tolerance(prog: Program, tensor: str) -> float:
    dtype = prog.tensors[tensor].dtype
    if dtype in ("i8", "i32", "i64"):
        return 1.0  # absolute, for integers
    tol = TOLERANCE[dtype]
    return max(tol, QUANTIZED_TOLERANCE) if prog.quantized_path(tensor) else tol


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max absolute error, that error relative to max |want|)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    finite = np.isfinite(want)
    same_special = (~finite) & ((got == want) | (np.isnan(got) & np.isnan(want)))
    if np.any(~finite & ~same_special) or np.any(finite & ~np.isfinite(got)):
        return float("inf"), float("inf")
    if not finite.any():
        return 0.0, 0.0
    diff = float(np.max(np.abs(got[finite] - want[finite])))
    scale = float(np.max(np.abs(want[finite])))
    return diff, (diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf")))


def compare(prog: Program, outputs: dict[str, dict[int, np.ndarray]], ref: Values) -> list[OutputCheck]:
    checks = []
    for t in prog.outputs:
        info = prog.tensors[t]
        want = ref.get(t, info.home)
        worst_abs, worst_rel = 0.0, 0.0
        for _chip, got in sorted(outputs[t].items()):
            a, r = errors(got, want)
            worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        tol = tolerance(prog, t)
        ok = _within(info.dtype, worst_abs, worst_rel, tol)
        expected = _expected(prog, t, outputs[t], tol)
        ok = ok and (expected is None or expected.ok)
        checks.append(OutputCheck(t, info.shape, info.dtype, tuple(sorted(outputs[t])), worst_abs, worst_rel, tol, ok,
                                  expected))
    return checks


def _within(dtype: str, abs_err: float, rel_err: float, tol: float) -> bool:
    return abs_err <= tol if dtype in ("i8", "i32", "i64") else rel_err <= tol


def _expected(prog: Program, t: str, per_chip: dict[int, np.ndarray], tol: float) -> ExpectedCheck | None:
    path = prog.directory / "expected" / f"{t}.npy"
    if not path.exists():
        return None
    display = f"{prog.display}/expected/{t}.npy"
    try:
        want = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise IllFormed(f"cannot read the expected value of {t}: {err}", Pos(display, 0)) from None
    if tuple(want.shape) != prog.tensors[t].shape:
        raise IllFormed(f"expected {t} has shape {list(want.shape)}; the facts say {list(prog.tensors[t].shape)}",
                        Pos(display, 0))
    worst_abs = worst_rel = 0.0
    for got in per_chip.values():
        a, r = errors(got, want)
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
    return ExpectedCheck(display, worst_abs, worst_rel, _within(prog.tensors[t].dtype, worst_abs, worst_rel, tol))
