"""Counters every instance of the function shares: LLM spend and requests per client.

One operation, :meth:`Counters.add`: add amounts to some counters of one item
at once, but only if none of them then exceeds its limit. Three stores behind
it, chosen by ``ANCHORED_SHARED_STATE``:

- ``dynamodb:TABLE`` (on AWS, what ``template.yaml`` sets): one ``UpdateItem``
  with a ``ConditionExpression``, so DynamoDB checks and adds in one atomic
  step whichever instance asks; items carry ``expires_at`` (epoch seconds), the
  table's TTL attribute, so old windows disappear by themselves.
- ``file:PATH``: a SQLite file, for ``anchored serve``: survives restarts and
  is shared by the processes on one machine.
- ``memory`` (the default): this process only.

A store that cannot be reached raises :class:`StateUnavailable`; callers decide
whether that means yes (rate limits fall back to the local check) or no (the
spend cap refuses the LLM call).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("anchored.query")

# DynamoDB is on the request path: a slow or unreachable table must cost a request
# little (the spend cap then answers extractively; rate limits fall back to local).
DYNAMODB_CONNECT_TIMEOUT_S = 1.0
DYNAMODB_READ_TIMEOUT_S = 1.0
DYNAMODB_MAX_ATTEMPTS = 2


class StateUnavailable(Exception):
    """The shared store could not be reached or refused the request (not a limit)."""


class Counters:
    """Named integer counters grouped in items; items expire. One subclass per store."""

    name: str

    def add(
        self,
        key: str,
        amounts: Mapping[str, int],
        *,
        limits: Mapping[str, int] | None = None,
        expires_at: float,
    ) -> dict[str, int] | None:
        """Add ``amounts`` to the counters of item ``key`` in one atomic step.

        Refused (returns ``None``, nothing added) when a counter named in
        ``limits`` would end above its limit; otherwise returns the new values
        of the counters added to. A new item expires at ``expires_at`` (epoch
        seconds). Raises :class:`StateUnavailable` when the store fails.
        """
        limits = limits or {}
        _check(amounts, limits)
        return self._add(key, amounts, limits, expires_at)

    def _add(
        self, key: str, amounts: Mapping[str, int], limits: Mapping[str, int], expires_at: float
    ) -> dict[str, int] | None:
        """The store's own atomic check-and-add, the arguments checked."""
        raise NotImplementedError


def _check(amounts: Mapping[str, int], limits: Mapping[str, int]) -> None:
    for name in (*amounts, *limits):
        if not name.isidentifier():
            raise ValueError(f"counter names are identifiers, got {name!r}")
    if set(limits) - set(amounts):
        raise ValueError("every limited counter must be added to")


