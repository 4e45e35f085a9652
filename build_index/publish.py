"""Publish an index directory to S3 so that a reader never sees half an index.

Layout under ``s3://bucket/prefix`` (:mod:`build_index.s3_store`)::

    builds/<build_id>/<name>     every file of the index (flat), manifest.json written last
    current.json                 the pointer readers follow, switched last and conditionally

A publish uploads one build, then switches ``current.json`` with a conditional
PUT (``If-Match`` the ETag read before, ``If-None-Match: *`` when there is none),
so two publishers racing cannot silently overwrite each other. Files that are
already in the store are not uploaded again: an object that is present with the
same SHA-256 is skipped, and a file that an earlier build holds (the ONNX model,
typically) is copied server-side. Every object written is checked against its
SHA-256: S3 verifies the ``ChecksumSHA256`` we send and we compare the checksum
it reports back.

Rollback and the list of stored builds are here too: they move and read the
same pointer.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from build_index.errors import IndexFormatError, PublishError
from build_index.hashing import sha256_file
from build_index.s3_store import (
    BUILDS,
    CURRENT,
    MANIFEST,
    ManifestFiles,
    Pointer,
    S3Client,
    S3Location,
    error_code,
    get_manifest,
    hex_to_b64,
    make_client,
    object_present,
    put_json_if_unchanged,
    read_pointer,
)

__all__ = [
    "ACTIONS",
    "BUILDS",
    "CURRENT",
    "MANIFEST",
    "BuildInfo",
    "ManifestFiles",
    "Pointer",
    "Progress",
    "PublishResult",
    "S3Client",
    "S3Location",
    "error_code",
    "hex_to_b64",
    "list_builds",
    "make_client",
    "publish",
    "read_pointer",
    "rollback",
]

Progress = Callable[[str, str], None]  # progress(action, name); action in ACTIONS

ACTIONS = ("skip", "copy", "upload", "switch", "prune")

_MAX_SINGLE_PUT = 5 * 1024**3  # S3's limit for one PUT; a bigger file would need multipart
_SWITCH_ATTEMPTS = 5


@dataclass
class PublishResult:
    """What one publish did; the lists name files of the index."""

    target: str
    build_id: str
    uploaded: list[str] = field(default_factory=list)  # PUT from the local directory
    copied: list[str] = field(default_factory=list)  # copied server-side from an earlier build
    skipped: list[str] = field(default_factory=list)  # already present with the same checksum
    bytes_uploaded: int = 0
    switched: bool = False  # current.json now points here (False: it already did)
    previous_build_id: str | None = None
    pruned: list[str] = field(default_factory=list)  # build ids deleted
    switch_attempts: int = 0


@dataclass(frozen=True)
class BuildInfo:
    """One build in the store, as :func:`list_builds` reports it."""

    build_id: str
    files: int
    size: int
    last_modified: datetime
    complete: bool  # its manifest.json is present
    current: bool
    history_position: int | None  # index in current.json's history (0 = previous)


def _put_pointer(client: S3Client, loc: S3Location, pointer: Pointer, etag: str | None) -> bool:
    """Write ``current.json`` only if it is still ``etag``; False when someone changed it."""
    from botocore.exceptions import ClientError

    try:
        return put_json_if_unchanged(client, loc, CURRENT, pointer.to_json(), etag)
    except ClientError as exc:
        raise PublishError(f"cannot write {loc.url(CURRENT)}: {exc}") from exc


def _content_type(name: str) -> str:
    if name.endswith(".json"):
        return "application/json"
    if name.endswith(".jsonl"):
        return "application/x-ndjson"
    return "application/octet-stream"


def _upload(client: S3Client, bucket: str, key: str, path: Path, sha_hex: str, size: int) -> None:
    """PUT one file with its SHA-256, so S3 refuses a body that does not match it."""
    if size > _MAX_SINGLE_PUT:
        raise PublishError(f"{path.name} is {size} bytes; files over 5 GiB are not supported")
    expected = hex_to_b64(sha_hex)
    with path.open("rb") as fh:
        response = client.put_object(
            Bucket=bucket,
            Key=key,
            Body=fh,
            ContentLength=size,
            ContentType=_content_type(path.name),
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=expected,
            Metadata={"sha256": sha_hex},
        )
    reported = response.get("ChecksumSHA256")
    if reported is None:  # a store without flexible checksums: check what landed
        if not object_present(client, bucket, key, sha_hex, size):
            raise PublishError(f"s3://{bucket}/{key} does not match {path.name} after upload")
    elif reported != expected:
        raise PublishError(f"s3://{bucket}/{key}: S3 reports checksum {reported}, sent {expected}")


def _copy(client: S3Client, bucket: str, source: str, key: str, sha_hex: str, name: str) -> bool:
    """Copy an earlier build's object server-side; False when the copy is not provably right."""
    from botocore.exceptions import ClientError

    try:
        response = client.copy_object(
            Bucket=bucket,
            Key=key,
            CopySource={"Bucket": bucket, "Key": source},
            ChecksumAlgorithm="SHA256",
            MetadataDirective="REPLACE",
            Metadata={"sha256": sha_hex},
            ContentType=_content_type(name),
        )
    except ClientError:
        return False  # source pruned meanwhile, or not allowed: upload instead
    # S3 computes the copy's SHA-256 itself; a corrupt source shows up here.
    return bool(response.get("CopyObjectResult", {}).get("ChecksumSHA256") == hex_to_b64(sha_hex))


