"""Keeps the serving model version in memory and picks up a newly promoted one.

Every few seconds one small query asks which version serves; only when the answer changes are
its parameters read and loaded. A version that fails to load is logged and the previous one
keeps serving, so a bad promotion never leaves the server without a model it had.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from recommender.core import config
from recommender.core.domain import ModelVersion, StoreUnavailable
from recommender.learning.memory_model import KIND, MemoryModel

log = logging.getLogger(__name__)


class VersionSource(Protocol):
    def serving_version_id(self, kind: str) -> str | None: ...
    def serving_model_version(self, kind: str) -> ModelVersion | None: ...


class ModelHolder:
    def __init__(self, source: VersionSource, poll_s: float = config.MODEL_POLL_S,
                 oom_wait_gpus: float = config.OOM_WAIT_GPUS) -> None:
        self.source = source
        self.oom_wait_gpus = oom_wait_gpus
        """The server's price of an OOM: a version scored at another is loaded, with a
        warning (the retraining job was given another `--oom-wait-gpus`)."""
        self.poll_s = poll_s
        self._model: MemoryModel | None = None
        self._failed: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def current(self) -> MemoryModel | None:
        return self._model

    def refresh(self) -> bool:
        """Loads the serving version if it changed; True when the model in use changed."""
        with self._lock:
            try:
                version = self.source.serving_version_id(KIND)
                if version == (self._model.version if self._model else None) or (
                        version is not None and version == self._failed):
                    return False
                if version is None:
                    log.info("no model version serves any more: back to history rules")
                    self._model = None
                    return True
                found = self.source.serving_model_version(KIND)
                if found is None or found.version != version:
                    return False  # promoted again meanwhile: the next poll catches up
                model = MemoryModel(found.version, found.params)
            except StoreUnavailable as e:
                log.warning("cannot check the serving model version: %s", e)
                return False
            except (ValueError, KeyError, TypeError, IndexError) as e:
                self._failed = version
                log.error("model version %s cannot be loaded, keeping %s: %s", version,
                          self._model.version if self._model else "none", e)
                return False
            self._model = model
            self._failed = None
            log.info("serving model version %s (%d action models)", model.version,
                     model.actions)
            scored_at = found.metrics.get("oom_wait_gpus")
            if scored_at is not None and scored_at != self.oom_wait_gpus:
                log.warning(
                    "model version %s was promoted scoring an OOM at %g whole GPUs; this server "
                    "prices one at %g: give `recommender retrain` the servers' --oom-wait-gpus "
                    "(RECOMMENDER_OOM_WAIT_GPUS)", model.version, scored_at, self.oom_wait_gpus)
            return True

    def start(self) -> None:
        """Polls in a daemon thread until stop()."""
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="model-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.refresh()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.poll_s + 1)
