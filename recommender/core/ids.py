"""Recommendation ids: random (version 4) UUIDs in their usual text form, read from the
operating system's randomness in blocks instead of one system call per id.

`str(uuid.uuid4())` asks `os.urandom` for 16 bytes on every Recommend; the system call releases
the interpreter lock, and with 16 callers each release is a hand-over to another thread (uuid4
was 3 to 5 % of a py-spy profile of the server). Here one call reads ID_BLOCK ids' worth of
bytes; the ids are the same kind of id (122 bits from the same source, the version and variant
bits set as RFC 9562 says), so they stay unique across replicas and processes. After a fork
the child discards the parent's unread bytes: two processes never hand out the same id.
"""

from __future__ import annotations

import os
import threading

ID_BLOCK = 256
"""Ids read from the operating system at once (4 KiB): one system call per 256 Recommends."""

_VERSION_MASK = ~(0xF000 << 64) & ~(0xC000 << 48)
_VERSION_BITS = (4 << 76) | (0x8000 << 48)

_lock = threading.Lock()
_block = b""
_offset = 0


def _forget_block() -> None:
    global _block, _offset
    _block, _offset = b"", 0


os.register_at_fork(after_in_child=_forget_block)


def new_id() -> str:
    """A random UUID (version 4, RFC variant), e.g. `0f6e2b7c-1d3a-4c5e-9f00-1234567890ab`."""
    global _block, _offset
    with _lock:
        if _offset >= len(_block):
            _block, _offset = os.urandom(16 * ID_BLOCK), 0
        start = _offset
        _offset = start + 16
        n = int.from_bytes(_block[start:start + 16])
    h = "%032x" % (n & _VERSION_MASK | _VERSION_BITS)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