def _read_local(index_dir: Path) -> tuple[bytes, ManifestFiles]:
    """Read the local manifest and check every file it lists against its SHA-256 and size."""
    path = index_dir / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PublishError(
            f"{index_dir} is not an index directory: {MANIFEST} is missing"
        ) from None
    manifest = ManifestFiles.from_json(raw, str(path))
    for name, (sha, size) in sorted(manifest.files.items()):
        file = index_dir / name
        if not file.is_file():
            raise PublishError(f"{file} is listed in {MANIFEST} but missing; rebuild the index")
        if file.stat().st_size != size or sha256_file(file) != sha:
            raise PublishError(f"{file} does not match {MANIFEST} (changed?); rebuild the index")
    return raw, manifest


def _copy_sources(
    client: S3Client, loc: S3Location, pointer: Pointer | None
) -> dict[str, tuple[str, int]]:
    """SHA-256 -> (key, size) for every file of the live build and its history."""
    from botocore.exceptions import ClientError

    sources: dict[str, tuple[str, int]] = {}
    if pointer is None:
        return sources
    for build_id in (pointer.build_id, *pointer.history):
        try:
            _, manifest = get_manifest(client, loc, build_id)
        except (ClientError, IndexFormatError):
            continue  # pruned or damaged: nothing to copy from it
        for name, (sha, size) in manifest.files.items():
            sources.setdefault(sha, (loc.key(BUILDS, build_id, name), size))
    return sources


