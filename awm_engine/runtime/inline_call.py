"""A served tool call run on the worker's own event-loop thread, with its timeout kept by a signal.

``awm env serve``'s worker answers MCP on its main thread's event loop. Handing each call to a call thread and back
cost about 0.4 ms of a 1.3 ms in-process call (two thread wake-ups and the GIL hand-offs). Here the handler (the
app's ASGI coroutine) runs on the loop's thread itself, as the reference's server runs its ``async`` handlers on
its own loop; the timeout is kept without any other thread:

- ``setitimer(ITIMER_REAL)`` is armed while the handler's code runs and ``SIGALRM``'s handler raises
  ``ToolCallTimeout`` in it (a signal also ends a blocking ``time.sleep``, which an exception set from another
  thread does not). The handler raises only while the handler's own code runs (``slot.inside``), never in the
  loop's code: both run on this one thread, so there is no race between them.
- a handler that awaits something (a ``def`` route's thread pool, a sleep) is suspended with the clock off the
  signal: the loop keeps serving, and an asyncio timer at the deadline cancels what it awaits; the handler then
  gets ``ToolCallTimeout`` where it waits.
- a handler that neither returns nor stops (it swallows the exception, is stuck in C code, or waits on a task of
  this loop that holds the loop: ``await asyncio.wait_for(spins())``) is seen by a watchdog thread ``STUCK_AFTER``
  seconds past its deadline: it writes a line to the worker's log and ends the worker, which the server then
  replaces (``awm env serve`` starts a new worker on the episode's databases).
- a task a handler left behind runs on the loop with no call's clock: one that holds the loop (its code running,
  the loop not turning) for longer than a call may run (its timeout and ``STUCK_AFTER``) ends the worker too.
- a handler stopped at an await may leave its work going on where the exception does not reach: a ``def`` route in
  Starlette's thread pool, a task ``asyncio.wait_for`` started (it cancels it only on ``CancelledError``). Such
  work (the environment's code still running in another thread or task) is given ``grace`` seconds to end; past
  them the call says so (``ToolCallTimeout.left_running``) and the episode counts as stuck, as on the call-thread
  path, so that the server replaces the worker instead of letting that work write after the timeout's answer.

Used only where this thread is the main thread and ``SIGALRM`` is free (``ready``); otherwise, and while another
call holds the episode, calls take the call-thread path (``Episode.call_tool``).
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import types
from typing import Any

STUCK_AFTER = 3.0  # seconds past its deadline a handler may take to unwind before the worker gives up on it
WATCH_EVERY = 0.5  # how often the watchdog looks at the running call


class Slot:
    """The inline call now running (at most one per process: the loop's thread runs one handler at a time)."""

    __slots__ = ("deadline", "inside", "expired", "nudges")

    def __init__(self, deadline: float | None):
        self.deadline = deadline  # time.monotonic() of the timeout (None: no timeout)
        self.inside = False  # the handler's own code is running (not the loop's)
        self.expired = False
        self.nudges = 0


_current: Slot | None = None
_installed: bool | None = None


def ready() -> bool:
    """Inline calls work here: on the main thread, with SIGALRM's handler ours (installed once, when free)."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return False
    if _installed is None:
        try:
            if signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGALRM, _on_alarm)
                threading.Thread(target=_watchdog, name="awm-inline-watchdog", daemon=True).start()
                _installed = True
            else:
                _installed = False
        except (ValueError, OSError, RuntimeError):
            _installed = False
    return bool(_installed) and signal.getsignal(signal.SIGALRM) is _on_alarm


def _on_alarm(signum: int, frame: Any) -> None:
    from awm_engine.runtime.inprocess import ToolCallTimeout

    slot = _current
    if slot is None or slot.deadline is None:
        return
    slot.expired = True
    if slot.inside and frame is not None and frame.f_code is _drive.__code__:
        # not in the handler but in the driver around it, just before or after it ran (a signal is handled between
        # instructions, here right after ``coro.send`` returned): raised here, it would leave the handler
        # suspended, to be closed at some later time outside its clock; ``_drive`` throws it in at its next step
        _arm(0.001)  # again soon, in case the handler is entered next
        return
    if slot.inside:
        slot.nudges += 1
        _arm(0.2)  # again, while it has not stopped: a handler that catches the first one gets another
        raise ToolCallTimeout()


def _arm(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-6))


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)


# the loop's pulse (``_beat``, a timer on the loop of the inline calls) and, from the last call, the environment's
# code file and how long the loop may go without turning while it runs that code outside any call
_loop: Any = None
_beat_at = 0.0
_loop_limit: float | None = None
_module_file: str | None = None


def _beat() -> None:
    global _beat_at
    _beat_at = time.monotonic()
    if _loop is not None and not _loop.is_closed():
        _loop.call_later(WATCH_EVERY, _beat)


def _main_runs(module_file: str) -> bool:
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        if frame.f_code.co_filename == module_file:
            return True
        frame = frame.f_back
    return False


def _watchdog() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # the alarm is the main thread's
    while True:
        time.sleep(WATCH_EVERY)
        slot, limit, module_file = _current, _loop_limit, _module_file
        now = time.monotonic()
        # inside or not: a call not over this long past its deadline holds the loop (a task it waits on spins) or
        # will not stop
        if slot is not None and slot.deadline is not None and now > slot.deadline + STUCK_AFTER:
            _give_up("a tool call's handler did not stop after its timeout")
        # between calls: the loop held by the environment's code that no call's clock counts (a task a handler
        # left behind that spins), for longer than a call may run
        loop = _loop
        if slot is None and limit is not None and module_file is not None and now - _beat_at > limit and \
                loop is not None and loop.is_running() and _main_runs(module_file):
            _give_up("the environment's code held the event loop outside any tool call")


def _give_up(why: str) -> None:
    try:
        sys.stderr.write(f"awm worker: {why}; the worker ends so that a new one serves the episode\n")
        sys.stderr.flush()
    finally:
        os._exit(3)


async def run(coro: Any, timeout: float | None, module_file: str | None = None, grace: float = 1.0) -> Any:
    """Await ``coro`` (the handler's ASGI call) on this thread; ``ToolCallTimeout`` raised in it past ``timeout``
    seconds of its own running time counted from now (it propagates from here as it comes out of the handler, its
    ``left_running`` true when code of ``module_file`` still ran ``grace`` seconds later, see the module's doc)."""
    from awm_engine.runtime.inprocess import ToolCallTimeout

    global _current
    if _current is not None:
        raise RuntimeError("an inline call is already running")
    slot = Slot(None if timeout is None else time.monotonic() + timeout)
    _watch_loop(timeout, module_file)
    _current = slot
    try:
        return await _drive(coro, slot)
    except ToolCallTimeout as exc:
        _disarm()
        # still the watchdog's: a leftover task that holds the loop past STUCK_AFTER ends the worker
        exc.left_running = module_file is not None and await _still_running(module_file, grace)
        raise
    finally:
        _disarm()
        _current = None


def _expire(slot: Slot, waited_for: asyncio.Future) -> None:
    slot.expired = True
    waited_for.cancel()


def _watch_loop(timeout: float | None, module_file: str | None) -> None:
    global _loop, _loop_limit, _module_file
    loop = asyncio.get_running_loop()
    if _loop is not loop:
        _loop = loop
        _beat()
    _loop_limit = None if timeout is None else timeout + STUCK_AFTER
    _module_file = module_file


LEFT_RECHECK = 0.02  # how often a timed-out call looks whether the work its handler left has ended


async def _still_running(module_file: str, grace: float) -> bool:
    end = time.monotonic() + grace
    while _runs_code_of(module_file):
        if time.monotonic() >= end:
            return True
        await asyncio.sleep(LEFT_RECHECK)
    return False


def _runs_code_of(module_file: str) -> bool:
    """Whether code of ``module_file`` runs in another thread, or in a task of this loop not done (other than this
    one), now."""
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        while ident != me and frame is not None:
            if frame.f_code.co_filename == module_file:
                return True
            frame = frame.f_back
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is current or task.done():
            continue
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is not None and frame.f_code.co_filename == module_file:
                return True
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return False


@types.coroutine
def _drive(coro: Any, slot: Slot):
    from awm_engine.runtime.inprocess import ToolCallTimeout

    loop = asyncio.get_running_loop()
    value: Any = None
    error: BaseException | None = None
    while True:
        if slot.deadline is not None:
            left = slot.deadline - time.monotonic()
            if left <= 0 and error is None:
                slot.expired = True
                error = ToolCallTimeout()
            else:
                _arm(left)
        slot.inside = True
        try:
            yielded = coro.throw(error) if error is not None else coro.send(value)
        except StopIteration as stop:
            slot.inside = False
            return stop.value
        except BaseException:
            slot.inside = False
            raise
        slot.inside = False
        _disarm()
        # suspended on a future of this loop: the clock goes on as a timer that cancels what it waits for
        timer = None
        if slot.deadline is not None and isinstance(yielded, asyncio.Future):
            timer = loop.call_at(loop.time() + max(0.0, slot.deadline - time.monotonic()), _expire, slot, yielded)
        try:
            value, error = (yield yielded), None
        except asyncio.CancelledError as exc:  # the clock's (a timeout), or the task's own (passed on as it is)
            value, error = None, (ToolCallTimeout() if slot.expired else exc)
        except BaseException as exc:  # noqa: BLE001 - handed on to the handler where it waits
            value, error = None, exc
        finally:
            if timer is not None:
                timer.cancel()


def running() -> bool:
    return _current is not None
