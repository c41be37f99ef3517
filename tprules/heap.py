"""glibc's allocator asked to keep freed memory for reuse (`mallopt`), for the commands whose
numpy arrays of a few MiB are allocated and freed thousands of times: above its mmap
threshold each array gets pages of its own, faulted in again on every allocation."""

from __future__ import annotations

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def keep_freed_memory(mmap_below: int, keep: int) -> bool:
    """Serve allocations below `mmap_below` bytes from the heap rather than fresh mappings,
    and keep up to `keep` bytes of it freed; False where there is no glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")  # (ctypes.util.find_library would start a process)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_below)) and bool(libc.mallopt(M_TRIM_THRESHOLD, keep))
    except (OSError, AttributeError):
        return False
