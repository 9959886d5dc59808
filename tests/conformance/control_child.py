"""Child of the control crash test: puts control values on either store until killed.

Run as ``python -m tests.conformance.control_child KIND PATH``; prints ``P name`` after
each put returned (acknowledged), ``X name`` before each delete (an intent: a kill may
land after the delete is durable but before it is acknowledged) and ``D name`` after each
acknowledged delete.
"""

from __future__ import annotations

import sys

from tests.conformance.conftest import open_store


def main(kind: str, path: str) -> None:
    store = open_store(kind, path)
    for n in range(1_000_000):
        name = f"topic-{n}"
        store.control.put("route", name, name.encode())
        print(f"P {name}", flush=True)
        if n % 5 == 4:
            victim = f"topic-{n - 2}"
            print(f"X {victim}", flush=True)
            assert store.control.delete("route", victim)
            print(f"D {victim}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
