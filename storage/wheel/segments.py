"""Append-only segmented files addressed by one global offset (RocketMQ's MappedFileQueue).

A segment file is named by the global offset of its first byte (20 digits, as RocketMQ
names commit-log files), so a position maps to (segment, offset in file) by bisection.
A write never straddles two segments: when it does not fit, the tail of the current
segment is handed to ``pad`` (the TimerLog writes a BLANK unit there) and a new segment
starts where the old one ends. Writes go through ``os.pwrite`` on file descriptors, so
a killed process loses nothing the kernel accepted; ``fsync`` is for power cuts.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from storage.wheel.counters import WheelCounters

NAME_DIGITS = 20


@dataclass
class Segment:
    base: int
    path: str
    fd: int
    length: int

    @property
    def end(self) -> int:
        return self.base + self.length


class SegmentedFile:
    def __init__(
        self,
        directory: str,
        segment_bytes: int,
        kind: str,
        counters: WheelCounters,
        pad: Callable[[int], bytes] | None = None,
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.kind = kind
        self.counters = counters
        self._pad = pad
        os.makedirs(directory, exist_ok=True)
        self.segments: list[Segment] = []
        self._dirty: set[int] = set()  # bases written since the last fsync
        for name in sorted(os.listdir(directory)):
            if len(name) == NAME_DIGITS and name.isdigit():
                self._open(int(name))
        self._bases = [s.base for s in self.segments]

    def _open(self, base: int) -> Segment:
        path = os.path.join(self.directory, f"{base:0{NAME_DIGITS}d}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        segment = Segment(base, path, fd, os.fstat(fd).st_size)
        self.segments.append(segment)
        return segment

    @property
    def start(self) -> int:
        return self.segments[0].base if self.segments else 0

    @property
    def end(self) -> int:
        return self.segments[-1].end if self.segments else 0

    def append(self, data: bytes) -> int:
        """Write ``data`` at the end; return its global position."""
        last = self.segments[-1] if self.segments else None
        if last is None or (last.length and last.length + len(data) > self.segment_bytes):
            last = self._roll(last)
        pos = last.end
        os.pwrite(last.fd, data, last.length)
        last.length += len(data)
        self._dirty.add(last.base)
        self.counters.bytes_written[self.kind] += len(data)
        return pos

    def _roll(self, last: Segment | None) -> Segment:
        if last is not None and self._pad is not None and last.length < self.segment_bytes:
            filler = self._pad(self.segment_bytes - last.length)
            os.pwrite(last.fd, filler, last.length)
            last.length += len(filler)
            self.counters.bytes_written[self.kind] += len(filler)
        segment = self._open(0 if last is None else last.end)
        self._bases.append(segment.base)
        return segment

    def segment_of(self, pos: int) -> Segment:
        i = bisect.bisect_right(self._bases, pos) - 1
        if i < 0 or pos >= self.segments[i].end:
            raise KeyError(f"{self.kind} position {pos} is not stored")
        return self.segments[i]

    def read(self, pos: int, size: int) -> bytes:
        segment = self.segment_of(pos)
        return os.pread(segment.fd, size, pos - segment.base)

    def read_segment(self, segment: Segment, start: int = 0) -> bytes:
        return os.pread(segment.fd, segment.length - start, start)

    def segments_from(self, pos: int) -> Iterator[Segment]:
        """The segments holding bytes at or after ``pos``."""
        for segment in list(self.segments):
            if segment.end > pos:
                yield segment

    def truncate(self, pos: int) -> None:
        """Cut everything at and after ``pos`` (a torn tail found by recovery)."""
        while self.segments and self.segments[-1].base > pos:
            segment = self.segments.pop()
            self._bases.pop()
            os.close(segment.fd)
            os.unlink(segment.path)
        if self.segments and self.segments[-1].end > pos:
            last = self.segments[-1]
            os.ftruncate(last.fd, pos - last.base)
            last.length = pos - last.base

    def fsync(self) -> None:
        """fsync every segment written since the last call."""
        for segment in self.segments:
            if segment.base in self._dirty:
                os.fsync(segment.fd)
                self.counters.fsyncs[self.kind] += 1
        self._dirty.clear()

    def delete_segment(self, segment: Segment) -> None:
        if segment is self.segments[-1]:
            raise ValueError("the active segment is never deleted")
        i = self.segments.index(segment)
        del self.segments[i]
        del self._bases[i]
        os.close(segment.fd)
        os.unlink(segment.path)

    def close(self) -> None:
        for segment in self.segments:
            os.close(segment.fd)
        self.segments.clear()
        self._bases.clear()
