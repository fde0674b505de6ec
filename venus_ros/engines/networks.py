"""Our own networks, as the engines pipeline builds them: an ONNX export plus its reference.

Each :class:`Network` knows how to write its fp32 ONNX graph from its weights, which committed or
cached file that graph must reproduce byte for byte, how to make sample inputs, and how to run
its reference implementation (numpy), against which every built variant's parity is measured.

* ``floor``: the cascade's trained floor policy
  (:mod:`venus_ros.frontends.cascade.floor`). Its weights and thresholds are those of the
  committed ``models/floor.onnx`` (the output of training); the export is
  :func:`~venus_ros.frontends.cascade.floor.build_onnx` of them, the reference
  :func:`~venus_ros.frontends.cascade.floor.numpy_forward`.
* ``minilm``: all-MiniLM-L6-v2 sentence embeddings
  (:mod:`venus_ros.frontends.cascade.embed`) from the packaged safetensors weights; the
  reference is :func:`~venus_ros.frontends.cascade.embed.reference_forward` (float64 numpy), and
  the file to reproduce is the cascade's cached fp32 graph when it exists.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NETWORKS", "FloorNetwork", "MiniLMNetwork", "Network", "get_network"]


class Network(abc.ABC):
    """One network the pipeline can build."""

    name: str = ""

    @abc.abstractmethod
    def export(self) -> bytes:
        """The fp32 ONNX graph, serialized (deterministic: the same weights, the same bytes)."""

    def reference_file(self) -> Path | None:
        """A file the export must equal byte for byte, if there is one."""
        return None

    @abc.abstractmethod
    def samples(self, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``count`` sample inputs, keyed by the graph's input names."""

    @abc.abstractmethod
    def reference(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The reference implementation's outputs for ``inputs``, in the graph's output order."""


class FloorNetwork(Network):
    """The floor policy perceptron (features -> p_yield, p_start)."""

    name = "floor"

    def __init__(self, model_path: Path | None = None) -> None:
        from venus_ros.frontends.cascade.floor import MODEL_PATH

        self.model_path = Path(model_path) if model_path is not None else MODEL_PATH
        self._model: Any = None

    def _floor_model(self) -> Any:
        if self._model is None:
            import onnx
            from onnx import numpy_helper

            from venus_ros.frontends.cascade.floor import FloorModel

            proto = onnx.load(str(self.model_path))
            arrays = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
            props = {p.key: p.value for p in proto.metadata_props}
            fixed = ("feature_version", "n_features", "hidden")
            decision = ("yield_threshold", "yield_count", "start_threshold")
            self._model = FloorModel(
                w1=arrays["w1"],
                b1=arrays["b1"],
                w2=arrays["w2"],
                b2=arrays["b2"],
                yield_threshold=float(props["yield_threshold"]),
                yield_count=int(props["yield_count"]),
                start_threshold=float(props["start_threshold"]),
                metadata={k: v for k, v in props.items() if k not in (*fixed, *decision)},
            )
        return self._model

    def export(self) -> bytes:
        from venus_ros.frontends.cascade.floor import build_onnx

        return build_onnx(self._floor_model()).SerializeToString()

    def reference_file(self) -> Path | None:
        return self.model_path

    def samples(self, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n_features = self._floor_model().w1.shape[0]
        return {"features": rng.normal(0.0, 1.0, (count, n_features)).astype(np.float32)}

    def reference(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        from venus_ros.frontends.cascade.floor import numpy_forward

        return [numpy_forward(self._floor_model(), inputs["features"])]


class MiniLMNetwork(Network):
    """all-MiniLM-L6-v2 (token ids, mask -> L2-normalised 384-d embedding)."""

    name = "minilm"

    def __init__(self) -> None:
        from venus_ros.frontends.cascade.embed import load_weights, model_files

        self.files = model_files()
        self._weights = load_weights(self.files.weights)

    def export(self) -> bytes:
        from venus_ros.frontends.cascade.embed import build_onnx

        return build_onnx(self._weights, self.files.config).SerializeToString()

    def reference_file(self) -> Path | None:
        from venus_ros.frontends.cascade.embed import _user_cache_dir, model_key

        path = _user_cache_dir() / "embed" / f"bert-{model_key(self.files)}-fp32.onnx"
        return path if path.is_file() else None

    def samples(self, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        seq = 16
        ids = rng.integers(1000, self.files.config.vocab_size, (count, seq), dtype=np.int64)
        ids[:, 0] = 101  # [CLS]
        mask = np.ones((count, seq), dtype=np.int64)
        lengths = rng.integers(4, seq + 1, count)
        for row, length in enumerate(lengths):
            ids[row, length - 1] = 102  # [SEP]
            ids[row, length:] = 0
            mask[row, length:] = 0
        return {"input_ids": ids, "attention_mask": mask}

    def reference(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        from venus_ros.frontends.cascade.embed import reference_forward

        return [
            reference_forward(
                self._weights, self.files.config, inputs["input_ids"], inputs["attention_mask"]
            )
        ]


#: Network builders by the name a spec gives.
NETWORKS: dict[str, Callable[[], Network]] = {"floor": FloorNetwork, "minilm": MiniLMNetwork}


def get_network(name: str) -> Network:
    """The network called ``name``.

    Raises:
        KeyError: naming the networks there are.
    """
    if name not in NETWORKS:
        raise KeyError(f"unknown network {name!r}; networks: {', '.join(sorted(NETWORKS))}")
    return NETWORKS[name]()
