"""The lock that serialises one stream's submissions (task ids, argument slots, the SQ ring).

A launch takes it once, so its cost is part of every launch: a threading.Lock's acquire parses
its (blocking, timeout) arguments on every call. Here the uncontended path is one C call each
way, taking the lock's single token out of a deque and putting it back (atomic under the GIL
and in free-threaded builds); a thread that finds the token gone sleeps on a condition until
the holder gives it back and, seeing a waiter, wakes one.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType

WAIT_POLL_S = 0.05  # a waiter looks again at least this often (a wake-up is never lost, see release)


class SubmitLock:
    """A mutex, not reentrant. Hot paths bind `take` and `give` and call `wait_for_token` when
    take raises IndexError, and `wake_waiter` after give when `waiters[0]` is set."""

    __slots__ = ("_condition", "_tokens", "give", "take", "waiters")

    def __init__(self) -> None:
        self._tokens: deque[None] = deque([None])
        self.take: Callable[[], None] = self._tokens.pop  # IndexError: held by another thread
        self.give: Callable[[None], None] = self._tokens.append
        self.waiters = [0]  # threads inside wait_for_token (changed under the condition)
        self._condition = threading.Condition(threading.Lock())

    def acquire(self) -> None:
        """Take the token, waiting for it if another thread holds it."""
        try:
            self.take()
        except IndexError:
            self.wait_for_token()

    def release(self) -> None:
        """Give the token back and wake a waiter if there is one."""
        self.give(None)
        if self.waiters[0]:
            self.wake_waiter()

    def wait_for_token(self) -> None:
        """Sleep until the token can be taken, then take it. A holder that gives it back
        between a failed take here and the sleep sees this waiter counted (it counts itself
        before trying again) and wakes it once the sleep began (it needs the condition)."""
        with self._condition:
            self.waiters[0] += 1
            try:
                while True:
                    try:
                        self.take()
                        return
                    except IndexError:
                        self._condition.wait(WAIT_POLL_S)
            finally:
                self.waiters[0] -= 1

    def wake_waiter(self) -> None:
        """Wake one thread sleeping in wait_for_token."""
        with self._condition:
            self._condition.notify()

    def locked(self) -> bool:
        """True while some thread holds the token."""
        return not self._tokens

    def __enter__(self) -> SubmitLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
