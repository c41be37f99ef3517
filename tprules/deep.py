"""Deeply nested input (a 5,000-term `1 + 1 + ...`) without `RecursionError`.

The parser, the checker and the engines walk terms recursively, which is natural for
expressions people write. When one is nested deeper than Python's recursion limit, the
same work is done again in a thread with a large stack and a high limit.
"""

from __future__ import annotations

import sys
import threading

_STACK = 512 * 1024 * 1024  # virtual: only the pages a deep walk touches are used
_LIMIT = 1_000_000


def deep(fn, *args, **kwargs):
    """`fn(*args, **kwargs)`, retried on a large stack if it recursed too deep."""
    try:
        return fn(*args, **kwargs)
    except RecursionError:
        return on_large_stack(fn, *args, **kwargs)


def on_large_stack(fn, *args, **kwargs):
    """Run `fn` in a thread with a large stack and recursion limit; return or raise what it does."""
    if getattr(_local, "large", False):
        return fn(*args, **kwargs)
    result: dict = {}

    def work():
        _local.large = True
        try:
            result["value"] = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = err

    old_stack, old_limit = threading.stack_size(), sys.getrecursionlimit()
    threading.stack_size(_STACK)
    sys.setrecursionlimit(max(old_limit, _LIMIT))
    try:
        worker = threading.Thread(target=work, name="tprules-deep")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result["value"]


_local = threading.local()
