"""The S3 layout of a published index, shared by the publisher and the query side.

Layout under ``s3://bucket/prefix``::

    builds/<build_id>/<name>     every file of the index (flat), manifest.json written last
    current.json                 the pointer readers follow, switched last and conditionally

Here: locations (``S3Location``), the pointer (``Pointer``), a manifest's files
(``ManifestFiles``), checksums as S3 carries them, reading ``current.json``, and the
conditional PUT (``put_json_if_unchanged``) that ``current.json`` and the versions
catalog are replaced with. :mod:`build_index.publish` writes builds with these;
``anchored_query.store.source`` reads them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from build_index.errors import IndexFormatError, PublishError

log = logging.getLogger(__name__)

S3Client = Any  # a boto3 S3 client (boto3 ships no type hints)

MANIFEST = "manifest.json"
CURRENT = "current.json"
BUILDS = "builds"

_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409"}


@dataclass(frozen=True)
class S3Location:
    """``s3://bucket/prefix`` split into its parts; ``prefix`` has no surrounding slashes."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        """Parse ``s3://bucket[/prefix]``; raises ValueError naming the bad URL."""
        if not url.startswith("s3://"):
            raise ValueError(f"not an S3 location (expected s3://bucket/prefix): {url!r}")
        bucket, _, prefix = url[len("s3://") :].partition("/")
        if not bucket:
            raise ValueError(f"S3 location has no bucket name: {url!r}")
        return cls(bucket, prefix.strip("/"))

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` below the prefix."""
        return "/".join(p for p in (self.prefix, *parts) if p)

    def url(self, *parts: str) -> str:
        """The ``s3://`` URL of ``parts`` below the prefix (for messages)."""
        return f"s3://{self.bucket}/{self.key(*parts)}"


@dataclass(frozen=True)
class Pointer:
    """The content of ``current.json``: which build is live and which came before it."""

    build_id: str
    manifest: str  # key of the manifest relative to the prefix: builds/<id>/manifest.json
    manifest_sha256: str
    created: str = ""  # the build's own ``created`` (from its manifest), orders racing builds
    published_at: str = ""
    history: tuple[str, ...] = ()  # previous build ids, newest first

    def to_json(self) -> bytes:
        """Serialise as the bytes written to ``current.json``."""
        data = {
            "build_id": self.build_id,
            "manifest": self.manifest,
            "manifest_sha256": self.manifest_sha256,
            "created": self.created,
            "published_at": self.published_at,
            "history": list(self.history),
        }
        return (json.dumps(data, indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> Pointer:
        """Parse ``current.json``; raises IndexFormatError naming ``where`` when it is malformed."""
        try:
            data = json.loads(raw)
            pointer = cls(
                build_id=str(data["build_id"]),
                manifest=str(data["manifest"]),
                manifest_sha256=str(data["manifest_sha256"]),
                created=str(data.get("created", "")),
                published_at=str(data.get("published_at", "")),
                history=tuple(str(b) for b in data.get("history", [])),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexFormatError(
                f"{where} is not a valid Anchored pointer ({exc}); publish the index again"
            ) from None
        if not _BUILD_ID.match(pointer.build_id) or not _SHA256_HEX.match(pointer.manifest_sha256):
            raise IndexFormatError(f"{where} names a malformed build id or manifest checksum")
        if pointer.manifest != f"{BUILDS}/{pointer.build_id}/{MANIFEST}":
            raise IndexFormatError(f"{where}: manifest {pointer.manifest!r} is not in its build")
        return pointer


@dataclass(frozen=True)
class ManifestFiles:
    """What a publisher or reader needs from a manifest: its id, its files, when it was made."""

    build_id: str
    files: dict[str, tuple[str, int]]  # name -> (sha256 hex, size)
    created: str = ""

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> ManifestFiles:
        """Parse a manifest's ``build_id``, ``created`` and ``files``; raises IndexFormatError."""
        try:
            data = json.loads(raw)
            build_id = str(data["build_id"])
            files = {
                str(name): (str(entry["sha256"]).lower(), int(entry["size"]))
                for name, entry in data["files"].items()
            }
            created = str(data.get("created", ""))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IndexFormatError(f"{where} is not a valid index manifest ({exc})") from None
        if not _BUILD_ID.match(build_id):
            raise IndexFormatError(f"{where}: malformed build_id {build_id!r}")
        for name, (sha, size) in files.items():
            if name in ("", ".", "..", MANIFEST) or "/" in name or "\\" in name:
                raise IndexFormatError(f"{where}: file name {name!r} is not a flat file name")
            if not _SHA256_HEX.match(sha) or size < 0:
                raise IndexFormatError(f"{where}: bad sha256 or size for {name!r}")
        return cls(build_id, files, created)


def hex_to_b64(sha_hex: str) -> str:
    """The base64 form of a hex SHA-256, as S3's ``ChecksumSHA256`` carries it."""
    return base64.b64encode(bytes.fromhex(sha_hex)).decode()


def make_client(
    endpoint_url: str | None = None,
    *,
    connect_timeout: float = 5,
    read_timeout: float = 60,
    attempts: int = 4,
) -> S3Client:
    """An S3 client from the normal credential chain.

    Without ``endpoint_url`` boto3 honours ``AWS_ENDPOINT_URL_S3`` /
    ``AWS_ENDPOINT_URL`` itself. A fresh session per client keeps this safe to
    call from several threads. ``attempts``: calls botocore makes of one request,
    the first included. The defaults suit transfers of whole builds; a
    request that must answer within the function's deadline takes shorter ones.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        # botocore's "max_attempts" counts the retries after the first call;
        # "total_max_attempts" counts every call, as ``attempts`` means here.
        retries={"mode": "standard", "total_max_attempts": max(1, attempts)},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)


# What S3 answers for a key that does not exist to a caller without s3:ListBucket on the
# bucket (the template's function has none: it never lists), as for a key it may not read.
DENIED_CODES = frozenset({"AccessDenied", "403"})


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ClientError (``"404"``, ``"NoSuchKey"``...), else ``""``."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def read_pointer(
    client: S3Client, loc: S3Location, *, lenient: bool = False
) -> tuple[Pointer | None, str | None]:
    """Read ``current.json`` and its ETag; ``(None, None)`` when nothing is published.

    A malformed pointer raises IndexFormatError, or with ``lenient`` reads as
    ``(None, etag)`` so that a publish can replace exactly that broken version.
    """
    from botocore.exceptions import ClientError

    try:
        response = client.get_object(Bucket=loc.bucket, Key=loc.key(CURRENT))
        raw = response["Body"].read()
    except ClientError as exc:
        if error_code(exc) in ("NoSuchKey", "404"):
            return None, None
        raise PublishError(f"cannot read {loc.url(CURRENT)}: {exc}") from exc
    etag = str(response["ETag"])
    try:
        return Pointer.from_json(raw, loc.url(CURRENT)), etag
    except IndexFormatError:
        if not lenient:
            raise
        log.warning("%s is malformed; publishing replaces it", loc.url(CURRENT))
        return None, etag


def put_json_if_unchanged(
    client: S3Client, loc: S3Location, name: str, body: bytes, etag: str | None
) -> bool:
    """PUT the JSON ``body`` as ``name`` below ``loc`` only if that object is still
    ``etag`` (``If-Match``; with no ``etag``, only if it does not exist: ``If-None-Match:
    *``). False when someone changed it meanwhile; any other ClientError passes through."""
    from botocore.exceptions import ClientError

    condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
    try:
        client.put_object(
            Bucket=loc.bucket,
            Key=loc.key(name),
            Body=body,
            ContentType="application/json",
            CacheControl="no-cache",
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=hex_to_b64(hashlib.sha256(body).hexdigest()),
            **condition,
        )
    except ClientError as exc:
        if error_code(exc) in _CONFLICT_CODES:
            return False
        raise
    return True


def get_manifest(client: S3Client, loc: S3Location, build_id: str) -> tuple[bytes, ManifestFiles]:
    """Download and parse one build's manifest; ClientError passes through."""
    key = loc.key(BUILDS, build_id, MANIFEST)
    raw: bytes = client.get_object(Bucket=loc.bucket, Key=key)["Body"].read()
    manifest = ManifestFiles.from_json(raw, loc.url(BUILDS, build_id, MANIFEST))
    if manifest.build_id != build_id:
        raise IndexFormatError(
            f"{loc.url(BUILDS, build_id, MANIFEST)} names build {manifest.build_id}"
        )
    return raw, manifest


def object_present(client: S3Client, bucket: str, key: str, sha_hex: str, size: int) -> bool:
    """True when ``key`` exists with this size and SHA-256 (S3 checksum, else our metadata)."""
    from botocore.exceptions import ClientError

    try:
        head = client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as exc:
        if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    if int(head.get("ContentLength", -1)) != size:
        return False
    checksum = head.get("ChecksumSHA256")
    if checksum:
        return bool(checksum == hex_to_b64(sha_hex))
    return bool(head.get("Metadata", {}).get("sha256") == sha_hex)
