"""Child processes of a benchmark run that end with the process that started them.

A run, or one module's process, stopped by SIGKILL or by a SIGTERM it does not handle never
reaches the ``with`` and ``finally`` exits that stop its children: the ``--noise`` burner, the
``Awake`` spinners, a module's process, a ``claimtrail serve`` a module started. Left behind, they
keep spinning or serving for hours beside whatever runs next. Linux's parent-death signal
(``PR_SET_PDEATHSIG``, prctl(2)) ends each one with its parent instead; a module's process ended
that way takes its own children with it, so a killed run leaves nothing behind at any depth.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# resolved here, not between fork and exec: the child then only calls into libc
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def ending_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child receives SIGTERM when this process ends.
    SIGTERM, not SIGKILL, so a ``claimtrail serve`` still closes its store as it does when stopped.

    The kernel ties the signal to the thread that forks, so start children from the main thread.
    A parent that ended before the child asked for the signal is caught by comparing the child's
    parent with the pid recorded here, before the fork."""
    parent = os.getpid()

    def tie() -> None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return tie
