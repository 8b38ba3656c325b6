"""``Proposal``: the awaitable outcome of a metadata write proposed to the controller.

A proposal resolves once: with a value when its records are committed and applied to the
metadata image, or with the error that refused it (a ``protocol.errors`` exception for a Kafka
refusal, anything else for a failure). Kafka's ``QuorumController`` answers with a
``CompletableFuture`` in the same way. The local controller commits while proposing, so its
proposals are resolved when returned: callers on the event loop may check ``done()`` and take
``result()`` at once, and ``await`` costs nothing then; a quorum's proposal resolves later, when
the records are committed, and ``await`` suspends until then.

Owned by the broker's event loop: resolved and awaited there, never from another thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

__all__ = ["Proposal"]

T = TypeVar("T")


class Proposal(Generic[T]):
    __slots__ = ("_callbacks", "_done", "_error", "_value", "_waiters")

    def __init__(self) -> None:
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._callbacks: list[Callable[[T], None]] = []

    @classmethod
    def committed(cls, value: T) -> Proposal[T]:
        proposal: Proposal[T] = cls()
        proposal.resolve(value)
        return proposal

    @classmethod
    def refused(cls, error: BaseException) -> Proposal[T]:
        proposal: Proposal[T] = cls()
        proposal.fail(error)
        return proposal

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        """The error it failed with (None: committed); only once ``done()``."""
        if not self._done:
            raise RuntimeError("the proposal is not resolved yet")
        return self._error

    def result(self) -> T:
        """The committed value, or raise the error; only once ``done()``."""
        if self.exception() is not None:
            raise self._error  # type: ignore[misc]
        return self._value  # type: ignore[return-value]

    def add_done_callback(self, on_committed: Callable[[T], None]) -> None:
        """Call ``on_committed(value)`` once the proposal is committed (now, if it already is);
        never called for a refused proposal."""
        if not self._done:
            self._callbacks.append(on_committed)
        elif self._error is None:
            on_committed(self._value)  # type: ignore[arg-type]

    def resolve(self, value: T) -> None:
        self._settle(value, None)

    def fail(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> None:
        if self._done:
            raise RuntimeError("a proposal resolves once")
        self._done, self._value, self._error = True, value, error
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
        callbacks, self._callbacks = self._callbacks, []
        if error is None:
            for callback in callbacks:
                callback(value)  # type: ignore[arg-type]

    def __await__(self) -> Generator[Any, None, T]:
        if not self._done:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            yield from waiter.__await__()
        return self.result()

    def __repr__(self) -> str:
        state = "pending" if not self._done else f"failed: {self._error!r}" if self._error else "committed"
        return f"Proposal({state})"
