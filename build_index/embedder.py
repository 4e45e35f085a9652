"""Sentence embeddings with an ONNX model: the same code embeds chunks and queries.

Only ``onnxruntime``, ``tokenizers`` and ``numpy`` run here. :class:`Embedder`
runs one :class:`~build_index.model_registry.ModelSpec` (what a model is, and
the named ones, are in :mod:`build_index.model_registry`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from build_index.errors import ModelError
from build_index.model_registry import ModelSpec, get_model

# ModelSpec and get_model are re-exported: a caller makes an Embedder from them.
__all__ = ["Embedder", "ModelSpec", "get_model"]

FloatArray = npt.NDArray[np.float32]
Progress = Callable[[int, int], None]
#: ``on_batch(rows, vectors)``: the input rows of one batch and their vectors.
BatchDone = Callable[[npt.NDArray[np.intp], "FloatArray"], None]
#: One batch as :meth:`Embedder.iter_passages` yields it: input rows, their vectors.
Batch = tuple[npt.NDArray[np.intp], "FloatArray"]


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_ENCODE_STEP = 256  # texts tokenised at once (see Embedder._tokenize)


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
        for key, value in spec.session_entries().items():
            opts.add_session_config_entry(key, value)
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
        out: FloatArray | None = None,
        rows: npt.NDArray[np.intp] | None = None,
    ) -> FloatArray:
        """Embed passages (``passage_prefix`` applied): float32 ``(len(texts), dim)``.

        ``progress(done, total)`` is called after every batch, and ``on_batch(rows,
        vectors)`` with the batch's input rows and vectors (so a caller can keep
        what is done before the whole call returns). ``out``, a float32 array of
        ``dim`` columns, receives the vectors and is returned: text ``i`` goes to row
        ``rows[i]`` (default: row ``i``). A caller that keeps the vectors in another
        form takes them from :meth:`iter_passages` instead.
        """
        return self._embed(
            [self.spec.passage_prefix + t for t in texts], progress, on_batch, out, rows
        )

    def iter_passages(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Iterator[Batch]:
        """Embed passages (``passage_prefix`` applied) a batch at a time: yields ``(rows,
        vectors)``, the input rows of each batch and their float32 vectors, and holds no
        array of ``len(texts)`` rows, so the caller keeps them in whatever form it stores
        (the build pipeline: the index's int8 rows). ``progress(done, total)`` is called
        after each batch is taken."""
        return self._batched([self.spec.passage_prefix + t for t in texts], progress)

    def embed_query(self, text: str) -> FloatArray:
        """Embed one query (``query_prefix`` applied): float32 ``(dim,)``."""
        vec: FloatArray = self._embed([self.spec.query_prefix + text], None, None)[0]
        return vec

    def embed_queries(self, texts: Sequence[str]) -> FloatArray:
        """Embed several queries at once (``query_prefix`` applied): float32
        ``(len(texts), dim)``, row ``i`` what :meth:`embed_query` gives text ``i``."""
        return self._embed([self.spec.query_prefix + t for t in texts], None, None)

    def _embed(
        self,
        texts: list[str],
        progress: Progress | None,
        on_batch: BatchDone | None,
        out: FloatArray | None = None,
        rows: npt.NDArray[np.intp] | None = None,
    ) -> FloatArray:
        n = len(texts)
        if out is None:
            out = np.zeros((n, self.spec.dim), dtype=np.float32)
        height = out.shape[0] if rows is not None else n
        if out.shape != (height, self.spec.dim) or out.dtype != np.float32:
            raise ValueError(
                f"out is {out.dtype} {out.shape}, expected float32 {(height, self.spec.dim)}"
            )
        if rows is None:
            rows = np.arange(n, dtype=np.intp)
        elif len(rows) != n:
            raise ValueError(f"rows has {len(rows)} entries for {n} texts")
        for batch, vectors in self._batched(texts, progress):
            out[rows[batch]] = vectors
            if on_batch is not None:
                on_batch(batch, vectors)
        return out

    def _batched(self, texts: list[str], progress: Progress | None) -> Iterator[Batch]:
        n = len(texts)
        if n == 0:
            if progress is not None:
                progress(0, 0)
            return
        done = 0
        # tokenise and length-sort a window at a time: bounded memory for 100k chunks
        for lo in range(0, n, self.sort_window):
            hi = min(n, lo + self.sort_window)
            ids, types = self._tokenize(texts[lo:hi])
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
                yield lo + batch, self._run(input_ids, mask, type_ids)
                done += len(batch)
                if progress is not None:
                    progress(done, n)

    def _tokenize(
        self, texts: list[str]
    ) -> tuple[list[npt.NDArray[np.uint32]], list[npt.NDArray[np.uint8]]]:
        """Token ids and type ids of ``texts`` as small arrays, encoded
        ``_ENCODE_STEP`` texts at a time: the tokenizer's ``Encoding`` objects also
        hold offsets, token strings and masks (about 37 KB a 256-token text, 300 MB
        for a window of 8,192), so only a step's worth of them lives at once."""
        ids: list[npt.NDArray[np.uint32]] = []
        types: list[npt.NDArray[np.uint8]] = []
        for lo in range(0, len(texts), _ENCODE_STEP):
            for e in self._tokenizer.encode_batch(
                texts[lo : lo + _ENCODE_STEP], add_special_tokens=True
            ):
                ids.append(np.asarray(e.ids, dtype=np.uint32))
                types.append(np.asarray(e.type_ids, dtype=np.uint8))
        return ids, types

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
