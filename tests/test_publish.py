"""Publishing an index to S3 (moto in server mode, over real HTTP)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from s3server import MotoS3, S3Bucket, moto_s3, s3, write_fake_index

from build_index.errors import IndexFormatError, PublishError
from build_index.publish import (
    Pointer,
    S3Location,
    list_builds,
    publish,
    rollback,
)

__all__ = ["moto_s3", "s3"]  # fixtures used by name

FILES = {
    "chunks.jsonl": b'{"id": "a"}\n{"id": "b"}\n',
    "vectors.npy": bytes(range(256)) * 16,
    "vocab.json": b'{"anchored": 0}',
    "model.onnx": hashlib.sha256(b"model").digest() * 8192,  # 256 KiB: the "big" file
}


def _index(tmp_path: Path, name: str, created: str, **changes: bytes) -> tuple[Path, str]:
    directory = tmp_path / name
    return directory, write_fake_index(directory, {**FILES, **changes}, created=created)


def _pointer(s3: S3Bucket) -> Pointer:
    return Pointer.from_json(s3.get("site/current.json"), "current.json")


def _assert_complete(s3: S3Bucket, pointer: Pointer) -> None:
    """The pointer's manifest matches its checksum and every file it lists is intact."""
    raw = s3.get(f"site/{pointer.manifest}")
    assert hashlib.sha256(raw).hexdigest() == pointer.manifest_sha256
    manifest = json.loads(raw)
    assert manifest["build_id"] == pointer.build_id
    for name, entry in manifest["files"].items():
        data = s3.get(f"site/builds/{pointer.build_id}/{name}")
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name


def test_s3_location_parses_bucket_and_prefix() -> None:
    assert S3Location.parse("s3://bkt/a/b/") == S3Location("bkt", "a/b")
    assert S3Location.parse("s3://bkt").key("current.json") == "current.json"
    assert S3Location("bkt", "docs").url("builds", "x") == "s3://bkt/docs/builds/x"
    with pytest.raises(ValueError, match="not an S3 location"):
        S3Location.parse("/local/dir")


def test_moto_honours_what_publishing_relies_on(s3: S3Bucket) -> None:
    """Conditional PUTs, stored SHA-256 checksums and checksummed copies (see s3server.py)."""
    c, b = s3.client, s3.name
    sha = base64.b64encode(hashlib.sha256(b"one").digest()).decode()
    put = c.put_object(
        Bucket=b, Key="k", Body=b"one", ChecksumAlgorithm="SHA256", ChecksumSHA256=sha
    )
    assert put["ChecksumSHA256"] == sha
    assert c.head_object(Bucket=b, Key="k", ChecksumMode="ENABLED")["ChecksumSHA256"] == sha
    for condition in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123"'}):
        with pytest.raises(ClientError) as caught:
            c.put_object(Bucket=b, Key="k", Body=b"two", **condition)
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    c.put_object(Bucket=b, Key="k", Body=b"two", IfMatch=put["ETag"])
    copy = c.copy_object(
        Bucket=b, Key="k2", CopySource={"Bucket": b, "Key": "k"}, ChecksumAlgorithm="SHA256"
    )
    assert (
        copy["CopyObjectResult"]["ChecksumSHA256"]
        == base64.b64encode(hashlib.sha256(b"two").digest()).decode()
    )


def test_publish_uploads_the_build_then_switches_the_pointer(s3: S3Bucket, tmp_path: Path) -> None:
    directory, build_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    events: list[tuple[str, str]] = []
    result = publish(directory, s3.url, client=s3.client, progress=lambda *e: events.append(e))

    assert result.build_id == build_id and result.switched
    assert sorted(result.uploaded) == sorted([*FILES, "manifest.json"])
    assert result.copied == [] and result.skipped == [] and result.previous_build_id is None
    assert s3.keys() == sorted(
        ["site/current.json"] + [f"site/builds/{build_id}/{n}" for n in [*FILES, "manifest.json"]]
    )
    pointer = _pointer(s3)
    assert pointer.build_id == build_id and pointer.history == ()
    assert pointer.manifest == f"builds/{build_id}/manifest.json"
    _assert_complete(s3, pointer)
    assert events[-2:] == [("upload", "manifest.json"), ("switch", build_id)]
    head = s3.client.head_object(
        Bucket=s3.name, Key=f"site/builds/{build_id}/model.onnx", ChecksumMode="ENABLED"
    )
    assert (
        head["ChecksumSHA256"]
        == base64.b64encode(hashlib.sha256(FILES["model.onnx"]).digest()).decode()
    )


