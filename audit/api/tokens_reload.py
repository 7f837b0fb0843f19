"""Reloading the tokens file without a restart: on SIGHUP, and when the file changes.

A thread watches the file's identity (inode, size, modification time) every ``interval`` seconds
and wakes at once on SIGHUP; a changed or signalled file is parsed again and, when valid, replaces
the server's auth settings, which every request reads afresh (``audit.api.deps``). A file that
does not parse keeps the tokens in force and logs the one-line reason: a typo must not lock every
caller out, nor leave a revoked token working silently — the log says which happened.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
from typing import Any

from audit.api.auth import load_tokens, with_default_salt
from audit.errors import UserError

log = logging.getLogger("claimtrail.api")


class TokenReloader:
    def __init__(self, app: Any, path: str, interval: float = 2.0, default_salt: str = "") -> None:
        self.app = app
        self.default_salt = default_salt
        self.path = path
        self.interval = interval
        self.reloads = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._seen = self._identity()
        self._thread = threading.Thread(target=self._loop, name="claimtrail-tokens", daemon=True)

    def start(self) -> None:
        """Watch the file, and take SIGHUP (call from the main thread, before the server runs)."""
        signal.signal(signal.SIGHUP, lambda *_: self._wake.set())
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _loop(self) -> None:
        while not self._stop.is_set():
            signalled = self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            now = self._identity()
            if signalled or now != self._seen:
                self._seen = now
                self.reload()

    def reload(self) -> bool:
        try:
            auth = with_default_salt(load_tokens(self.path), self.default_salt)
        except UserError as exc:
            log.error("tokens file not reloaded, the tokens in force stay: %s", exc)
            return False
        self.app.state.settings = dataclasses.replace(self.app.state.settings, auth=auth)
        self.reloads += 1
        log.warning("tokens file %s reloaded: %d tokens", self.path, len(auth.principals))
        return True
