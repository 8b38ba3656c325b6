"""The event loop behind the blocking facade.

``Producer``, ``Consumer`` and ``AdminClient`` are blocking objects over an asyncio
core. Each owns a ``LoopThread``: a daemon thread running its own event loop (uvloop
when installed, asyncio otherwise), to which the facade hands coroutines with
``run()`` (wait for the result) or ``submit()`` (get a ``concurrent.futures.Future``).

State: the loop and everything scheduled on it belong to the thread; other threads
touch it only through ``run``/``submit``/``call_soon``. ``close()`` stops the loop
after the coroutines it was given have finished or been cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from samsa.errors import ClientClosedError, KafkaTimeoutError

__all__ = ["LoopThread", "new_event_loop"]

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop if it is installed, asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """A daemon thread running one event loop for one client object."""

    def __init__(self, name: str) -> None:
        self.loop = new_event_loop()
        self._closed = False
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(ready,), name=name, daemon=True)
        self._thread.start()
        ready.wait()

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; its future, usable from any thread."""
        if self._closed:
            coroutine.close()
            raise ClientClosedError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result (``KafkaTimeoutError`` after
        ``timeout`` seconds, the coroutine then being cancelled)."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a blocking client call was made from its own event loop thread")
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise KafkaTimeoutError(f"timed out after {timeout:.3f} s") from None

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop thread, soon."""
        self.loop.call_soon_threadsafe(callback, *args)

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self) -> None:
        """Stop the loop (pending coroutines are cancelled) and join the thread."""
        if self._closed:
            return
        self._closed = True
        if self.in_loop_thread:
            self.loop.stop()
            return

        async def cancel_rest() -> None:
            current = asyncio.current_task()
            rest = [task for task in asyncio.all_tasks() if task is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
