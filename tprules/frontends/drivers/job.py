"""One import job: what every driver (`import hf`, its decode step, `import torch`) carries
through its passes, set up once by `prepare` (a pretrained model read by `pretrained`), and
the report it ends with (built.written).

>>> with prepare("/tmp/llama-tp2", tp=2, batch=1, seq=8) as job:     # doctest: +SKIP
...     pretrained(job, "/tmp/tiny-llama")                          # the model read, its plan applied
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ..sharding.weights import Heads

if TYPE_CHECKING:
    from ...progress import Progress
    from ..layers.kinds import LayerKinds


@dataclass
class ImportReport:
    out: Path
    architecture: str
    tp: int
    statements: int
    candidates: int
    tensors: int
    folds: int
    folded: list[str]  # constant subgraphs folded into input tensors
    seconds: dict[str, float] = field(default_factory=dict)
    kinds: int | None = None  # layer kinds traced once each (None: every layer traced)
    traced: int | None = None  # decoder layers traced
    collectives: dict[str, int] | None = None  # import torch: how many folds of each collective kind
    inputs: dict[str, list[int]] | None = None  # import torch: each program input's shape
    drawn: bool = False  # import torch: the check's second input drawn by tprules (inputs() takes no seed)
    ep: bool = False  # import hf --ep: the expert-parallel plan
    plan_from: str | None = None  # import hf: the plan's origin, the transformers release or --plan (plan_from)
    replicated: tuple[str, ...] = ()  # import hf: experts modules the plan leaves whole on every chip

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())


class Clock:
    """Seconds by phase, each `tick` closing the phase since the last."""

    def __init__(self):
        self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def tick(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now

    def move(self, phase: str, to: str, seconds: float) -> None:
        """`seconds` of `phase` counted as `to` instead (a part timed inside another)."""
        if seconds:
            self.seconds[phase] -= seconds
            self.seconds[to] = self.seconds.get(to, 0.0) + seconds


@dataclass
class ImportJob:
    """One import: its folder, chips and traced sizes, then (as the driver reads them) the
    source (a pretrained.Source or a torch_plan.Recipe: both name the model by `architecture`
    and place an error by `where()`), the model, its attention heads and its layer kinds.
    A context: leaving it closes the progress line."""

    out: Path
    tp: int
    batch: int | None  # import torch: None where inputs() chooses
    seq: int | None  # the traced tokens: the prefill's sequence, a decode step's tokens
    seed: int
    no_data: bool
    verify: bool  # the check on a second input (never under no_data: there is nothing to run)
    clock: Clock
    progress: Progress
    src: Any = None
    model: Any = None
    heads: Heads = field(default_factory=lambda: Heads(None, None))  # a pretrained model's, where it has them
    kinds: LayerKinds | None = None  # None: every layer traced

    @property
    def tokens(self) -> tuple[int, int]:
        """(batch, seq) of the traced tokens of a pretrained model (import hf's, its decode
        step's: always given; import torch's inputs() may choose its own)."""
        assert self.batch is not None and self.seq is not None
        return self.batch, self.seq

    @property
    def stamps(self) -> bool:
        """Whether each layer kind is traced once and every layer stamped (layers/stamp.py)."""
        return self.kinds is not None and len(self.kinds.order) < self.kinds.count

    def __enter__(self) -> ImportJob:
        return self

    def __exit__(self, *_) -> None:
        self.progress.close()


def prepare(out, tp: int, batch: int | None, seq: int | None, seed: int = 0, no_data: bool = False,
            verify: bool = True, progress=None) -> ImportJob:
    """The set-up every driver shares, before any model is read: a count under 1 refused as
    a usage error (None: not given), DIR checked (write.check_out), the clock started."""
    from ...progress import Progress
    from .write import check_out

    clock = Clock()
    for flag, value in (("--tp", tp), ("--seq", seq), ("--batch", batch)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} takes a count of at least 1; got {value}")
    check_out(Path(out))
    return ImportJob(Path(out), tp, batch, seq, seed, no_data, verify and not no_data, clock,
                     progress or Progress(False))


def pretrained(job: ImportJob, source, layers: int | None = None, plan=None, ep: bool = False,
               experts: str | None = None, check: Callable | None = None) -> None:
    """The Hugging Face model folder `source` read into `job` (import hf's and its decode
    step's): its plan (`ep`: the expert-parallel one), heads and experts checked against the
    chips, the model built (`experts`: its mixture of experts' form, pretrained.EXPERTS) and
    the plan applied. `check(src)`: a driver's own check of the source before the model."""
    from ..sharding.weights import check_experts, check_heads
    from ..source.pretrained import EXPERTS, apply_plan, build_model, head_counts, read_source, replicated_experts
    from ..source.startup import load_extra

    load_extra()
    job.clock.tick("load")  # torch and transformers (source/startup.py)
    src = read_source(source, layers, plan, ep)
    if check is not None:
        check(src)
    heads = Heads(*head_counts(src.config))
    if not ep:  # the EP plan splits no attention heads
        check_heads(src, heads, job.tp)
    check_experts(src, job.tp if ep else None)
    _quiet_transformers()
    model = build_model(src, job.seed, job.no_data, experts or EXPERTS[0])
    apply_plan(src, model)
    src.replicated = tuple(replicated_experts(src, model))
    job.clock.tick("model")
    job.src, job.model, job.heads = src, model, heads


def versions() -> dict:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def _quiet_transformers() -> None:
    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="copyreg")


__all__ = ["Clock", "ImportJob", "ImportReport", "prepare", "pretrained", "versions"]
