"""One router per resource. ``admin`` is the place for operator-only endpoints."""
