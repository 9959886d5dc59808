"""The delivery engine, one module per stage, linked only by the bounded delivery queue:

``scanner`` (due keys -> batches) -> ``delivery_queue`` (bounded, in timers) ->
``dispatcher`` (a batch -> its sink, commit, retry, dead-letter) -> ``sinks``.
``engine.Engine`` builds and owns them; ``stage.StageThread`` is the thread both loops run in.
"""

from app.engine.engine import Engine, EngineSettings

__all__ = ["Engine", "EngineSettings"]
