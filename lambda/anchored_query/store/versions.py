"""One deployment, every version: the index location's ``versions.json`` turns versions on.

When ``ANCHORED_INDEX`` holds a versions catalog (``build_index.versions``: what
``anchored publish --version`` and a mike build write), each version is served
from its own store ``versions/<version>/`` by an ``Engine`` of its own (load,
cold-start back-off, refresh: all as for an unversioned index), made on the
first request that names it. At most ``ANCHORED_MAX_VERSIONS_LOADED`` stay in
memory; the least recently asked one is dropped first (requests in flight keep
the build they hold). The catalog is re-read every ``refresh_s`` in the
background (a conditional GET on S3), so a new version or a moved alias is
picked up without a redeploy; a version the catalog no longer names is dropped.

Without a catalog the location is an ordinary index and nothing here runs.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from anchored_query.errors import QueryError
from anchored_query.store.refresher import Refresher
from anchored_query.store.s3_source import request_client
from anchored_query.store.source import DEFAULT_TIME_LIMIT_S
from build_index.errors import IndexFormatError
from build_index.publish import S3Client, S3Location
from build_index.s3_store import DENIED_CODES, error_code
from build_index.versions import (
    VERSIONS,
    Catalog,
    read_catalog_local,
    read_catalog_s3,
    version_location,
)

if TYPE_CHECKING:
    from anchored_query.llm.calls import Deadline
    from anchored_query.settings import Settings

L_co = TypeVar("L_co", covariant=True)


class VersionEngine(Protocol[L_co]):
    """What serves one version: the engine (``anchored_query.engine``), made by the
    router's ``make_engine``."""

    def current(self, version: str | None = None, deadline: Deadline | None = None) -> L_co: ...


log = logging.getLogger("anchored.query")

MAX_LISTED = 20  # names listed in an unknown_version error


class CatalogSource:
    """Reads a store's ``versions.json`` (a local folder or ``s3://``), by ETag on S3."""

    def __init__(
        self,
        location: str,
        *,
        client: S3Client | None = None,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    ) -> None:
        self.location = location
        self.time_limit_s = time_limit_s  # what the S3 client's timeouts are sized to
        self._client = client
        self._etag: str | None = None
        self._loc = S3Location.parse(location) if location.startswith("s3://") else None

    def read(self) -> tuple[Catalog | None, bool]:
        """``(catalog, changed)``: the catalog (None: there is none), and whether it changed
        since the last read. Raises IndexFormatError for a malformed one, botocore errors."""
        if self._loc is None:
            path = self.location.removeprefix("file://")
            return read_catalog_local(Path(path)), True
        if self._client is None:
            self._client = request_client(None, self.time_limit_s)
        catalog, etag, modified = read_catalog_s3(self._client, self._loc, self._etag)
        self._etag = etag
        return catalog, modified


class CatalogUnreadable(Exception):
    """The store did not answer whether it has a catalog (unreachable, denied)."""


def probe(
    location: str, *, client: S3Client | None = None, timeout_s: float = DEFAULT_TIME_LIMIT_S
) -> tuple[CatalogSource, Catalog] | None:
    """The catalog source and catalog when ``location`` is versioned, else None.

    A damaged catalog is a 503 (the engine backs off before probing again, as after a
    failed load); a store that cannot be read, or not within about half of
    ``timeout_s``, raises CatalogUnreadable (the engine then loads as usual, which
    reports the outage and backs off).
    """
    source = CatalogSource(location, client=client, time_limit_s=timeout_s)
    try:
        catalog, _ = source.read()
    except IndexFormatError as exc:
        log.error("versions catalog unusable: %s", exc)
        raise QueryError(
            503, "index_unavailable", "the index is unavailable: its versions catalog is damaged"
        ) from exc
    except Exception as exc:  # botocore: unreachable, denied
        code = error_code(exc)
        if code in DENIED_CODES:
            # A function that may not list the bucket gets 403, not 404, for a missing
            # versions.json: an unversioned store. Probing again would cost every request a GET.
            log.info(
                "no versions catalog at %s (S3 answered %s: it has none, or the function may "
                "not read it); serving it as an unversioned index",
                location,
                code,
            )
            return None
        log.warning("cannot read the versions catalog of %s: %s", location, exc)
        raise CatalogUnreadable(str(exc)) from exc
    return (source, catalog) if catalog is not None else None


