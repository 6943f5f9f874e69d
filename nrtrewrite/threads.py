"""Starting a thread without waiting forever for it (review V2).

CPython's ``Thread.start`` (3.11: ``threading.py``) hands ``self._bootstrap`` to
``_thread.start_new_thread`` and then waits, without a timeout, on the thread's ``_started``
event, which the new thread sets early in ``_bootstrap_inner``.  A new thread that runs out
of memory before that (the OS gave it its stack, then Python could not make its first
objects) ends with the ``MemoryError`` printed as unraisable (``Exception ignored in ...``),
the event never set, and ``start`` waits forever: ``lower`` hung instead of exiting 71.
:func:`start` waits on that event at most :data:`START_TIMEOUT_S` and raises
``MemoryError`` when the thread did not start (the CLI's out-of-memory line, status 71).
"""

from __future__ import annotations

import threading

#: How long a new thread may take to signal it started before it is taken for one that
#: ran out of memory as it started (a thread normally starts in well under a millisecond;
#: the bound is generous for a machine swapping or heavily loaded).
START_TIMEOUT_S = 10.0


class _BoundedStart(threading.Event):
    """A thread's ``_started`` event whose untimed ``wait`` (the one ``Thread.start`` makes)
    waits at most ``timeout`` seconds and raises ``MemoryError`` if it is not set by then."""

    def __init__(self, name: str, timeout: float):
        super().__init__()
        self.name, self.timeout = name, timeout

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            return super().wait(timeout)
        if not super().wait(self.timeout):
            raise MemoryError(f"thread {self.name} did not start within {self.timeout:g} s "
                              f"(no memory to start it)")
        return True


def start(thread: threading.Thread, timeout: float | None = None) -> None:
    """``thread.start()``, raising ``MemoryError`` where the thread does not signal that it
    started within ``timeout`` seconds (:data:`START_TIMEOUT_S` by default) instead of
    waiting forever.  A Python whose threads have no ``_started`` event starts it plainly."""
    started = getattr(thread, "_started", None)
    if type(started) is threading.Event and not started.is_set():
        thread._started = _BoundedStart(  # type: ignore[attr-defined]
            thread.name, START_TIMEOUT_S if timeout is None else timeout)
    thread.start()
