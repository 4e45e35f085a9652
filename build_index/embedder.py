"""Sentence embeddings with an ONNX model: the same code embeds chunks and queries.

Only ``onnxruntime``, ``tokenizers`` and ``numpy`` run here. A model is a
directory holding ``model.onnx``, ``tokenizer.json`` and ``anchored-model.json``
(the descriptor :meth:`ModelSpec.from_dir` reads); the default model ships in
the package (``build_index/models/all-MiniLM-L6-v2``), and the same three files
travel inside every index directory, so queries are embedded by exactly the
model that embedded the chunks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from build_index.errors import ModelError

__all__ = [
    "DEFAULT_MODEL",
    "DESCRIPTOR_NAME",
    "Embedder",
    "ModelSpec",
    "get_model",
    "known_models",
    "sha256_file",
]

#: The model used when nothing is configured.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: File name of the model descriptor inside a model (or index) directory.
DESCRIPTOR_NAME = "anchored-model.json"
DESCRIPTOR_FORMAT = "anchored-model"
DESCRIPTOR_VERSION = 1

_BUILTIN_DIR = Path(__file__).resolve().parent / "models"
#: sha256 of the shipped int8 MiniLM (see build_index/models/all-MiniLM-L6-v2/NOTICE.md).
MINILM_SHA256 = "aa9fdeb1949d4a5c39fbb35b91844f5f02be8d4de2849c85ccd2241cff048db9"

_POOLINGS = ("mean", "cls")

FloatArray = npt.NDArray[np.float32]
Progress = Callable[[int, int], None]
#: ``on_batch(rows, vectors)``: the input rows of one batch and their vectors.
BatchDone = Callable[[npt.NDArray[np.intp], "FloatArray"], None]


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to load an embedding model and to record it in a manifest.

    ``path`` is the ONNX file, ``tokenizer_path`` a Hugging Face ``tokenizer.json``.
    ``sha256`` is the hex digest of the ONNX file; :class:`Embedder` refuses a file
    whose bytes do not match it. ``query_prefix`` / ``passage_prefix`` are
    prepended to every query / passage (``"query: "`` / ``"passage: "`` for E5).
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
        if raw.get("format", DESCRIPTOR_FORMAT) != DESCRIPTOR_FORMAT:
            raise ModelError(f"{desc_path}: format is {raw.get('format')!r}, not 'anchored-model'")
        if raw.get("version", DESCRIPTOR_VERSION) != DESCRIPTOR_VERSION:
            raise ModelError(
                f"{desc_path}: descriptor version {raw.get('version')!r} is not supported "
                f"(this Anchored reads version {DESCRIPTOR_VERSION})"
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
        if self.dim <= 0 or self.max_tokens <= 0:
            raise ModelError(f"model {self.name!r}: dim and max_tokens must be positive")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ModelError(f"model {self.name!r}: sha256 {self.sha256!r} is not a hex digest")
        for label, p in (("ONNX file", self.path), ("tokenizer", self.tokenizer_path)):
            if not p.is_file():
                raise ModelError(f"model {self.name!r}: {label} {p} is missing")

    def verify(self) -> None:
        """Hash the ONNX file and raise :class:`ModelError` unless it matches ``sha256``."""
        actual = sha256_file(self.path)
        if actual != self.sha256:
            raise ModelError(
                f"model {self.name!r}: {self.path} has sha256 {actual}, expected "
                f"{self.sha256}; the file is corrupt or is another model — reinstall "
                "Anchored or rebuild the index with the model you mean"
            )

    def describe(self) -> dict[str, Any]:
        """The manifest's ``model`` record (no paths): what identifies the vectors."""
        d = asdict(self)
        del d["path"], d["tokenizer_path"]
        return d

    def write_descriptor(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``anchored-model.json`` for this spec into ``directory``.

        File names recorded are those of :meth:`copy_to` (``model.onnx``,
        ``tokenizer.json``). Returns the descriptor's path.
        """
        out = Path(directory) / DESCRIPTOR_NAME
        record = {"format": DESCRIPTOR_FORMAT, "version": DESCRIPTOR_VERSION, **self.describe()}
        record["onnx"] = "model.onnx"
        record["tokenizer"] = "tokenizer.json"
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


# --------------------------------------------------------------------------- hashing

_hash_lock = threading.Lock()
_hash_cache: dict[tuple[str, int, int], str] = {}


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, memoised on (resolved path, mtime_ns, size)."""
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
    digest = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _hash_lock:
        _hash_cache[key] = value
    return value


# -------------------------------------------------------------------------- registry


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


# -------------------------------------------------------------------------- embedder


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class Embedder:
    """Embed passages and queries with one :class:`ModelSpec` on onnxruntime (CPU).

    Texts are tokenized once, sorted by token length and cut into batches of
    similar length (at most ``batch_size`` texts and ``token_budget`` padded
    tokens each), so little compute goes into padding; results come back in
    input order. Vectors are float32 and L2-normalised.
    """

    def __init__(
        self,
        spec: ModelSpec,
        threads: int | None = None,
        *,
        batch_size: int = 64,
        token_budget: int = 4096,
        sort_window: int = 8192,
        spin_wait: bool = False,
        verify: bool = True,
    ) -> None:
        """Load ``spec`` (checking the ONNX file's sha256 unless ``verify`` is False).

        ``threads`` is onnxruntime's intra-op thread count (default: the cores
        this process may use). Texts are tokenised and length-sorted
        ``sort_window`` at a time; each batch holds at most ``batch_size`` texts
        and ``token_budget`` padded tokens. ``spin_wait`` lets onnxruntime's
        worker threads busy-wait between operators: a few percent faster on an
        idle machine, but about half the speed on a busy one (CI, a laptop
        building other things) and billed CPU on Lambda, so it is off by default.
        """
        import onnxruntime as ort
        from tokenizers import Tokenizer

        spec.check()
        if verify:
            spec.verify()
        if min(batch_size, token_budget, sort_window) < 1:
            raise ValueError("batch_size, token_budget and sort_window must be positive")
        self.spec = spec
        self.batch_size = batch_size
        self.token_budget = token_budget
        self.sort_window = sort_window

        try:
            tok = Tokenizer.from_file(str(spec.tokenizer_path))
        except Exception as exc:
            raise ModelError(
                f"model {spec.name!r}: cannot load {spec.tokenizer_path}: {exc}"
            ) from exc
        # tokenizer.json files often carry fixed padding/truncation (MiniLM: 128);
        # we truncate at the spec's max_tokens and pad per batch ourselves.
        tok.no_padding()
        tok.enable_truncation(max_length=spec.max_tokens)
        self._tokenizer = tok
        self._pad_id = self._find_pad_id(tok)

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads if threads else _available_cores()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        # Batches come in many (batch, length) shapes by design; onnxruntime's
        # memory patterns are cached per shape and only grow (685 MB peak for 600
        # chunks with them, 326 MB without, at the same speed).
        opts.enable_mem_pattern = False
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_wait else "0")
        try:
            self._session = ort.InferenceSession(
                str(spec.path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelError(
                f"model {spec.name!r}: onnxruntime cannot load {spec.path}: {exc}"
            ) from exc
        inputs = {i.name for i in self._session.get_inputs()}
        known = {"input_ids", "attention_mask", "token_type_ids"}
        if "input_ids" not in inputs or not inputs <= known:
            raise ModelError(
                f"model {spec.name!r}: graph inputs {sorted(inputs)} are not supported "
                f"(expected input_ids and optionally {sorted(known - {'input_ids'})})"
            )
        self._inputs = inputs
        self._output = self._session.get_outputs()[0].name

    @staticmethod
    def _find_pad_id(tok: Any) -> int:
        for token in ("[PAD]", "<pad>", "<PAD>"):
            tid = tok.token_to_id(token)
            if tid is not None:
                return int(tid)
        return 0

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self.spec.dim

    def embed_passages(
        self,
        texts: Sequence[str],
        progress: Progress | None = None,
        on_batch: BatchDone | None = None,
    ) -> FloatArray:
        """Embed passages (``passage_prefix`` applied): float32 ``(len(texts), dim)``.

        ``progress(done, total)`` is called after every batch, and ``on_batch(rows,
        vectors)`` with the batch's input rows and vectors (so a caller can keep
        what is done before the whole call returns).
        """
        return self._embed([self.spec.passage_prefix + t for t in texts], progress, on_batch)

    def embed_query(self, text: str) -> FloatArray:
        """Embed one query (``query_prefix`` applied): float32 ``(dim,)``."""
        vec: FloatArray = self._embed([self.spec.query_prefix + text], None, None)[0]
        return vec

    def _embed(
        self, texts: list[str], progress: Progress | None, on_batch: BatchDone | None
    ) -> FloatArray:
        n = len(texts)
        out = np.zeros((n, self.spec.dim), dtype=np.float32)
        if n == 0:
            if progress is not None:
                progress(0, 0)
            return out
        done = 0
        # tokenise and length-sort a window at a time: bounded memory for 100k chunks
        for lo in range(0, n, self.sort_window):
            hi = min(n, lo + self.sort_window)
            encodings = self._tokenizer.encode_batch(texts[lo:hi], add_special_tokens=True)
            ids = [e.ids for e in encodings]
            types = [e.type_ids for e in encodings]
            del encodings
            lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=hi - lo)
            order = np.argsort(lengths, kind="stable")
            for batch in self._batches(order, lengths):
                width = max(1, int(lengths[batch[-1]]))  # sorted: the last is the longest
                input_ids = np.full((len(batch), width), self._pad_id, dtype=np.int64)
                mask = np.zeros((len(batch), width), dtype=np.int64)
                type_ids = np.zeros((len(batch), width), dtype=np.int64)
                for row, i in enumerate(batch):
                    m = int(lengths[i])
                    input_ids[row, :m] = ids[i]
                    mask[row, :m] = 1
                    type_ids[row, :m] = types[i]
                vectors = self._run(input_ids, mask, type_ids)
                out[lo + batch] = vectors
                if on_batch is not None:
                    on_batch(lo + batch, vectors)
                done += len(batch)
                if progress is not None:
                    progress(done, n)
        return out

    def _batches(
        self, order: npt.NDArray[np.intp], lengths: npt.NDArray[np.int64]
    ) -> list[npt.NDArray[np.intp]]:
        """Cut length-sorted indices into batches within batch_size and token_budget."""
        batches: list[npt.NDArray[np.intp]] = []
        start = 0
        total = len(order)
        while start < total:
            end = start + 1
            while end < total and end - start < self.batch_size:
                if (end - start + 1) * max(1, int(lengths[order[end]])) > self.token_budget:
                    break
                end += 1
            batches.append(order[start:end])
            start = end
        return batches

    def _run(
        self,
        input_ids: npt.NDArray[np.int64],
        mask: npt.NDArray[np.int64],
        type_ids: npt.NDArray[np.int64],
    ) -> FloatArray:
        feeds: dict[str, npt.NDArray[np.int64]] = {"input_ids": input_ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = type_ids
        result = np.asarray(self._session.run([self._output], feeds)[0], dtype=np.float32)
        if result.ndim == 3:
            if self.spec.pooling == "cls":
                pooled = result[:, 0, :]
            else:
                weights = mask.astype(np.float32)[:, :, None]
                summed = np.einsum("bsd,bsx->bd", result, weights)
                pooled = summed / np.maximum(weights.sum(axis=1), 1.0)
        elif result.ndim == 2:  # the graph pools itself
            pooled = result
        else:
            raise ModelError(
                f"model {self.spec.name!r}: output {self._output!r} has shape {result.shape}"
            )
        if pooled.shape[1] != self.spec.dim:
            raise ModelError(
                f"model {self.spec.name!r}: the graph gives {pooled.shape[1]}-dim vectors, "
                f"the descriptor says dim={self.spec.dim}"
            )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
