"""Embedding models: what one is (:class:`ModelSpec`, its folder's descriptor) and the named ones.

A model is a directory holding ``model.onnx``, ``tokenizer.json`` and
``anchored-model.json`` (the descriptor :meth:`ModelSpec.from_dir` reads); the
default model ships in the package (``build_index/models/all-MiniLM-L6-v2``),
and the same three files travel inside every index directory, so queries are
embedded by exactly the model that embedded the chunks. :func:`get_model`
turns a registered name or a model directory's path into its spec;
:class:`build_index.embedder.Embedder` runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from build_index.errors import ModelError
from build_index.hashing import sha256_file
from build_index.index_manifest import (
    MODEL_DESCRIPTOR_FORMAT,
    MODEL_DESCRIPTOR_VERSION,
    MODEL_JSON,
    model_descriptor,
    model_record,
)

__all__ = [
    "DEFAULT_MODEL",
    "DESCRIPTOR_NAME",
    "FLOAT32_COMPUTE",
    "MINILM_SHA256",
    "ModelSpec",
    "get_model",
    "known_models",
    "model_sha256",
    "user_model_dir",
]

#: The model used when nothing is configured.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: File name of the model descriptor inside a model (or index) directory.
DESCRIPTOR_NAME = MODEL_JSON

_BUILTIN_DIR = Path(__file__).resolve().parent / "models"
#: sha256 of the shipped int8 MiniLM (see build_index/models/all-MiniLM-L6-v2/NOTICE.md).
MINILM_SHA256 = "8bc3e039ce4329526493d9042c40791d3a3fbe7716b75f404f6eb791630e7aa8"

_POOLINGS = ("mean", "cls")
_COMPUTES = ("", "float32")
#: onnxruntime session config for ``compute == "float32"``: fold the DequantizeLinear
#: nodes of int8 weights into float32 constants at load, instead of fusing them into
#: int8 kernels (which differ between CPUs).
FLOAT32_COMPUTE = {"session.disable_quant_qdq": "1"}


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to load an embedding model and to record it in a manifest.

    ``path`` is the ONNX file, ``tokenizer_path`` a Hugging Face ``tokenizer.json``.
    ``sha256`` is the hex digest of the ONNX file; :class:`Embedder` refuses a file
    whose bytes do not match it. ``query_prefix`` / ``passage_prefix`` are
    prepended to every query / passage (``"query: "`` / ``"passage: "`` for E5).
    ``compute``: ``"float32"`` for a graph whose weights are stored as int8 behind
    ``DequantizeLinear`` nodes, to be expanded once at load and multiplied in float32
    (:class:`Embedder` tells onnxruntime so), which makes the vectors the same on every
    CPU; ``""`` runs the graph as it is (int8 kernels differ between CPUs: AVX2,
    AVX-512 VNNI and arm64 give vectors up to 0.8% apart in cosine).
    """

    name: str
    path: Path
    tokenizer_path: Path
    sha256: str
    dim: int
    dtype: str = "int8"
    pooling: str = "mean"
    max_tokens: int = 256
    query_prefix: str = ""
    passage_prefix: str = ""
    compute: str = ""

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> ModelSpec:
        """Read a model directory (``model.onnx`` + ``tokenizer.json`` + descriptor).

        Raises :class:`ModelError` naming the directory and what is wrong when a
        file is missing or the descriptor is malformed. The ONNX file's hash is
        checked later, when an :class:`Embedder` loads it (or by :meth:`verify`).
        """
        root = Path(directory).expanduser()
        desc_path = root / DESCRIPTOR_NAME
        if not root.is_dir():
            raise ModelError(f"model directory {root} does not exist")
        if not desc_path.is_file():
            raise ModelError(
                f"{root} is not a model directory: {DESCRIPTOR_NAME} is missing "
                "(a model directory holds model.onnx, tokenizer.json and "
                f"{DESCRIPTOR_NAME}; see ModelSpec.write_descriptor)"
            )
        try:
            raw = json.loads(desc_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"{desc_path} is not valid JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise ModelError(f"{desc_path} must hold a JSON object")
        if raw.get("format", MODEL_DESCRIPTOR_FORMAT) != MODEL_DESCRIPTOR_FORMAT:
            raise ModelError(f"{desc_path}: format is {raw.get('format')!r}, not 'anchored-model'")
        if raw.get("version", MODEL_DESCRIPTOR_VERSION) != MODEL_DESCRIPTOR_VERSION:
            raise ModelError(
                f"{desc_path}: descriptor version {raw.get('version')!r} is not supported "
                f"(this Anchored reads version {MODEL_DESCRIPTOR_VERSION})"
            )
        try:
            spec = cls(
                name=str(raw["name"]),
                path=root / str(raw.get("onnx", "model.onnx")),
                tokenizer_path=root / str(raw.get("tokenizer", "tokenizer.json")),
                sha256=str(raw["sha256"]).lower(),
                dim=int(raw["dim"]),
                dtype=str(raw.get("dtype", "int8")),
                pooling=str(raw.get("pooling", "mean")),
                max_tokens=int(raw.get("max_tokens", 256)),
                query_prefix=str(raw.get("query_prefix", "")),
                passage_prefix=str(raw.get("passage_prefix", "")),
                compute=str(raw.get("compute", "")),
            )
        except KeyError as exc:
            raise ModelError(f"{desc_path}: required key {exc.args[0]!r} is missing") from exc
        except (TypeError, ValueError) as exc:
            raise ModelError(f"{desc_path}: bad value: {exc}") from exc
        spec.check()
        return spec

    def check(self) -> None:
        """Validate the fields and that both files exist (no hashing)."""
        if self.pooling not in _POOLINGS:
            raise ModelError(
                f"model {self.name!r}: pooling {self.pooling!r} is not one of {list(_POOLINGS)}"
            )
        if self.compute not in _COMPUTES:
            raise ModelError(
                f"model {self.name!r}: compute {self.compute!r} is not one of {list(_COMPUTES)}"
            )
        if self.dim <= 0 or self.max_tokens <= 0:
            raise ModelError(f"model {self.name!r}: dim and max_tokens must be positive")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ModelError(f"model {self.name!r}: sha256 {self.sha256!r} is not a hex digest")
        for label, p in (("ONNX file", self.path), ("tokenizer", self.tokenizer_path)):
            if not p.is_file():
                raise ModelError(f"model {self.name!r}: {label} {p} is missing")

    def verify(self) -> None:
        """Hash the ONNX file and raise :class:`ModelError` unless it matches ``sha256``."""
        actual = model_sha256(self.path)
        if actual != self.sha256:
            raise ModelError(
                f"model {self.name!r}: {self.path} has sha256 {actual}, expected "
                f"{self.sha256}; the file is corrupt or is another model — reinstall "
                "Anchored or rebuild the index with the model you mean"
            )

    def describe(self) -> dict[str, Any]:
        """The manifest's ``model`` record (no paths): what identifies the vectors."""
        return model_record(self)

    @property
    def vectors_id(self) -> str:
        """A 64-hex id of what a passage's vector depends on: the file's bytes and how
        it is run (pooling, token limit, passage prefix, compute). It keys the
        embedding cache and the reuse of a published build, so that editing a
        descriptor re-embeds instead of keeping vectors made the other way."""
        how = {
            "sha256": self.sha256,
            "pooling": self.pooling,
            "max_tokens": self.max_tokens,
            "passage_prefix": self.passage_prefix,
            "compute": self.compute,
        }
        return hashlib.sha256(json.dumps(how, sort_keys=True).encode()).hexdigest()

    def session_entries(self) -> dict[str, str]:
        """onnxruntime session config entries this model needs (see ``compute``)."""
        return dict(FLOAT32_COMPUTE) if self.compute == "float32" else {}

    def write_descriptor(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``anchored-model.json`` for this spec into ``directory``.

        File names recorded are those of :meth:`copy_to` (``model.onnx``,
        ``tokenizer.json``). Returns the descriptor's path.
        """
        out = Path(directory) / DESCRIPTOR_NAME
        record = model_descriptor(self)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, out)
        return out

    def copy_to(self, directory: str | os.PathLike[str]) -> list[str]:
        """Copy the model into ``directory`` so :meth:`from_dir` can load it from there.

        Writes ``model.onnx``, ``tokenizer.json`` and ``anchored-model.json``
        (what travels inside an index directory) and returns those file names.
        """
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        for src, name in ((self.path, "model.onnx"), (self.tokenizer_path, "tokenizer.json")):
            dst = root / name
            if src.resolve() != dst.resolve():
                shutil.copyfile(src, dst)
        self.write_descriptor(root)
        return ["model.onnx", "tokenizer.json", DESCRIPTOR_NAME]


_hash_lock = threading.Lock()
_hash_cache: dict[tuple[str, int, int], str] = {}


def model_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a model file, memoised on (resolved path, mtime_ns, size)."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise ModelError(f"cannot read model file {p}: {exc}") from exc
    key = (str(p), st.st_mtime_ns, st.st_size)
    with _hash_lock:
        cached = _hash_cache.get(key)
    if cached is not None:
        return cached
    value = sha256_file(p)
    with _hash_lock:
        _hash_cache[key] = value
    return value


def _builtin_minilm() -> ModelSpec:
    spec = ModelSpec.from_dir(_BUILTIN_DIR / "all-MiniLM-L6-v2")
    if spec.sha256 != MINILM_SHA256:
        raise ModelError(
            f"the packaged all-MiniLM-L6-v2 descriptor names sha256 {spec.sha256}, "
            f"expected {MINILM_SHA256}: the installation is inconsistent, reinstall Anchored"
        )
    return spec


def user_model_dir(name: str) -> Path:
    """Where converted models live: ``$ANCHORED_MODEL_HOME/<name>``.

    ``ANCHORED_MODEL_HOME`` defaults to ``$XDG_CACHE_HOME/anchored/models``
    (``~/.cache/anchored/models``).
    """
    home = os.environ.get("ANCHORED_MODEL_HOME")
    if home:
        return Path(home).expanduser() / name
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "anchored" / "models" / name


E5_CONVERT_COMMAND = "anchored model install multilingual-e5-small"


def _multilingual_e5_small() -> ModelSpec:
    root = user_model_dir("multilingual-e5-small")
    if not (root / DESCRIPTOR_NAME).is_file():
        raise ModelError(
            "model 'multilingual-e5-small' is not converted on this machine "
            f"(looked in {root}). Create it once with:  "
            f'pip install "mkdocs-anchored[multilingual]" && {E5_CONVERT_COMMAND}  (writes {root}; '
            "ANCHORED_MODEL_HOME chooses another place), or name the path of a model "
            "directory instead"
        )
    spec = ModelSpec.from_dir(root)
    if spec.query_prefix != "query: " or spec.passage_prefix != "passage: ":
        raise ModelError(f"{root}/{DESCRIPTOR_NAME} lacks the E5 'query: '/'passage: ' prefixes")
    return spec


_REGISTRY: dict[str, Callable[[], ModelSpec]] = {
    "all-MiniLM-L6-v2": _builtin_minilm,
    "multilingual-e5-small": _multilingual_e5_small,
}


def known_models() -> list[str]:
    """Names :func:`get_model` accepts (besides a model directory's path)."""
    return sorted(_REGISTRY)


def get_model(name: str = DEFAULT_MODEL) -> ModelSpec:
    """The :class:`ModelSpec` of a registered model, or of a model directory.

    ``name`` is a registered name (see :func:`known_models`; the comparison
    ignores case) or the path of a directory holding ``model.onnx``,
    ``tokenizer.json`` and ``anchored-model.json`` (bring your own model).
    Raises :class:`ModelError` for anything else, listing the known names.
    """
    if not name.strip():
        raise ModelError(f"no embedding model named; known models: {', '.join(known_models())}")
    by_lower = {k.lower(): k for k in _REGISTRY}
    key = by_lower.get(name.strip().lower())
    if key is not None:
        return _REGISTRY[key]()
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        return ModelSpec.from_dir(candidate)
    looks_like_path = os.sep in name or name.startswith((".", "~"))
    hint = f"no directory {candidate} exists" if looks_like_path else "no such model"
    raise ModelError(
        f"unknown embedding model {name!r} ({hint}); known models: "
        f"{', '.join(known_models())}, or the path of a directory with model.onnx, "
        f"tokenizer.json and {DESCRIPTOR_NAME}"
    )