def test_publishing_the_same_build_again_uploads_nothing_but_the_manifest(
    s3: S3Bucket, tmp_path: Path
) -> None:
    directory, build_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    publish(directory, s3.url, client=s3.client)
    etag = s3.client.head_object(Bucket=s3.name, Key="site/current.json")["ETag"]

    again = publish(directory, s3.url, client=s3.client)
    assert sorted(again.skipped) == sorted(FILES) and again.uploaded == ["manifest.json"]
    assert not again.switched and again.previous_build_id == build_id
    assert s3.client.head_object(Bucket=s3.name, Key="site/current.json")["ETag"] == etag


def test_a_changed_file_is_the_only_one_uploaded(s3: S3Bucket, tmp_path: Path) -> None:
    first, first_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    publish(first, s3.url, client=s3.client)
    second, second_id = _index(
        tmp_path, "two", "2026-01-02T00:00:00+00:00", **{"chunks.jsonl": b'{"id": "c"}\n'}
    )
    client, calls = s3.counting_client()

    result = publish(second, s3.url, client=client)
    assert result.uploaded == ["chunks.jsonl", "manifest.json"]
    assert sorted(result.copied) == ["model.onnx", "vectors.npy", "vocab.json"]
    assert result.bytes_uploaded == len(b'{"id": "c"}\n') + len(
        (second / "manifest.json").read_bytes()
    )
    # On the wire: the two PUTs, the pointer, and server-side copies for the rest.
    assert calls["PutObject"] == 3 and calls["CopyObject"] == 3
    pointer = _pointer(s3)
    assert pointer.build_id == second_id and pointer.history == (first_id,)
    _assert_complete(s3, pointer)


def test_a_corrupt_object_in_an_earlier_build_is_not_copied(s3: S3Bucket, tmp_path: Path) -> None:
    first, first_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    publish(first, s3.url, client=s3.client)
    s3.client.put_object(
        Bucket=s3.name,
        Key=f"site/builds/{first_id}/model.onnx",
        Body=b"x" * len(FILES["model.onnx"]),
    )
    second, _ = _index(tmp_path, "two", "2026-01-02T00:00:00+00:00", **{"vocab.json": b"{}"})

    result = publish(second, s3.url, client=s3.client)
    assert "model.onnx" in result.uploaded and "model.onnx" not in result.copied
    _assert_complete(s3, _pointer(s3))


def test_a_local_file_that_no_longer_matches_its_manifest_is_refused(
    s3: S3Bucket, tmp_path: Path
) -> None:
    directory, _ = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    (directory / "vectors.npy").write_bytes(b"changed after the build")
    with pytest.raises(PublishError, match=r"vectors.npy does not match manifest.json"):
        publish(directory, s3.url, client=s3.client)
    assert s3.keys() == []


def test_a_malformed_pointer_is_replaced_by_the_next_publish(s3: S3Bucket, tmp_path: Path) -> None:
    s3.client.put_object(Bucket=s3.name, Key="site/current.json", Body=b"{not json")
    with pytest.raises(IndexFormatError, match="not a valid Anchored pointer"):
        rollback(s3.url, client=s3.client)
    directory, build_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")

    result = publish(directory, s3.url, client=s3.client)
    assert result.switched and result.previous_build_id is None
    assert _pointer(s3).build_id == build_id


def _pause_before_switch(client: Any, reached: threading.Event, resume: threading.Event) -> None:
    """Make ``client`` stop just before its first PUT of current.json until ``resume``."""

    def hook(params: dict[str, Any], **_: Any) -> None:
        if params["Key"].endswith("current.json") and not reached.is_set():
            reached.set()
            assert resume.wait(30)

    client.meta.events.register("before-parameter-build.s3.PutObject", hook)


