"""The `tprules` command line (SPEC §5). Exit status: 0 success, 1 a comparison failed,
2 bad input (one line per problem on stderr, naming file and line, and no other output)."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from .commands import COMMANDS
from .config import SettingError
from .errors import BadInput
from .heap import keep_freed_memory

SHOW_CHOICES = ("ast", "strata", "code", "plan", "cost", "timing", "traceback", "kernels")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: usage: {message}\n")


class _Version(argparse.Action):
    """`--version`: the version, and where the default rules and the shim library come from."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .rulefolder import describe

        try:
            text = describe()
        except (BadInput, SettingError) as err:
            parser.exit(2, f"{err}\n")
        sys.stdout.write(text)
        parser.exit(0)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `only`, just that command's options (the others' modules
    are then not imported: `check` starts faster)."""
    parser = _Parser(prog="tprules", description="Fusion legality for tensor-parallel programs, as Datalog rules.")
    parser.add_argument("--version", action=_Version, help="print the version and where the default rules come from")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in [only] if only in COMMANDS else COMMANDS:
        module = importlib.import_module(f".commands.{name}", __package__)
        command = module.add_parser(sub)
        command.set_defaults(handler=module.run)
    return parser


def parse_show(text: str | None) -> frozenset[str]:
    """The debug switches of `--show=a,b`: read here, nowhere else."""
    if not text:
        return frozenset()
    wanted = frozenset(w.strip() for w in text.split(",") if w.strip())
    unknown = wanted - set(SHOW_CHOICES)
    if unknown:
        from .errors import UsageError

        raise UsageError(f"--show takes {', '.join(SHOW_CHOICES)}; got {', '.join(sorted(unknown))}")
    return wanted


def main(argv: list[str] | None = None) -> int:
    # A command builds its facts and model once and keeps them to the end: the cyclic
    # garbage collector would only re-scan millions of live tuples.
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


# The commands that judge or plan: short runs over numpy columns, with no linear algebra.
_BATCH = ("check", "plan", "why", "lint")


def _batch_process() -> None:
    """Set a judging command's process up for what it does.

    - numpy need not start OpenBLAS's thread pool when it loads (30 to 40 ms of CPU in
      every run, one thread per core); a setting of the user's own is kept.
    - glibc's allocator gives each array above 128 KiB pages of its own, faulted in and
      returned on every allocation until its threshold has grown; judging allocates
      and frees arrays of a few MiB thousands of times, so they come from the heap, and
      the heap is kept (a process of a second, whose peak is what it holds anyway).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read once, when numpy is first imported
    keep_freed_memory(32 << 20, 64 << 20)  # arrays below 32 MiB from the heap; keep up to 64 MiB of it


def entry() -> None:
    """The `tprules` command (and `python -m tprules`)."""
    if sys.argv[1:2] and sys.argv[1] in _BATCH:
        _batch_process()
    status = main()
    # At exit Python collects garbage once more over every object still alive: for a
    # model-sized program, the facts and the model, about 0.1 to 0.5 s of nothing found.
    # Frozen objects are left out of that collection; the interpreter still shuts down
    # normally (buffers flushed, atexit handlers run).
    gc.freeze()
    if sys.argv[1:2] == ["import"] and sys.getprofile() is None and sys.gettrace() is None:
        _end_now(status)  # (a profiler or coverage writes its report at the normal exit)
    sys.exit(status)


def _end_now(status: int) -> None:
    """End an import's process without tearing torch's and transformers' thousands of
    modules down one by one (0.15 s): its folder is written and closed, and nothing of
    it waits for an exit handler."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(status)


def _main(argv: list[str] | None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words else None)  # the command comes first
    args = parser.parse_args(argv)
    show: frozenset[str] = frozenset()
    try:
        show = parse_show(getattr(args, "show", None))
        args.show = show
        return int(args.handler(args) or 0)
    except (BadInput, SettingError) as err:  # (a setting's error is config.py's, on the floor)
        sys.stdout.flush()
        print(str(err), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # noqa: BLE001 - the last line of defence: no tracebacks for users
        if "traceback" in show:
            raise
        print(f"tprules: internal error: {type(err).__name__}: {err} (rerun with --show=traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    entry()
