"""glibc's malloc seen and steered through ``app.native_memory``, on this machine's glibc.

Each test reads the real allocator: memory malloc'd through ctypes shows in the gauge's
numbers, a trim gives freed pages back (RSS drops), and the arena limit holds for
threads started after it (counted in ``malloc_info``'s report, in a child process so
this process's arenas stay as they are).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from app import native_memory
from app.config import load_settings
from app.native_memory import MemorySettings
from storage.errors import ConfigError

MIB = 1 << 20
ON_GLIBC = platform.libc_ver()[0] == "glibc"


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_on_glibc_every_call_is_available() -> None:
    """This machine and CI run glibc: a None here would hide the gauges silently."""
    assert ON_GLIBC, platform.libc_ver()
    assert native_memory.malloc_usage() is not None


def test_memory_in_use_and_freed_moves_the_usage() -> None:
    libc = _libc()
    before = native_memory.malloc_usage()
    assert before is not None
    chunks = [libc.malloc(64 << 10) for _ in range(320)]  # 20 MiB below the mmap threshold
    held = native_memory.malloc_usage()
    for chunk in chunks:
        libc.free(chunk)
    after = native_memory.malloc_usage()
    assert held is not None and after is not None
    assert held.in_use_bytes - before.in_use_bytes >= 20 * MIB
    assert held.in_use_bytes - after.in_use_bytes >= 20 * MIB


def test_a_trim_gives_the_free_pages_between_live_chunks_back() -> None:
    """Free memory between chunks still in use stays in RSS (free() can only give back the
    top of a heap); ``trim`` releases its pages."""
    libc = _libc()
    chunks = [libc.malloc(96 << 10) for _ in range(1000)]  # about 94 MiB
    for chunk in chunks:
        ctypes.memset(chunk, 1, 96 << 10)  # touched: resident
    kept = chunks[9::10]  # one chunk in ten stays: the free ones cannot shrink the heap
    for chunk in chunks:
        if chunk not in kept:
            libc.free(chunk)
    try:
        usage = native_memory.malloc_usage()
        assert usage is not None and usage.free_bytes >= 80 * MIB
        before = _rss_bytes()
        assert native_memory.trim() is True
        assert before - _rss_bytes() >= 60 * MIB
    finally:
        for chunk in kept:
            libc.free(chunk)


ARENA_PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, sys, tempfile, threading
    from app import native_memory
    if sys.argv[1] != "0":
        assert native_memory.limit_arenas(int(sys.argv[1]))
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    go, done = threading.Barrier(9), threading.Barrier(9)
    def work():
        go.wait()  # all eight allocate at once: contention is what makes new arenas
        for _ in range(2000):
            libc.malloc(256)
        done.wait()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    go.wait()
    done.wait()
    with tempfile.NamedTemporaryFile("r") as report:
        libc.fopen.restype = ctypes.c_void_p
        stream = libc.fopen(report.name.encode(), b"w")
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.malloc_info(0, stream)
        libc.fclose.argtypes = [ctypes.c_void_p]
        libc.fclose(stream)
        print(report.read().count("<heap nr="))
    """
)


def _arenas_after_eight_threads(limit: int) -> int:
    done = subprocess.run(
        [sys.executable, "-c", ARENA_PROBE, str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.getcwd(),
        check=True,
    )
    return int(done.stdout.strip())


def test_the_arena_limit_holds_for_threads_started_after_it() -> None:
    assert _arenas_after_eight_threads(1) == 1
    assert _arenas_after_eight_threads(2) <= 2
    assert _arenas_after_eight_threads(0) > 2  # glibc's own limit: eight per core


def test_the_memory_section_defaults_and_zero_for_off() -> None:
    assert load_settings(environ={}).memory == MemorySettings()
    off = load_settings(
        environ={
            "TIMERSTORE_MEMORY__MALLOC_ARENA_MAX": "0",
            "TIMERSTORE_MEMORY__MALLOC_TRIM_INTERVAL_MS": "0",
        }
    )
    assert off.memory == MemorySettings(malloc_arena_max=0, malloc_trim_interval_ms=0)


@pytest.mark.parametrize(
    "variable",
    ["TIMERSTORE_MEMORY__MALLOC_ARENA_MAX", "TIMERSTORE_MEMORY__MALLOC_TRIM_INTERVAL_MS"],
)
def test_a_negative_memory_setting_is_refused_naming_it(variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={variable: "-1"})
    field = "memory." + variable.rpartition("__")[2].lower()
    assert caught.value.field == field
    assert variable in caught.value.message
