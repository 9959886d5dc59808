"""glibc's malloc, read and steered from Python: what the process's native heap holds.

Why this exists: under minutes of mixed load the service's RSS kept growing while
Python's own heap (``tracemalloc``) stayed flat and RocksDB's block cache, memtables and
table readers stayed within their limits (docs/performance.md, "Soak"). The rest is memory that
RocksDB's threads took from glibc's malloc: each thread may get an arena of its own (up
to eight per core), and memory freed inside an arena is kept for reuse, not given back,
so RSS measures the high-water mark of every arena, not what is in use.

``malloc_usage`` reads ``mallinfo2`` (glibc 2.33 or later) for the ``/metrics`` gauges,
``limit_arenas`` sets ``M_ARENA_MAX`` (the ``MALLOC_ARENA_MAX`` variable, for arenas made
after the call: call it before threads start) and ``trim`` calls ``malloc_trim(0)``,
which returns the free pages of every arena to the system. Elsewhere (musl, macOS, an
older glibc) each answers None or False and does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import NamedTuple

import msgspec

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


class MemorySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The settings section ``memory``: how the service steers glibc's malloc."""

    # at most this many malloc arenas (0: glibc's own limit, eight per core); 2 kept RSS
    # 15 to 30 MB lower in soaks but cost batch requests about a tenth of their rate
    malloc_arena_max: int = 0
    # give free heap pages back to the system this often (0: never)
    malloc_trim_interval_ms: int = 30_000


class _MallInfo2(ctypes.Structure):
    _fields_ = [  # struct mallinfo2, every field a size_t
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes taken from the system by sbrk and arena heaps (not mmap)
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # bytes in chunks mmapped one each (large allocations)
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use in the arenas
            "fordblks",  # bytes free in the arenas (kept by malloc, counted in RSS when touched)
            "keepcost",
        )
    ]


class MallocUsage(NamedTuple):
    in_use_bytes: int  # allocated and not freed: arenas plus single mmapped chunks
    free_bytes: int  # freed into the arenas and kept by malloc
    mmapped_bytes: int  # of in_use: large allocations mmapped one each


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc with ``mallinfo2``; loaded on first use only."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mallinfo2", "malloc_trim", "mallopt")):
        return None
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


def malloc_usage() -> MallocUsage | None:
    libc = _glibc()
    if libc is None:
        return None
    info = libc.mallinfo2()
    return MallocUsage(info.uordblks + info.hblkhd, info.fordblks, info.hblkhd)


def limit_arenas(count: int) -> bool:
    """At most ``count`` malloc arenas for the threads started from now on; True if set."""
    libc = _glibc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, count) == 1


def trim() -> bool:
    """Give every arena's free pages back to the system; True if any memory was released."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1
