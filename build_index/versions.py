"""Versioned docs (mike): one index per deployed version, side by side in one store.

Layout under a store (``s3://bucket/prefix`` or a local folder)::

    versions.json                    the catalog: versions, their aliases, the default
    versions/<version>/              an ordinary store for that version:
        current.json, builds/<id>/…  (S3, see publish.py)
        manifest.json, …             (a local folder: the index itself)

A version is published in two steps, each atomic: its index is published to
``versions/<version>/`` exactly as an unversioned index is (S3: the build, then
the conditional ``current.json`` switch; a folder: written beside, then swapped
in), and only then does the catalog name it. The catalog is replaced with a
conditional PUT (S3: ``If-Match`` the ETag read, ``If-None-Match: *`` when there
is none) or a rename (a folder), so a reader sees the old catalog or the new
one, and a version the catalog names always has a complete index. Two
publishers of different versions racing each re-read and merge.

The catalog keeps mike's ``versions.json`` shape for its entries
(``version``, ``title``, ``aliases``), newest first, plus a ``default``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from build_index.errors import IndexFormatError, PublishError
from build_index.index_writer import swap_into_place
from build_index.publish import Progress, PublishResult, _read_local, publish
from build_index.s3_store import (
    MANIFEST,
    S3Client,
    S3Location,
    error_code,
    make_client,
    put_json_if_unchanged,
)

CATALOG = "versions.json"
VERSIONS = "versions"
FORMAT = "anchored-versions"
LATEST = "latest"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_ATTEMPTS = 5


def check_name(name: str, what: str = "version") -> str:
    """``name`` when it is a usable version or alias name (a path segment), else ValueError."""
    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise ValueError(
            f"{what} {name!r} is not a usable name: use letters, digits and . _ + - "
            "(at most 64, starting with a letter or digit), e.g. 1.2, dev, latest"
        )
    return name


@dataclass(frozen=True)
class VersionEntry:
    """One deployed version: its name, title, aliases and the build it serves."""

    version: str
    title: str = ""
    aliases: tuple[str, ...] = ()
    build_id: str = ""
    published_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "title": self.title or self.version,
            "aliases": list(self.aliases),
            "build_id": self.build_id,
            "published_at": self.published_at,
        }


@dataclass(frozen=True)
class Catalog:
    """``versions.json``: the versions of a store, newest first, and the default name."""

    versions: tuple[VersionEntry, ...] = ()
    default: str | None = None  # a version or alias; None: ``latest``, else the newest

    def names(self) -> list[str]:
        """Every name a request may use: versions, then aliases."""
        aliases = [a for v in self.versions for a in v.aliases]
        return [v.version for v in self.versions] + aliases

    def resolve(self, name: str | None = None) -> str | None:
        """The version ``name`` (a version or alias) means; ``None`` asks for the default.

        None when ``name`` is unknown (or the catalog is empty).
        """
        if name is None:
            name = self.default or (LATEST if self.find(LATEST) else None)
            if name is None:
                return self.versions[0].version if self.versions else None
        entry = self.find(name)
        return entry.version if entry else None

    def find(self, name: str) -> VersionEntry | None:
        """The entry whose version is ``name``, else the one carrying alias ``name``."""
        for entry in self.versions:
            if entry.version == name:
                return entry
        for entry in self.versions:
            if name in entry.aliases:
                return entry
        return None

    def with_version(
        self,
        version: str,
        *,
        build_id: str,
        aliases: Sequence[str] = (),
        title: str | None = None,
        make_default: bool = False,
    ) -> Catalog:
        """This catalog with ``version`` added or updated; its aliases move to it (as mike's
        ``--update-aliases`` does). An alias that names another version is refused."""
        check_name(version)
        for alias in aliases:
            check_name(alias, "alias")
            if alias == version or any(v.version == alias for v in self.versions):
                raise PublishError(f"alias {alias!r} is the name of a version; choose another")
        if any(version in v.aliases for v in self.versions if v.version != version):
            raise PublishError(f"{version!r} is an alias of another version; choose another name")
        old = next((v for v in self.versions if v.version == version), None)
        moved = set(aliases)
        others = [
            replace(v, aliases=tuple(a for a in v.aliases if a not in moved))
            for v in self.versions
            if v.version != version
        ]
        kept = tuple(a for a in (old.aliases if old else ()) if a not in moved)
        entry = VersionEntry(
            version=version,
            title=title if title is not None else (old.title if old else version),
            aliases=kept + tuple(dict.fromkeys(aliases)),
            build_id=build_id,
            published_at=_now(),
        )
        if old is None:
            entries = [entry, *others]  # a new version goes first (newest first, as mike)
        else:  # an existing version keeps its place
            by_name = {o.version: o for o in others}
            entries = [entry if v.version == version else by_name[v.version] for v in self.versions]
        return Catalog(tuple(entries), version if make_default else self.default)

    def to_json(self) -> bytes:
        data = {
            "format": FORMAT,
            "default": self.default,
            "versions": [v.to_json() for v in self.versions],
        }
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> Catalog:
        """Parse ``versions.json``; IndexFormatError naming ``where`` when it is malformed."""
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT:
                raise ValueError(f"format is {data.get('format')!r}, not {FORMAT!r}")
            default = data.get("default")
            entries = tuple(
                VersionEntry(
                    version=check_name(str(item["version"])),
                    title=str(item.get("title") or item["version"]),
                    aliases=tuple(check_name(str(a), "alias") for a in item.get("aliases", [])),
                    build_id=str(item.get("build_id", "")),
                    published_at=str(item.get("published_at", "")),
                )
                for item in data["versions"]
            )
            if default is not None:
                default = check_name(str(default))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IndexFormatError(
                f"{where} is not a valid Anchored versions catalog ({exc})"
            ) from None
        names = [e.version for e in entries] + [a for e in entries for a in e.aliases]
        if len(names) != len(set(names)):
            raise IndexFormatError(f"{where} names a version or alias twice")
        return cls(entries, default)


@dataclass
class VersionPublishResult:
    """What publishing one version did."""

    target: str
    version: str
    build_id: str
    aliases: tuple[str, ...]
    default: str | None  # the version a request without one gets, after this publish
    index: PublishResult | None = None  # the S3 publish of the version's index
    catalog_attempts: int = 0
    versions: list[str] = field(default_factory=list)


def version_location(store: str, version: str) -> str:
    """The store of one version: ``<store>/versions/<version>`` (S3 URL or folder)."""
    check_name(version)
    if store.startswith("s3://"):
        return store.rstrip("/") + f"/{VERSIONS}/{version}"
    return str(Path(store) / VERSIONS / version)


# -- reading the catalog --------------------------------------------------


def read_catalog_s3(
    client: S3Client, loc: S3Location, etag: str | None = None
) -> tuple[Catalog | None, str | None, bool]:
    """``(catalog, etag, modified)``: ``(None, None, True)`` when there is none;
    with ``etag`` a conditional GET, ``modified`` False when it still matches."""
    from botocore.exceptions import ClientError

    kwargs: dict[str, Any] = {"Bucket": loc.bucket, "Key": loc.key(CATALOG)}
    if etag:
        kwargs["IfNoneMatch"] = etag
    try:
        response = client.get_object(**kwargs)
        raw = response["Body"].read()
    except ClientError as exc:
        code = error_code(exc)
        if code in ("304", "NotModified"):
            return None, etag, False
        if code in ("NoSuchKey", "404"):
            return None, None, True
        raise
    return Catalog.from_json(raw, loc.url(CATALOG)), str(response["ETag"]), True


def read_catalog_local(folder: Path) -> Catalog | None:
    """The catalog of a local store, None when it has none."""
    path = Path(folder) / CATALOG
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return Catalog.from_json(raw, str(path))


# -- publishing -------------------------------------------------------------


def publish_version(
    index_dir: Path,
    store: str,
    version: str,
    *,
    aliases: Sequence[str] = (),
    title: str | None = None,
    make_default: bool = False,
    keep: int = 5,
    client: S3Client | None = None,
    endpoint_url: str | None = None,
    progress: Progress | None = None,
) -> VersionPublishResult:
    """Publish ``index_dir`` as ``version`` of ``store`` (``s3://…`` or a folder), then name
    it (and move ``aliases`` to it) in the store's catalog.

    ``make_default`` makes it the version a request without one gets; otherwise
    that stays as it was (``latest`` when some version has that alias, else the
    newest). Raises PublishError (nothing named in the catalog changes) or ValueError
    for a bad name.
    """
    check_name(version)
    for alias in aliases:
        check_name(alias, "alias")
    if store.startswith("s3://"):
        return _publish_s3(
            Path(index_dir),
            store,
            version,
            aliases,
            title,
            make_default,
            keep,
            client,
            endpoint_url,
            progress,
        )
    return _publish_local(Path(index_dir), Path(store), version, aliases, title, make_default)


def _publish_s3(
    index_dir: Path,
    store: str,
    version: str,
    aliases: Sequence[str],
    title: str | None,
    make_default: bool,
    keep: int,
    client: S3Client | None,
    endpoint_url: str | None,
    progress: Progress | None,
) -> VersionPublishResult:
    from botocore.exceptions import BotoCoreError, ClientError

    loc = S3Location.parse(store)
    s3 = client if client is not None else make_client(endpoint_url)
    try:
        catalog, _, _ = read_catalog_s3(s3, loc)
        # Refused before anything is uploaded (an alias that is a version's name).
        (catalog or Catalog()).with_version(version, build_id="-", aliases=aliases)
        index = publish(
            index_dir, version_location(store, version), keep=keep, client=s3, progress=progress
        )
        for attempt in range(1, _ATTEMPTS + 1):
            catalog, etag, _ = read_catalog_s3(s3, loc)
            new = (catalog or Catalog()).with_version(
                version,
                build_id=index.build_id,
                aliases=aliases,
                title=title,
                make_default=make_default,
            )
            if put_json_if_unchanged(s3, loc, CATALOG, new.to_json(), etag):
                return _result(store, version, index.build_id, new, index, attempt)
            time.sleep(0.05 * attempt)
    except (ClientError, BotoCoreError) as exc:
        raise PublishError(
            f"publishing version {version} to {store} failed: {exc}; the catalog is unchanged"
        ) from exc
    raise PublishError(
        f"{loc.url(CATALOG)} kept changing under {_ATTEMPTS} attempts to add version {version}; "
        f"its index is published to {version_location(store, version)} but the catalog does "
        "not name it yet. Try again."
    )


def _publish_local(
    index_dir: Path,
    store: Path,
    version: str,
    aliases: Sequence[str],
    title: str | None,
    make_default: bool,
) -> VersionPublishResult:
    store = store.absolute()
    catalog = read_catalog_local(store) or Catalog()
    catalog.with_version(version, build_id="-", aliases=aliases)  # refuse bad aliases first
    _, manifest = _read_local(index_dir)  # every file checked against its SHA-256
    dest = Path(version_location(str(store), version))
    if index_dir.absolute() != dest:
        _copy_index(index_dir, dest)
    new = catalog.with_version(
        version,
        build_id=manifest.build_id,
        aliases=aliases,
        title=title,
        make_default=make_default,
    )
    _write_atomic(store / CATALOG, new.to_json())
    return _result(str(store), version, manifest.build_id, new, None, 1)


def record_local_version(
    store: Path,
    version: str,
    *,
    aliases: Sequence[str] = (),
    title: str | None = None,
    make_default: bool = False,
) -> VersionPublishResult:
    """Name the index already written to ``<store>/versions/<version>`` in the catalog
    (the plugin builds a version's index in place)."""
    dest = Path(version_location(str(store), version))
    return _publish_local(dest, store, version, aliases, title, make_default)


def _copy_index(source: Path, dest: Path) -> None:
    """Copy an index folder to ``dest``: written beside it, then swapped in."""
    if dest.is_dir() and any(dest.iterdir()) and not (dest / MANIFEST).is_file():
        raise PublishError(f"{dest} exists and is not an Anchored index; remove it first")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        tmp.chmod(0o755)
        for item in source.iterdir():
            if item.is_file():
                shutil.copy2(item, tmp / item.name)
        swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name, fsynced before the rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _result(
    store: str,
    version: str,
    build_id: str,
    catalog: Catalog,
    index: PublishResult | None,
    attempts: int,
) -> VersionPublishResult:
    entry = catalog.find(version)
    return VersionPublishResult(
        target=store,
        version=version,
        build_id=build_id,
        aliases=entry.aliases if entry else (),
        default=catalog.resolve(None),
        index=index,
        catalog_attempts=attempts,
        versions=[v.version for v in catalog.versions],
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