class MemoryCounters(Counters):
    """Counters in this process's memory (one ``anchored serve``, tests)."""

    name = "memory"

    def __init__(self, clock: Any = time.time) -> None:
        self._items: dict[str, tuple[float, dict[str, int]]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._next_purge = 0.0

    def _add(
        self, key: str, amounts: Mapping[str, int], limits: Mapping[str, int], expires_at: float
    ) -> dict[str, int] | None:
        with self._lock:
            now = self._clock()
            if now >= self._next_purge:
                self._items = {k: v for k, v in self._items.items() if v[0] > now}
                self._next_purge = now + 60
            expiry, values = self._items.get(key, (expires_at, {}))
            if expiry <= now:
                expiry, values = expires_at, {}
            if any(values.get(n, 0) + amounts[n] > limit for n, limit in limits.items()):
                return None
            values = dict(values)
            for n, amount in amounts.items():
                values[n] = values.get(n, 0) + amount
            self._items[key] = (expiry, values)
            return {n: values[n] for n in amounts}


class SQLiteCounters(Counters):
    """Counters in a SQLite file: kept across restarts, shared by local processes."""

    name = "file"

    def __init__(self, path: str | Path, clock: Any = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        # One connection per process, used by every thread in turn: requests run in a
        # pool of worker threads, and the lock makes each add one transaction at a time.
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._next_purge = 0.0

    def _connect(self) -> sqlite3.Connection:
        """The process's connection (call with the lock held)."""
        if self._db is None or self._pid != os.getpid():
            # A forked child must not use its parent's connection: it opens its own.
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread=False: the connection is made in one worker thread and
            # used by the others, never two at once (self._lock).
            db = sqlite3.connect(
                self.path, timeout=5.0, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            # Counters, not records: a commit need not wait for the disk (safe from a
            # crash of the process; a power cut may lose the last few counts).
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS counters (pk TEXT, name TEXT, value INTEGER,"
                " expires_at REAL, PRIMARY KEY (pk, name))"
            )
            self._db, self._pid = db, os.getpid()
        return self._db

    def _add(
        self, key: str, amounts: Mapping[str, int], limits: Mapping[str, int], expires_at: float
    ) -> dict[str, int] | None:
        with self._lock:
            try:
                return self._transaction(key, amounts, limits, expires_at)
            except sqlite3.Error as exc:
                raise StateUnavailable(f"{self.path}: {exc}") from exc

    def _transaction(
        self, key: str, amounts: Mapping[str, int], limits: Mapping[str, int], expires_at: float
    ) -> dict[str, int] | None:
        db = self._connect()
        now = self._clock()
        db.execute("BEGIN IMMEDIATE")  # takes the write lock: check and add are one step
        try:
            if now >= self._next_purge:
                db.execute("DELETE FROM counters WHERE expires_at <= ?", (now,))
                self._next_purge = now + 60
            rows = db.execute(
                "SELECT name, value, expires_at FROM counters WHERE pk = ?", (key,)
            ).fetchall()
            live = [r for r in rows if r[2] > now]
            values = {name: value for name, value, _ in live}
            expiry = live[0][2] if live else expires_at
            if any(values.get(n, 0) + amounts[n] > limit for n, limit in limits.items()):
                db.execute("ROLLBACK")
                return None
            if len(live) < len(rows):
                db.execute("DELETE FROM counters WHERE pk = ? AND expires_at <= ?", (key, now))
            new = {n: values.get(n, 0) + a for n, a in amounts.items()}
            db.executemany(
                "INSERT OR REPLACE INTO counters VALUES (?, ?, ?, ?)",
                [(key, n, v, expiry) for n, v in new.items()],
            )
            db.execute("COMMIT")
            return new
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


class DynamoDBCounters(Counters):
    """Counters in a DynamoDB table with a string partition key ``pk`` and TTL on ``expires_at``.

    Each counter is a number attribute of the item. A limit becomes a condition
    ``attribute_not_exists(c) OR c <= limit - amount``, checked by DynamoDB in
    the same atomic step as the ``ADD``; a failed condition is a refusal.
    """

    name = "dynamodb"

    def __init__(
        self, table: str, *, client: Any = None, region: str | None = None, endpoint_url: str = ""
    ) -> None:
        self.table = table
        self._client = client
        self._once = client  # for updates that must not be applied twice (see add)
        self._region = region
        self._endpoint_url = endpoint_url or None
        self._lock = threading.Lock()

    def _make(self, attempts: int) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(
            connect_timeout=DYNAMODB_CONNECT_TIMEOUT_S,
            read_timeout=DYNAMODB_READ_TIMEOUT_S,
            retries={"mode": "standard", "total_max_attempts": attempts},  # first try included
        )
        return boto3.session.Session().client(
            "dynamodb", region_name=self._region, endpoint_url=self._endpoint_url, config=config
        )

    def client(self) -> Any:
        """The boto3 clients, made on first use (a client costs ~0.1 s); the retrying one.

        Raises StateUnavailable when botocore cannot make one (no region, no model of
        the service in a trimmed package)."""
        from botocore.exceptions import BotoCoreError

        if self._client is None or self._once is None:
            with self._lock:
                try:
                    if self._client is None:
                        self._client = self._make(DYNAMODB_MAX_ATTEMPTS)
                    if self._once is None:
                        self._once = self._make(1)
                except BotoCoreError as exc:
                    raise StateUnavailable(f"no DynamoDB client: {exc}") from exc
        return self._client

    def warm(self) -> None:
        """Make the clients now (in a background thread at cold start); errors wait for use."""
        with contextlib.suppress(StateUnavailable):
            self.client()

    def _add(
        self, key: str, amounts: Mapping[str, int], limits: Mapping[str, int], expires_at: float
    ) -> dict[str, int] | None:
        names = {"#e": "expires_at"}
        values: dict[str, Any] = {":e": {"N": str(int(expires_at))}}
        adds, conditions = [], []
        for i, (name, amount) in enumerate(sorted(amounts.items())):
            names[f"#c{i}"] = name
            values[f":a{i}"] = {"N": str(amount)}
            adds.append(f"#c{i} :a{i}")
            if name in limits:
                room = limits[name] - amount
                if room < 0:
                    return None  # more than the whole limit: no need to ask
                values[f":m{i}"] = {"N": str(room)}
                conditions.append(f"(attribute_not_exists(#c{i}) OR #c{i} <= :m{i})")
        request: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"pk": {"S": key}},
            "UpdateExpression": "SET #e = if_not_exists(#e, :e) ADD " + ", ".join(adds),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValues": "ALL_NEW",
        }
        if conditions:
            request["ConditionExpression"] = " AND ".join(conditions)
        # ADD is not idempotent: an update DynamoDB applied but whose answer was lost
        # (a read timeout) is applied again when retried. Counting up twice errs on the
        # safe side (a stricter limit); counting down twice (a refund) would not, so an
        # update that subtracts is sent once, and if it fails the count stays high.
        retrying = self.client()
        client = self._once if any(a < 0 for a in amounts.values()) else retrying
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = client.update_item(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConditionalCheckFailedException":
                return None
            raise StateUnavailable(f"DynamoDB table {self.table}: {code or 'error'}") from exc
        except BotoCoreError as exc:
            raise StateUnavailable(
                f"DynamoDB table {self.table} unreachable: {type(exc).__name__}"
            ) from exc
        attributes = response.get("Attributes", {})
        return {n: int(attributes[n]["N"]) if n in attributes else 0 for n in amounts}


def open_counters(spec: str, *, region: str | None = None) -> Counters:
    """The store a ``ANCHORED_SHARED_STATE`` value names (``""`` is ``memory``)."""
    spec = spec.strip()
    if spec in ("", "memory"):
        return MemoryCounters()
    kind, _, rest = spec.partition(":")
    if kind == "dynamodb" and rest:
        return DynamoDBCounters(rest, region=region)
    if kind == "file" and rest:
        return SQLiteCounters(rest)
    raise ValueError(
        f"ANCHORED_SHARED_STATE must be memory, dynamodb:TABLE or file:PATH, got {spec!r}"
    )


_shared: dict[tuple[str, str | None], Counters] = {}
_shared_lock = threading.Lock()


def shared_counters(spec: str, *, region: str | None = None) -> Counters:
    """The process's one store for ``spec``: the budget and the rate limits share it
    (and its DynamoDB client and connections). ``memory`` is new on every call."""
    if spec.strip() in ("", "memory"):
        return MemoryCounters()
    with _shared_lock:
        key = (spec.strip(), region)
        if key not in _shared:
            store = open_counters(spec, region=region)
            if isinstance(store, DynamoDBCounters):
                # A botocore client takes ~0.1 s to make: at cold start, not in the first request.
                threading.Thread(target=store.warm, name="dynamodb-client", daemon=True).start()
            _shared[key] = store
        return _shared[key]
