"""A memory map of a file that holds no file descriptor (Kafka maps an index and closes its file).

Python's ``mmap.mmap`` keeps a duplicate of the descriptor it was given for as long as the map
lives (``trackfd=False`` turns that off, from Python 3.13 on). With one map per index that is two
descriptors per partition held for the broker's life, which is what ran a broker with thousands of
partitions out of ``RLIMIT_NOFILE``. ``map_file`` therefore maps with ``mmap(trackfd=False)``
where Python has it, and otherwise calls libc's ``mmap``/``msync``/``munmap`` through ``ctypes``;
either way the descriptor is closed as soon as the map exists. A map still counts against
``vm.max_map_count`` (one per mapped index), which ``storage.limits`` reports.

Every map is advised ``MADV_RANDOM``: an index is read by bisection and written an entry at a
time, and without the advice each fault on the sparse, preallocated file read ahead a large
folio of zero pages that the next trim then evicted. Recovering 5,000 logs after kill -9 spent
30 s of system time there; with it, 6 s (and 15 s of wall time instead of 41).

``MappedFile.buffer`` is a writable (or read-only) buffer over the map, fit for
``struct.pack_into`` / ``unpack_from`` and slice reads. Invariant, the caller's to keep: no view of
``buffer`` outlives ``close()``; with the ctypes map a read after ``munmap`` is a crash, not an
exception. ``storage.index`` keeps it by serialising every access and the unmap under one lock and
by letting no slice of it (bytes from the writable ctypes array, a view from a read-only one)
leave the method that took it.

Failures: ``mmap`` failing with ENOMEM (``vm.max_map_count`` reached, or address space) raises
``OSError`` with that errno, as ``mmap.mmap`` does, so callers can name the limit.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
from pathlib import Path
from typing import Any, Protocol


class MappedFile(Protocol):
    """A mapped file region: ``buffer`` until ``close()``."""

    @property
    def buffer(self) -> Any: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def map_file(path: Path, length: int, *, writable: bool) -> MappedFile:
    """Map the first ``length`` (> 0) bytes of ``path``, shared; no descriptor stays open."""
    fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
    try:
        if sys.version_info >= (3, 13):
            return _PythonMap(fd, length, writable=writable)
        return _LibcMap(fd, length, writable=writable)
    finally:
        os.close(fd)


class _PythonMap:
    """``mmap.mmap(trackfd=False)``: Python 3.13 and later."""

    def __init__(self, fd: int, length: int, *, writable: bool) -> None:
        access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
        self._map: mmap.mmap | None = mmap.mmap(fd, length, access=access, trackfd=False)  # type: ignore[call-arg,unused-ignore]
        self._map.madvise(mmap.MADV_RANDOM)

    @property
    def buffer(self) -> Any:
        return self._map

    def flush(self) -> None:
        if self._map is not None:
            self._map.flush()

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


_MAP_FAILED = ctypes.c_void_p(-1).value
# msync's MS_SYNC: 4 on Linux, 0x10 on the BSDs and macOS.
_MS_SYNC = 4 if sys.platform.startswith("linux") else 0x10


def _libc() -> Any:
    library = ctypes.CDLL(None, use_errno=True)
    library.mmap.restype = ctypes.c_void_p
    library.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ctypes.c_int64,
    ]
    library.munmap.restype = ctypes.c_int
    library.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    library.madvise.restype = ctypes.c_int
    library.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    library.msync.restype = ctypes.c_int
    library.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return library


_LIBC = None if sys.version_info >= (3, 13) else _libc()


def _raise_errno(call: str, path_or_length: object) -> None:
    code = ctypes.get_errno() or errno.EIO
    raise OSError(code, f"{call} failed: {os.strerror(code)} ({path_or_length})")


class _LibcMap:
    """libc ``mmap(MAP_SHARED)`` through ctypes, the buffer a ctypes char array over it."""

    def __init__(self, fd: int, length: int, *, writable: bool) -> None:
        assert _LIBC is not None
        protection = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        address = _LIBC.mmap(None, length, protection, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            _raise_errno("mmap", f"{length} bytes")
        self._address: int | None = address
        self._length = length
        _LIBC.madvise(address, length, mmap.MADV_RANDOM)  # advice: a failure changes nothing
        array = (ctypes.c_char * length).from_address(address)
        # ctypes arrays are always writable: a read-only map gets a read-only view instead, so a
        # stray write raises TypeError rather than faulting on the PROT_READ pages.
        self._buffer: Any = array if writable else memoryview(array).cast("B").toreadonly()

    @property
    def buffer(self) -> Any:
        return self._buffer

    def flush(self) -> None:
        assert _LIBC is not None
        if self._address is not None and _LIBC.msync(self._address, self._length, _MS_SYNC):
            _raise_errno("msync", f"{self._length} bytes")

    def close(self) -> None:
        assert _LIBC is not None
        if self._address is None:
            return
        address, buffer, self._address, self._buffer = self._address, self._buffer, None, None
        if isinstance(buffer, memoryview):
            buffer.release()
        if _LIBC.munmap(address, self._length):
            _raise_errno("munmap", f"{self._length} bytes")