def unknown_version(name: str, catalog: Catalog | None) -> QueryError:
    """400 ``unknown_version`` naming the versions and aliases this deployment serves."""
    if catalog is None or not catalog.versions:
        return QueryError(
            400, "unknown_version", "this site's index has no versions; leave out 'version'"
        )
    listed = []
    for entry in catalog.versions[:MAX_LISTED]:
        aliases = f" ({', '.join(entry.aliases)})" if entry.aliases else ""
        listed.append(entry.version + aliases)
    return QueryError(
        400,
        "unknown_version",
        f"version {name!r} is not published; this site has: {', '.join(listed)}",
    )


class VersionRouter(Generic[L_co]):
    """Resolves a request's version or alias and serves it from that version's engine."""

    def __init__(
        self,
        settings: Settings,
        source: CatalogSource,
        catalog: Catalog,
        make_engine: Callable[[Settings], VersionEngine[L_co]],
    ) -> None:
        self.settings = settings
        self.source = source
        self.catalog = catalog
        self.max_loaded = max(1, settings.max_versions_loaded)
        self._make_engine = make_engine
        self._engines: OrderedDict[str, VersionEngine[L_co]] = OrderedDict()
        self._lock = threading.Lock()
        # The catalog re-read at most every refresh_s, in the background (as the index).
        self._refresher = Refresher(
            self._refresh, settings.refresh_s, "anchored-versions-refresh", lock=self._lock
        )

    def current(self, name: str | None, deadline: Deadline | None = None) -> tuple[str, L_co]:
        """The version ``name`` resolves to (None: the default) and its loaded build; a
        cold load of it ends within ``deadline`` (Engine.current)."""
        self._refresher.maybe_start()
        catalog = self.catalog
        version = catalog.resolve(name)
        if version is None:
            raise unknown_version(name or "(default)", catalog)
        return version, self.engine(version).current(deadline=deadline)

    def engine(self, version: str) -> VersionEngine[L_co]:
        """The engine of ``version``, made on first use; drops the least recently used."""
        with self._lock:
            engine = self._engines.get(version)
            if engine is not None:
                self._engines.move_to_end(version)
                return engine
            s = self.settings
            child = replace(
                s,
                index=version_location(s.index, version),
                cache_dir=str(Path(s.cache_dir) / VERSIONS / version),
                llm_provider="none",  # the parent engine answers; a child only loads
            )
            engine = self._make_engine(child)
            self._engines[version] = engine
            while len(self._engines) > self.max_loaded:
                dropped, _ = self._engines.popitem(last=False)
                log.info("version %s dropped from memory (%d loaded)", dropped, self.max_loaded)
            return engine

    def loaded_versions(self) -> list[str]:
        """The versions in memory, least recently used first."""
        with self._lock:
            return list(self._engines)

    def describe(self) -> dict[str, Any]:
        """The catalog as ``/v1/health`` shows it."""
        catalog = self.catalog
        return {
            "default_version": catalog.resolve(None),
            "versions": [
                {"version": v.version, "title": v.title or v.version, "aliases": list(v.aliases)}
                for v in catalog.versions
            ],
            "versions_loaded": self.loaded_versions(),
        }

    # -- catalog refresh ------------------------------------------------------

    def _refresh(self) -> None:
        try:
            catalog, changed = self.source.read()
        except Exception as exc:  # background thread: keep serving the catalog we have
            log.warning("versions catalog refresh failed, keeping the previous one: %s", exc)
            return
        if not changed:
            return
        if catalog is None:
            log.warning("versions catalog disappeared; keeping the previous one")
            return
        self.catalog = catalog
        names = {v.version for v in catalog.versions}
        with self._lock:
            for version in [v for v in self._engines if v not in names]:
                del self._engines[version]
        log.info("versions catalog: %s", ", ".join(sorted(names)))

    def wait_for_refresh(self, timeout_s: float) -> bool:
        """Wait for a catalog refresh in progress (tests); True when none is running."""
        return self._refresher.wait(timeout_s)
