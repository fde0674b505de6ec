"""A small text classifier head shared by the cascade's text judgements.

:class:`TextHead` is logistic regression on a sentence embedding (all-MiniLM-L6-v2, from
:class:`~venus_ros.frontends.cascade.embed.Embedder`) next to hashed words and word pairs
(:func:`~venus_ros.frontends.cascade.router.lexical_features`), stored as ``.npz``. The
addressee gate (:mod:`~venus_ros.frontends.cascade.addressee`: said to the assistant or not) and
the interruption head of the floor policy (:mod:`~venus_ros.frontends.cascade.floor`: is speech
over the assistant an interruption) are two such heads, each trained by its own script.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["TextHead", "head_features"]


def head_features(
    embeddings: npt.ArrayLike, texts: Sequence[str], lexical_dims: int, lexical_scale: float
) -> npt.NDArray[np.float64]:
    """A head's input: sentence embeddings next to the texts' hashed words and word pairs
    (:func:`~venus_ros.frontends.cascade.router.lexical_features`; none when ``lexical_dims``
    is 0). Training and :meth:`TextHead.features` both build it here."""
    x = np.asarray(embeddings, dtype=np.float64)
    if not lexical_dims:
        return x
    from venus_ros.frontends.cascade.router import lexical_features

    return np.hstack([x, lexical_features(list(texts), lexical_dims, lexical_scale)])


class TextHead:
    """A text head: logistic regression on the sentence embedding and hashed words.

    Args:
        coef: ``[embedding_dim + lexical_dims]`` weights.
        intercept: The bias.
        threshold: The decision threshold (scores at or above it: the positive class).
        embedder: The embedder's name the head was trained with.
        lexical_dims: Width of the hashed word features (0: none).
        lexical_scale: Their scale (:func:`~venus_ros.frontends.cascade.router.lexical_features`).
        final_threshold: The threshold for a complete utterance's transcript where it differs
            from a partial's (the interruption head; ``inf``: never; None: ``threshold``).
    """

    def __init__(
        self,
        coef: npt.ArrayLike,
        intercept: float,
        threshold: float,
        embedder: str = "",
        lexical_dims: int = 0,
        lexical_scale: float = 0.5,
        *,
        final_threshold: float | None = None,
    ) -> None:
        self.coef = np.asarray(coef, dtype=np.float64).reshape(-1)
        self.intercept = float(intercept)
        self.threshold = float(threshold)
        self.embedder = str(embedder)
        self.lexical_dims = int(lexical_dims)
        self.lexical_scale = float(lexical_scale)
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"text head: threshold must be in (0, 1), got {threshold}")
        self.final_threshold = None if final_threshold is None else float(final_threshold)
        if self.final_threshold is not None and not 0.0 < self.final_threshold:
            raise ValueError(
                f"text head: final_threshold must be > 0 (inf: never), got {final_threshold}"
            )
        if not 0 <= self.lexical_dims < self.coef.size:
            raise ValueError(
                f"text head: lexical_dims {lexical_dims} does not fit {self.coef.size} weights"
            )

    def threshold_for(self, final: bool) -> float:
        """The threshold for a partial transcript, or for a final one (``final``)."""
        if final and self.final_threshold is not None:
            return self.final_threshold
        return self.threshold

    @property
    def dim(self) -> int:
        """Embedding width it expects."""
        return int(self.coef.size) - self.lexical_dims

    def features(self, embeddings: npt.ArrayLike, texts: Sequence[str]) -> npt.NDArray[Any]:
        """The head's input: embeddings next to the texts' hashed word features."""
        x = np.asarray(embeddings, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim or x.shape[0] != len(texts):
            raise ValueError(
                f"text head: expected [{len(texts)}, {self.dim}] embeddings, got {x.shape}"
            )
        return head_features(x, texts, self.lexical_dims, self.lexical_scale)

    def scores(self, embeddings: npt.ArrayLike, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """Probabilities of the positive class, one per text (``embeddings``: theirs)."""
        x = self.features(embeddings, texts)
        return 0.5 * (1.0 + np.tanh(0.5 * (x @ self.coef + self.intercept)))

    def save(self, path: str | Path) -> None:
        """Write the head as ``.npz``."""
        fields: dict[str, Any] = dict(
            coef=self.coef,
            intercept=np.float64(self.intercept),
            threshold=np.float64(self.threshold),
            embedder=np.str_(self.embedder),
            lexical_dims=np.int64(self.lexical_dims),
            lexical_scale=np.float64(self.lexical_scale),
        )
        if self.final_threshold is not None:
            fields["final_threshold"] = np.float64(self.final_threshold)
        np.savez(Path(path), **fields)

    @classmethod
    def load(cls, path: str | Path) -> TextHead:
        """Read a head written by :meth:`save`.

        Raises:
            OSError: the file is missing or unreadable.
            ValueError: it does not hold a head.
        """
        with np.load(Path(path), allow_pickle=False) as data:
            missing = {"coef", "intercept", "threshold"} - set(data.files)
            if missing:
                raise ValueError(f"{path}: not a text head (missing {sorted(missing)})")
            return cls(
                data["coef"],
                float(data["intercept"]),
                float(data["threshold"]),
                str(data["embedder"]) if "embedder" in data.files else "",
                int(data["lexical_dims"]) if "lexical_dims" in data.files else 0,
                float(data["lexical_scale"]) if "lexical_scale" in data.files else 0.5,
                final_threshold=(
                    float(data["final_threshold"]) if "final_threshold" in data.files else None
                ),
            )
