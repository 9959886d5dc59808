"""``store.control`` of the wheel store: one small file, rewritten whole on each change.

Routes and group offsets are few and small, so the whole map is kept in memory and
every change writes it to a temporary file, fsyncs it and renames it over the old one
(then fsyncs the directory): a crash leaves the old map or the new one, never a mix.
"""

from __future__ import annotations

import os
import threading

import msgspec

from storage.control import control_key, split_key

FILE = "control"
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(dict[bytes, bytes]).decode


def write_atomically(directory: str, name: str, data: bytes) -> None:
    """Write ``directory/name`` so that a crash leaves the old or the new content."""
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class FileControl:
    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._lock = threading.Lock()
        try:
            with open(os.path.join(directory, FILE), "rb") as f:
                self._values = _decode(f.read())
        except FileNotFoundError:
            self._values = {}

    def get(self, space: str, name: str) -> bytes | None:
        return self._values.get(control_key(space, name))

    def put(self, space: str, name: str, value: bytes) -> None:
        with self._lock:
            values = {**self._values, control_key(space, name): value}
            write_atomically(self._directory, FILE, _encode(values))
            self._values = values

    def delete(self, space: str, name: str) -> bool:
        key = control_key(space, name)
        with self._lock:
            if key not in self._values:
                return False
            values = {k: v for k, v in self._values.items() if k != key}
            write_atomically(self._directory, FILE, _encode(values))
            self._values = values
            return True

    def scan(self, space: str, prefix: str = "") -> list[tuple[str, bytes]]:
        start = control_key(space, prefix)
        return sorted((split_key(k)[1], v) for k, v in self._values.items() if k.startswith(start))
