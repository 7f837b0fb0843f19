"""Resolving a DSN and opening a clickhouse-connect client on it.

The DSN comes from ``--dsn``, then ``CLAIMTRAIL_DSN``, then the embedded default
``chdb://<data dir>/db`` (data dir ``CLAIMTRAIL_DATA_DIR``, default ``./.claimtrail``). The
database named in an ``http(s)://…/<database>`` DSN is used (``claimtrail`` when absent); chDB's
default database uses the Memory engine, so the embedded store always uses a named database.
"""

from __future__ import annotations

import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from audit.errors import UserError

DEFAULT_DATABASE = "claimtrail"
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_OPENED_HERE: set[str] = set()  # embedded directories whose engine runs in this process
# what a store keeps beside an embedded engine's directory: writers' spools and the id index
SPOOL_DIR = "spool"
ID_INDEX_FILE = "ids.sqlite"


class StoreError(UserError):
    """The store cannot be reached or used; the message says which DSN and why."""


class StoreLockedError(StoreError):
    """Another process owns the embedded chDB directory (chDB locks it to one process)."""


class StoreMissingError(StoreError):
    """An embedded store was named that does not exist, and creating one was not asked for."""


@dataclass(frozen=True)
class Target:
    """A parsed DSN: what to hand to clickhouse-connect and which database to use."""

    dsn: str
    database: str
    embedded_path: str | None  # directory of the embedded engine, None for a server

    @property
    def display(self) -> str:
        """The DSN without its password, for messages and logs."""
        parts = urlsplit(self.dsn)
        if parts.password:
            netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
            return urlunsplit(parts._replace(netloc=netloc))
        return self.dsn


def data_dir() -> Path:
    return Path(os.environ.get("CLAIMTRAIL_DATA_DIR", ".claimtrail"))


def resolve_dsn(dsn: str | None = None) -> Target:
    raw = dsn or os.environ.get("CLAIMTRAIL_DSN") or f"chdb://{data_dir() / 'db'}"
    parts = urlsplit(raw)
    if parts.scheme == "chdb":
        path = parts.netloc + parts.path
        if not path:
            raise StoreError(f"DSN {raw!r}: a chdb:// DSN needs a directory, e.g. chdb://.claimtrail/db")
        absolute = str(Path(path).resolve())  # clickhouse-connect reads chdb://rel/x as host "rel"
        return Target(dsn=f"chdb://{absolute}", database=DEFAULT_DATABASE, embedded_path=absolute)
    if parts.scheme in ("http", "https", "clickhouse", "clickhouses"):
        database = parts.path.strip("/") or DEFAULT_DATABASE
        if not IDENTIFIER.match(database):
            raise StoreError(f"DSN {raw!r}: database name {database!r} must be a plain identifier")
        scheme = {"clickhouse": "http", "clickhouses": "https"}.get(parts.scheme, parts.scheme)
        return Target(dsn=urlunsplit(parts._replace(scheme=scheme, path="")), database=database, embedded_path=None)
    raise StoreError(f"DSN {raw!r}: scheme must be chdb://, http://, https:// or clickhouse://")


def connect(target: Target, create_database: bool = True, create_store: bool = True) -> Any:
    """Open a client on ``target`` with its database selected; errors become one-line messages.

    ``create_store=False`` refuses an embedded directory that does not exist yet, so a mistyped
    ``--dsn`` is an error rather than a new, empty store. The lock is probed before chDB starts,
    because the engine prints its own ``Code: 76`` line on stderr when it finds the lock taken."""
    if target.embedded_path is not None:
        if not create_store and not Path(target.embedded_path).is_dir():
            raise StoreMissingError(f"no store at {target.embedded_path} ({target.dsn}): check the DSN "
                                    "(claimtrail serve --create starts an empty one)")
        # flock conflicts between two descriptors of one process too, so only probe a directory
        # this process has not opened itself (chDB shares one engine between its clients).
        if target.embedded_path not in _OPENED_HERE and locked_by_another_process(target.embedded_path):
            raise _locked(target)
    # Imported here, on first connection, so that commands that only resolve a DSN or print
    # DDL (``claimtrail schema``) start without loading the client library.
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import ClickHouseError

    try:
        if target.embedded_path is not None:
            Path(target.embedded_path).parent.mkdir(parents=True, exist_ok=True)
        timeouts: dict[str, Any] = {} if target.embedded_path else {"connect_timeout": 5, "send_receive_timeout": 60}
        client = clickhouse_connect.get_client(dsn=target.dsn, **timeouts)
        if create_database:
            client.command(f"CREATE DATABASE IF NOT EXISTS {target.database}")
        client.database = target.database
        if target.embedded_path is not None:
            _OPENED_HERE.add(target.embedded_path)
        return client
    except ClickHouseError as exc:
        raise _explain(target, exc) from None
    except OSError as exc:
        raise StoreError(f"store {target.display}: cannot connect: {exc}") from None


def locked_by_another_process(directory: str | Path) -> bool:
    """ClickHouse flocks ``<dir>/status`` while an engine runs there; probe it the same way."""
    try:
        with open(Path(directory) / "status", "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def refuse_if_held_elsewhere(target: Target) -> None:
    """Raise ``StoreLockedError`` when another process runs the embedded engine on ``target``.

    Producers call this before they start: their spooled writer would otherwise keep every
    record in its spool for as long as that server runs, which looks like success."""
    if (target.embedded_path is not None and target.embedded_path not in _OPENED_HERE
            and locked_by_another_process(target.embedded_path)):
        raise _locked(target)


def _locked(target: Target) -> StoreLockedError:
    return StoreLockedError(
        f"the embedded store at {target.embedded_path} is owned by another process (a running "
        "claimtrail serve or demo); use that server's API URL (such as http://127.0.0.1:8080) "
        "instead of the store's directory, or stop it first"
    )


def _explain(target: Target, exc: Exception) -> StoreError:
    text = str(exc)
    if target.embedded_path is not None and (
        "Cannot lock file" in text or locked_by_another_process(target.embedded_path)
    ):
        return _locked(target)
    first_line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return StoreError(f"store {target.display}: {first_line[:300]}")
