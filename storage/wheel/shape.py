"""The wheel's shape (``precision_ms``, ``slots``), recorded once beside its files.

Every stored slot, unit and checkpointed read time is in the shape the files were made
with: opened with another precision, the slots hold times the reader never asks for and
every pending timer is silently lost; with another number of slots the wheel file has
the wrong size. So the shape is written to ``shape`` (JSON, tmp + rename) when the
directory is first opened and compared at every open after that; a mismatch is a
``StoreOpenError`` naming both shapes. A directory made before this file existed is
taken to have the shape of the current settings (the wheel file's size still tells its
number of slots) and gets the file then.
"""

from __future__ import annotations

import os

import msgspec

from storage.errors import StoreOpenError
from storage.wheel.control import write_atomically
from storage.wheel.layout import SLOT_SIZE

FILE = "shape"
WHEEL_FILE = "timerwheel"


class Shape(msgspec.Struct, frozen=True):
    precision_ms: int
    slots: int


def check(directory: str, precision_ms: int, slots: int) -> None:
    """Raise StoreOpenError unless the files in ``directory`` have this shape."""
    wanted = Shape(precision_ms, slots)
    try:
        with open(os.path.join(directory, FILE), "rb") as f:
            stored = msgspec.json.decode(f.read(), type=Shape)
    except FileNotFoundError:
        stored = None
    except msgspec.DecodeError as exc:
        raise StoreOpenError(
            f"{os.path.join(directory, FILE)} is not a wheel shape record ({exc}); restore "
            f'it as {{"precision_ms": <ms>, "slots": <n>}} with the values the store was made with'
        ) from None
    if stored is None:
        stored_slots = _wheel_file_slots(directory)
        if stored_slots is not None and stored_slots != slots:
            raise _mismatch(directory, f"slots={stored_slots}", wanted)
        write_atomically(directory, FILE, msgspec.json.encode(wanted))
    elif stored != wanted:
        made = f"precision_ms={stored.precision_ms} and slots={stored.slots}"
        raise _mismatch(directory, made, wanted)


def _wheel_file_slots(directory: str) -> int | None:
    """The number of slots the wheel file was made for (None: no wheel file yet)."""
    try:
        size = os.path.getsize(os.path.join(directory, WHEEL_FILE))
    except FileNotFoundError:
        return None
    return size // (2 * SLOT_SIZE) if size else None


def _mismatch(directory: str, made: str, wanted: Shape) -> StoreOpenError:
    return StoreOpenError(
        f"the wheel store in {directory} was made with {made}; the settings ask for "
        f"precision_ms={wanted.precision_ms} and slots={wanted.slots}. Its pending timers "
        "sit in slots of the old shape, so it cannot change: set wheel.precision_ms and "
        "wheel.slots (TIMERSTORE_WHEEL__PRECISION_MS, TIMERSTORE_WHEEL__SLOTS) back to the "
        "values it was made with, or drain this store (deliver or cancel every pending "
        "timer) and give the new shape an empty data directory."
    )