@pytest.mark.parametrize("late_is_newer", [False, True])
def test_a_publisher_that_lost_the_race_never_overwrites_blindly(
    s3: S3Bucket, moto_s3: MotoS3, tmp_path: Path, late_is_newer: bool
) -> None:
    """A reads current.json, B switches it, then A's conditional PUT fails (412).

    A retries only when its build is the newer one; otherwise it raises and B stays live.
    """
    base, base_id = _index(tmp_path, "base", "2026-01-01T00:00:00+00:00")
    publish(base, s3.url, client=s3.client)
    a_created, b_created = "2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"
    if late_is_newer:
        a_created, b_created = b_created, a_created
    a_dir, a_id = _index(tmp_path, "a", a_created, **{"vocab.json": b'{"a": 1}'})
    b_dir, b_id = _index(tmp_path, "b", b_created, **{"vocab.json": b'{"b": 1}'})

    a_client = moto_s3.client()
    reached, resume = threading.Event(), threading.Event()
    _pause_before_switch(a_client, reached, resume)
    outcome: list[Any] = []

    def run_a() -> None:
        try:
            outcome.append(publish(a_dir, s3.url, client=a_client))
        except PublishError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run_a)
    thread.start()
    assert reached.wait(30)
    b_result = publish(b_dir, s3.url, client=moto_s3.client())
    resume.set()
    thread.join(30)

    assert b_result.switched
    (a_outcome,) = outcome
    pointer = _pointer(s3)
    _assert_complete(s3, pointer)
    if late_is_newer:
        assert not isinstance(a_outcome, Exception)
        assert a_outcome.switched and a_outcome.switch_attempts == 2
        assert pointer.build_id == a_id and pointer.history == (b_id, base_id)
    else:
        assert isinstance(a_outcome, PublishError)
        assert b_id in str(a_outcome) and "newer" in str(a_outcome)
        assert pointer.build_id == b_id and pointer.history == (base_id,)


def test_racing_publishers_leave_one_complete_build_live(
    s3: S3Bucket, moto_s3: MotoS3, tmp_path: Path
) -> None:
    builds = [
        _index(tmp_path, f"b{i}", f"2026-01-0{i + 1}T00:00:00+00:00", **{"vocab.json": b"%d" % i})
        for i in range(4)
    ]
    start = threading.Barrier(len(builds))
    outcomes: list[Any] = []

    def run(directory: Path) -> None:
        client = moto_s3.client()
        start.wait()
        try:
            outcomes.append(publish(directory, s3.url, client=client))
        except PublishError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=run, args=(d,)) for d, _ in builds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert len(outcomes) == len(builds)
    assert all(isinstance(o, PublishError) or o.switched for o in outcomes)
    assert any(not isinstance(o, PublishError) for o in outcomes)
    pointer = _pointer(s3)
    assert pointer.build_id in {build_id for _, build_id in builds}
    _assert_complete(s3, pointer)


def test_a_reader_polling_during_publishes_always_sees_a_complete_build(
    s3: S3Bucket, moto_s3: MotoS3, tmp_path: Path
) -> None:
    first, _ = _index(tmp_path, "b0", "2026-01-01T00:00:00+00:00")
    publish(first, s3.url, client=s3.client)
    reader = S3Bucket(server=moto_s3, name=s3.name, client=moto_s3.client())
    done = threading.Event()
    seen: set[str] = set()
    failures: list[BaseException] = []

    def poll() -> None:
        while not done.is_set():
            try:
                pointer = _pointer(reader)
                _assert_complete(reader, pointer)
                seen.add(pointer.build_id)
            except BaseException as exc:  # collected and asserted below
                failures.append(exc)
                return

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        for i in range(1, 4):
            directory, _ = _index(
                tmp_path,
                f"b{i}",
                f"2026-01-0{i + 1}T00:00:00+00:00",
                **{"chunks.jsonl": b"%d\n" % i, "vectors.npy": bytes([i]) * 4096},
            )
            publish(directory, s3.url, client=s3.client)
    finally:
        done.set()
        thread.join(30)
    assert failures == []
    assert len(seen) >= 2


def test_rollback_points_back_at_the_previous_build(s3: S3Bucket, tmp_path: Path) -> None:
    one, one_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    two, two_id = _index(tmp_path, "two", "2026-01-02T00:00:00+00:00", **{"vocab.json": b"{}"})
    publish(one, s3.url, client=s3.client)
    publish(two, s3.url, client=s3.client)

    assert rollback(s3.url, client=s3.client) == one_id
    pointer = _pointer(s3)
    assert pointer.build_id == one_id and pointer.history == (two_id,)
    _assert_complete(s3, pointer)
    assert rollback(s3.url, two_id, client=s3.client) == two_id
    assert _pointer(s3).build_id == two_id
    with pytest.raises(PublishError, match="not in"):
        rollback(s3.url, "0123456789abcdef", client=s3.client)