def _order(created: str, build_id: str) -> tuple[str, str]:
    return (created, build_id)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def publish(
    index_dir: Path,
    target: str,
    *,
    keep: int = 5,
    client: S3Client | None = None,
    progress: Progress | None = None,
    endpoint_url: str | None = None,
    prune_grace_s: float = 3600.0,
) -> PublishResult:
    """Upload ``index_dir`` to ``target`` (``s3://bucket/prefix``) and make it the live build.

    The build goes to ``builds/<build_id>/`` (data files, then ``manifest.json``),
    then ``current.json`` is switched conditionally. When another publisher
    switched it meanwhile, the newer of the two builds (by the manifests'
    ``created``, then build id) stays live: ours is retried if it is newer,
    otherwise PublishError says which build won. Afterwards builds beyond
    ``keep`` (the live one included) are deleted, but only ones whose newest
    object is older than ``prune_grace_s`` so an upload in progress elsewhere is
    never pulled from under its publisher.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1 (the live build)")
    loc = S3Location.parse(target)
    s3 = client if client is not None else make_client(endpoint_url)
    report = progress if progress is not None else (lambda action, name: None)
    manifest_raw, manifest = _read_local(Path(index_dir))
    build_id = manifest.build_id
    result = PublishResult(target=target, build_id=build_id)

    from botocore.exceptions import BotoCoreError, ClientError

    try:
        current, etag = read_pointer(s3, loc, lenient=True)
        result.previous_build_id = current.build_id if current else None
        sources = _copy_sources(s3, loc, current)
        for name, (sha, size) in sorted(manifest.files.items()):
            key = loc.key(BUILDS, build_id, name)
            if object_present(s3, loc.bucket, key, sha, size):
                result.skipped.append(name)
                report("skip", name)
                continue
            source = sources.get(sha)
            if source and source[1] == size and _copy(s3, loc.bucket, source[0], key, sha, name):
                result.copied.append(name)
                report("copy", name)
                continue
            _upload(s3, loc.bucket, key, Path(index_dir) / name, sha, size)
            result.uploaded.append(name)
            result.bytes_uploaded += size
            report("upload", name)
        # Always (re)written, last: it marks the build complete and is its newest object.
        manifest_sha = hashlib.sha256(manifest_raw).hexdigest()
        _upload(
            s3,
            loc.bucket,
            loc.key(BUILDS, build_id, MANIFEST),
            Path(index_dir) / MANIFEST,
            manifest_sha,
            len(manifest_raw),
        )
        result.uploaded.append(MANIFEST)
        result.bytes_uploaded += len(manifest_raw)
        report("upload", MANIFEST)

        live = _switch(s3, loc, manifest, manifest_sha, current, etag, keep, result)
        if result.switched:
            report("switch", build_id)
        result.pruned = _prune(s3, loc, live, prune_grace_s)
        for pruned in result.pruned:
            report("prune", pruned)
    except (ClientError, BotoCoreError) as exc:
        raise PublishError(
            f"publishing {build_id} to {target} failed: {exc}; the previous build stays live"
        ) from exc
    return result


def _switch(
    s3: S3Client,
    loc: S3Location,
    manifest: ManifestFiles,
    manifest_sha: str,
    current: Pointer | None,
    etag: str | None,
    keep: int,
    result: PublishResult,
) -> Pointer:
    """Point ``current.json`` at ``manifest``'s build; returns the pointer that is live after."""
    build_id = manifest.build_id
    for attempt in range(1, _SWITCH_ATTEMPTS + 1):
        result.switch_attempts = attempt
        if current is not None and current.build_id == build_id:
            return current  # already live (same content published again, or a racer did it)
        history: list[str] = []
        if current is not None:
            history = [current.build_id, *(b for b in current.history if b != build_id)]
        pointer = Pointer(
            build_id=build_id,
            manifest=f"{BUILDS}/{build_id}/{MANIFEST}",
            manifest_sha256=manifest_sha,
            created=manifest.created,
            published_at=_now(),
            history=tuple(history[: keep - 1]),
        )
        if _put_pointer(s3, loc, pointer, etag):
            result.switched = True
            return pointer
        # Someone switched current.json after we read it: look again.
        current, etag = read_pointer(s3, loc, lenient=True)
        if current is not None and current.build_id != build_id:
            ours = _order(manifest.created, build_id)
            if _order(current.created, current.build_id) > ours:
                raise PublishError(
                    f"another publisher made build {current.build_id} (created "
                    f"{current.created or 'unknown'}) live while this publish ran; it is newer "
                    f"than {build_id}, which is uploaded to {loc.url(BUILDS, build_id)} but not "
                    f"live. Run `anchored publish` again if {build_id} should win."
                )
        time.sleep(0.05 * attempt)
    raise PublishError(
        f"{loc.url(CURRENT)} kept changing under {_SWITCH_ATTEMPTS} attempts to switch it to "
        f"{build_id}; the build is uploaded but not live. Try again."
    )


def _build_objects(s3: S3Client, loc: S3Location) -> dict[str, list[dict[str, Any]]]:
    """Every object below ``builds/``, grouped by build id."""
    root = loc.key(BUILDS) + "/"
    builds: dict[str, list[dict[str, Any]]] = {}
    for page in _pages(s3, loc.bucket, root):
        for obj in page.get("Contents", []):
            build_id, _, rest = str(obj["Key"])[len(root) :].partition("/")
            if build_id and rest:
                builds.setdefault(build_id, []).append(obj)
    return builds


