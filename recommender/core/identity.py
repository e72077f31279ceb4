"""Values made from objects, kept by the objects' identity.

For objects that are never changed once made and that come back as the very same object: a
catalog or a GPU model (a table per owner), a decision the use cases' memo answers again (its
row's columns), a ladder stored as a tuple (its JSON). Keyed by `id`, with the object kept
beside its value, so an id cannot be reused while its entry stands; a full table starts over
(a bound, not an order: the next few are made again). Dict operations are atomic under the
interpreter lock, so threads share a table; two may make the same value at once, and either
is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ByIdentity(Generic[K, V]):
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._kept: dict[int, tuple[K, V]] = {}

    def get(self, key: K, make: Callable[[K], V]) -> V:
        """The value made for this very object before, else `make(key)`, kept."""
        entry = self._kept.get(id(key))
        if entry is not None and entry[0] is key:
            return entry[1]
        value = make(key)
        if len(self._kept) >= self._limit:
            self._kept.clear()
        self._kept[id(key)] = (key, value)
        return value