def test_rollback_refuses_when_the_pointer_changes_underneath(
    s3: S3Bucket, moto_s3: MotoS3, tmp_path: Path
) -> None:
    one, _ = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    two, two_id = _index(tmp_path, "two", "2026-01-02T00:00:00+00:00", **{"vocab.json": b"{}"})
    publish(one, s3.url, client=s3.client)
    publish(two, s3.url, client=s3.client)
    client = moto_s3.client()
    rewritten = json.loads(s3.get("site/current.json"))
    rewritten["published_at"] = "2026-02-01T00:00:00+00:00"

    def rewrite_first(params: dict[str, Any], **_: Any) -> None:
        if params["Key"].endswith("current.json"):  # someone else writes in between
            body = json.dumps(rewritten).encode()
            s3.client.put_object(Bucket=s3.name, Key="site/current.json", Body=body)

    client.meta.events.register("before-parameter-build.s3.PutObject", rewrite_first)
    with pytest.raises(PublishError, match="changed while rolling back"):
        rollback(s3.url, client=client)
    assert _pointer(s3).build_id == two_id


def test_rollback_to_an_incomplete_build_is_refused(s3: S3Bucket, tmp_path: Path) -> None:
    one, one_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    two, two_id = _index(tmp_path, "two", "2026-01-02T00:00:00+00:00", **{"vocab.json": b"{}"})
    publish(one, s3.url, client=s3.client)
    publish(two, s3.url, client=s3.client)
    s3.client.delete_object(Bucket=s3.name, Key=f"site/builds/{one_id}/vectors.npy")
    with pytest.raises(PublishError, match="incomplete"):
        rollback(s3.url, client=s3.client)
    assert _pointer(s3).build_id == two_id


def test_pruning_keeps_the_live_build_and_its_recent_history(s3: S3Bucket, tmp_path: Path) -> None:
    ids = []
    for i in range(4):
        directory, build_id = _index(
            tmp_path, f"b{i}", f"2026-01-0{i + 1}T00:00:00+00:00", **{"vocab.json": b"%d" % i}
        )
        ids.append(build_id)
        result = publish(directory, s3.url, client=s3.client, keep=2, prune_grace_s=0)
    assert result.pruned == [ids[1]]  # ids[0] went when ids[2] was published

    builds = list_builds(s3.url, client=s3.client)
    assert {b.build_id for b in builds} == {ids[3], ids[2]}
    live = next(b for b in builds if b.current)
    assert live.build_id == ids[3] and live.complete and live.files == len(FILES) + 1
    assert next(b for b in builds if not b.current).history_position == 0
    assert _pointer(s3).history == (ids[2],)


def test_pruning_spares_a_build_another_publisher_may_still_be_uploading(
    s3: S3Bucket, tmp_path: Path
) -> None:
    s3.client.put_object(Bucket=s3.name, Key="site/builds/inprogress0000000/vectors.npy", Body=b"")
    one, one_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    result = publish(one, s3.url, client=s3.client, keep=1)
    assert result.pruned == []
    assert {b.build_id for b in list_builds(s3.url, client=s3.client)} == {
        one_id,
        "inprogress0000000",
    }


def test_publish_finds_the_endpoint_in_the_environment(
    s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    directory, build_id = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    assert publish(directory, s3.url).build_id == build_id
    assert [b.build_id for b in list_builds(s3.url)] == [build_id]


def test_publishing_to_an_unreachable_store_fails_clearly(tmp_path: Path) -> None:
    directory, _ = _index(tmp_path, "one", "2026-01-01T00:00:00+00:00")
    unreachable = MotoS3()
    unreachable.endpoint_url = "http://127.0.0.1:9"  # nothing listens there
    client = unreachable.client(retries={"max_attempts": 1}, connect_timeout=2)
    with pytest.raises(PublishError, match=r"Could not connect.*previous build stays live"):
        publish(directory, "s3://bkt/site", client=client)