def _pages(s3: S3Client, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if token:
            kwargs["ContinuationToken"] = token
        page: dict[str, Any] = s3.list_objects_v2(**kwargs)
        yield page
        if not page.get("IsTruncated"):
            return
        token = page.get("NextContinuationToken")


def _prune(s3: S3Client, loc: S3Location, live: Pointer, grace_s: float) -> list[str]:
    """Delete builds that are neither live nor in its history and older than ``grace_s``."""
    retained = {live.build_id, *live.history}
    cutoff = time.time() - grace_s
    pruned: list[str] = []
    for build_id, objects in sorted(_build_objects(s3, loc).items()):
        if build_id in retained:
            continue
        if max(obj["LastModified"].timestamp() for obj in objects) > cutoff:
            continue  # possibly an upload in progress elsewhere; a later publish prunes it
        keys = [obj["Key"] for obj in objects]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            response = s3.delete_objects(
                Bucket=loc.bucket, Delete={"Objects": batch, "Quiet": True}
            )
            if response.get("Errors"):
                first = response["Errors"][0]
                raise PublishError(
                    f"could not delete s3://{loc.bucket}/{first.get('Key')}: {first.get('Message')}"
                )
        pruned.append(build_id)
    return pruned


def rollback(
    target: str,
    build_id: str | None = None,
    *,
    client: S3Client | None = None,
    endpoint_url: str | None = None,
) -> str:
    """Point ``current.json`` back at ``build_id`` (default: the previous build); returns it.

    The build must still be complete in the store. The switch is conditional:
    if ``current.json`` changes meanwhile, PublishError asks to look and retry
    rather than overriding someone else's change.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    loc = S3Location.parse(target)
    s3 = client if client is not None else make_client(endpoint_url)
    try:
        current, etag = read_pointer(s3, loc)
        if current is None:
            raise PublishError(f"nothing is published at {target}: {CURRENT} is missing")
        if build_id is None:
            if not current.history:
                raise PublishError(f"{loc.url(CURRENT)} has no previous build to roll back to")
            build_id = current.history[0]
        if build_id == current.build_id:
            return build_id
        try:
            raw, manifest = get_manifest(s3, loc, build_id)
        except ClientError as exc:
            raise PublishError(
                f"build {build_id} is not in {target} (pruned?): {exc}; "
                "list_builds() shows the builds available"
            ) from exc
        for name, (sha, size) in sorted(manifest.files.items()):
            if not object_present(s3, loc.bucket, loc.key(BUILDS, build_id, name), sha, size):
                raise PublishError(
                    f"build {build_id} is incomplete: {loc.url(BUILDS, build_id, name)} is "
                    "missing or does not match its checksum"
                )
        history = [current.build_id, *(b for b in current.history if b != build_id)]
        pointer = Pointer(
            build_id=build_id,
            manifest=f"{BUILDS}/{build_id}/{MANIFEST}",
            manifest_sha256=hashlib.sha256(raw).hexdigest(),
            created=manifest.created,
            published_at=_now(),
            history=tuple(history[: max(len(current.history), 1)]),
        )
        if not _put_pointer(s3, loc, pointer, etag):
            raise PublishError(
                f"{loc.url(CURRENT)} changed while rolling back to {build_id}; "
                "check list_builds() and try again"
            )
    except (ClientError, BotoCoreError) as exc:
        raise PublishError(f"rolling back {target} failed: {exc}") from exc
    return build_id


def list_builds(
    target: str, *, client: S3Client | None = None, endpoint_url: str | None = None
) -> list[BuildInfo]:
    """The builds stored under ``target``, newest first, marked live / in history / complete."""
    from botocore.exceptions import BotoCoreError, ClientError

    loc = S3Location.parse(target)
    s3 = client if client is not None else make_client(endpoint_url)
    try:
        current, _ = read_pointer(s3, loc)
        builds = _build_objects(s3, loc)
    except (ClientError, BotoCoreError) as exc:
        raise PublishError(f"cannot list builds in {target}: {exc}") from exc
    history = list(current.history) if current else []
    infos = [
        BuildInfo(
            build_id=build_id,
            files=len(objects),
            size=sum(int(obj["Size"]) for obj in objects),
            last_modified=max(obj["LastModified"] for obj in objects),
            complete=any(str(obj["Key"]).endswith("/" + MANIFEST) for obj in objects),
            current=current is not None and current.build_id == build_id,
            history_position=history.index(build_id) if build_id in history else None,
        )
        for build_id, objects in builds.items()
    ]
    return sorted(infos, key=lambda info: info.last_modified, reverse=True)
