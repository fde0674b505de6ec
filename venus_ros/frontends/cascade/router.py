"""Delegation router: does a user request need the background harness?

A request needs the harness when it asks for an external capability: a robot action, a fresh
fact, a memory look-up or store, multi-step work, or knowledge the small local model should not
answer from its weights. Greetings, chit-chat, thanks, confirmations, back-channels and simple
follow-ups ("say that again") are answered locally.

The decision is a logistic regression on the all-MiniLM-L6-v2 sentence embedding
(:class:`~venus_ros.frontends.cascade.embed.Embedder`) of the request after
:func:`clean_disfluencies`, next to :func:`lexical_features` (hashed words and word pairs, which
carry the request's framing: "could you", "did I", "where's my"); its weights and its threshold
(calibrated on held-out requests for high recall and high specificity at once) are in
``models/router.npz``, trained by
:func:`venus_ros.training.router.train_router` on ``data/router_corpus.yaml`` and on what the
recogniser wrote when training voices spoke it (``data/router_heard.json``).
``models/router_report.md`` has the data sizes and held-out metrics. A request that states a
duration is delegated from :data:`DURATION_FLOOR` of the threshold on (a length of time is work
for a timer, and misheard words around it lower the score).

:meth:`DelegationRouter.delegate_span` writes the private span that hands the request to the
harness: the request in the user's words with fillers and false starts removed, escaped with
:func:`~venus_ros.core.protocol.escape_tags` so user text can never close the span or form a
control token.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from venus_ros.core.protocol import escape_tags
from venus_ros.text.numbers import duration_s
from venus_ros.text.repair import clean_disfluencies

if TYPE_CHECKING:
    from venus_ros.frontends.cascade.embed import Embedder

__all__ = [
    "CORPUS_PATH",
    "DURATION_FLOOR",
    "MAX_SPAN_CHARS",
    "WEIGHTS_PATH",
    "DelegationRouter",
    "RouteDecision",
    "RouterWeights",
    "clean_disfluencies",
    "lexical_features",
]

_HERE = Path(__file__).resolve().parent
CORPUS_PATH = _HERE / "data" / "router_corpus.yaml"
"""The labelled requests the router is trained on."""
WEIGHTS_PATH = _HERE / "models" / "router.npz"
"""The committed classifier weights."""
MAX_SPAN_CHARS = 4000
"""Longest span content; :class:`~venus_ros.core.protocol.SpanParser` rejects longer ones."""
DURATION_FLOOR = 0.5
"""A request that states a duration ("in four and a half hours") is delegated when its score
reaches this share of the threshold: a stated length of time is work for a timer, and ASR
errors around it ("count on 27 minutes") pull the score of such requests down."""

_WORDS = re.compile(r"[\w']+")
_NPZ_FIELDS = (
    "coef",
    "intercept",
    "threshold",
    "embedder",
    "seed",
    "lexical_dims",
    "lexical_scale",
)


def lexical_features(
    texts: Sequence[str], dims: int, scale: float = 1.0
) -> npt.NDArray[np.float64]:
    """Hashed bag of words and word pairs, L2-normalised and scaled.

    Each text is lower-cased and split into words (letters, digits, apostrophes); its words,
    adjacent word pairs and first word (marked ``^``) are hashed with CRC-32 into ``dims``
    binary slots. The hash is stable across platforms and Python runs.

    Args:
        texts: The (cleaned) requests.
        dims: Number of hash slots; 0 gives ``[n, 0]``.
        scale: Norm of each non-empty row.

    Returns:
        float64 ``[len(texts), dims]``.
    """
    out = np.zeros((len(texts), dims), dtype=np.float64)
    if dims == 0:
        return out
    for row, text in enumerate(texts):
        words = _WORDS.findall(text.lower().replace("’", "'"))
        first = f"^{words[0]}" if words else "^"
        tokens = [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words)), first]
        for token in tokens:
            out[row, zlib.crc32(token.encode()) % dims] = 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out * (scale / np.maximum(norms, 1e-12))


@dataclass(frozen=True)
class RouterWeights:
    """A trained router.

    Attributes:
        coef: float64 ``[embedding dim + lexical_dims]`` logistic regression weights over the
            embedding followed by :func:`lexical_features`.
        intercept: Bias of the logistic regression.
        threshold: A request is delegated when its score is at least this.
        embedder: Which embeddings the weights expect (e.g. ``all-MiniLM-L6-v2/fp32``).
        seed: The training seed (it fixes the train/validation/test split).
        lexical_dims: Hash slots of :func:`lexical_features`.
        lexical_scale: Norm of the lexical features.
    """

    coef: npt.NDArray[np.float64]
    intercept: float
    threshold: float
    embedder: str
    seed: int
    lexical_dims: int = 0
    lexical_scale: float = 1.0

    @property
    def embedding_dim(self) -> int:
        """Width of the embedding the weights expect."""
        return int(self.coef.shape[0]) - self.lexical_dims

    def save(self, path: str | Path) -> None:
        """Writes the weights as an ``.npz`` file."""
        np.savez(
            Path(path),
            coef=np.asarray(self.coef, dtype=np.float64),
            intercept=np.float64(self.intercept),
            threshold=np.float64(self.threshold),
            embedder=np.str_(self.embedder),
            seed=np.int64(self.seed),
            lexical_dims=np.int64(self.lexical_dims),
            lexical_scale=np.float64(self.lexical_scale),
        )

    @classmethod
    def load(cls, path: str | Path) -> RouterWeights:
        """Reads weights written by :meth:`save`.

        Raises:
            FileNotFoundError: The file does not exist (train with ``venus-ros train router``).
            ValueError: naming the file and the missing or malformed field.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"router weights {path} not found; train them with `venus-ros train router`"
            )
        with np.load(path, allow_pickle=False) as data:
            missing = set(_NPZ_FIELDS) - set(data.files)
            if missing:
                raise ValueError(f"{path}: missing {', '.join(sorted(missing))}")
            coef = np.asarray(data["coef"], dtype=np.float64)
            if coef.ndim != 1 or not np.all(np.isfinite(coef)):
                raise ValueError(f"{path}: coef must be a finite 1-D array, got {coef.shape}")
            return cls(
                coef=coef,
                intercept=float(data["intercept"]),
                threshold=float(data["threshold"]),
                embedder=str(data["embedder"]),
                seed=int(data["seed"]),
                lexical_dims=int(data["lexical_dims"]),
                lexical_scale=float(data["lexical_scale"]),
            )

    def features(
        self, embeddings: npt.ArrayLike, cleaned_texts: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """The classifier's inputs: embeddings of the cleaned texts, then their lexical features."""
        lexical = lexical_features(cleaned_texts, self.lexical_dims, self.lexical_scale)
        return np.hstack([np.asarray(embeddings, dtype=np.float64), lexical])

    def scores(self, features: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Delegation probabilities of ``[n, len(coef)]`` features (see :meth:`features`)."""
        logits = np.asarray(features, dtype=np.float64) @ self.coef + self.intercept
        return 0.5 * (1.0 + np.tanh(0.5 * logits))  # the logistic function, without overflow


@dataclass(frozen=True)
class RouteDecision:
    """The router's verdict on one request.

    Attributes:
        text: The request as heard.
        score: Delegation probability in [0, 1].
        delegate: Whether the request goes to the harness (``score >= threshold``).
        span: The ``<delegate>…</delegate>`` span to write when ``delegate``, else None.
    """

    text: str
    score: float
    delegate: bool
    span: str | None


class DelegationRouter:
    """Decides which requests need the harness and writes their delegate spans.

    Args:
        embedder: Sentence embedder (default: a new fp32 all-MiniLM-L6-v2
            :class:`~venus_ros.frontends.cascade.embed.Embedder`, built on first use).
        weights: Trained weights or their ``.npz`` path (default: :data:`WEIGHTS_PATH`).
        threshold: Overrides the calibrated threshold.

    Raises:
        ValueError: The weights do not match the embedder's width.
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        weights: RouterWeights | str | Path | None = None,
        *,
        threshold: float | None = None,
    ) -> None:
        if embedder is None:
            from venus_ros.frontends.cascade.embed import Embedder

            embedder = Embedder()
        if not isinstance(weights, RouterWeights):
            weights = RouterWeights.load(WEIGHTS_PATH if weights is None else weights)
        if weights.embedding_dim != embedder.dim:
            raise ValueError(
                f"router weights expect {weights.embedding_dim}-wide embeddings "
                f"({weights.embedder}) but the embedder gives {embedder.dim}; retrain with "
                "`venus-ros train router`"
            )
        self.embedder = embedder
        self.weights = weights
        self.threshold = weights.threshold if threshold is None else float(threshold)

    def scores(self, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """Delegation probabilities of several requests (one embedding call)."""
        if isinstance(texts, str):
            raise TypeError("scores() takes a sequence of strings, not one string")
        if not texts:
            return np.zeros(0)
        cleaned = [clean_disfluencies(text) for text in texts]
        return self.weights.scores(self.weights.features(self.embedder.embed(cleaned), cleaned))

    def score(self, text: str) -> float:
        """Delegation probability of one request, in [0, 1]."""
        return float(self.scores([text])[0])

    def needs_delegation(self, text: str) -> bool:
        """Whether the request needs the harness: its score reaches the threshold, or
        :data:`DURATION_FLOOR` of it when the request states a duration."""
        return self._delegates(text, self.score(text))

    def _delegates(self, text: str, score: float) -> bool:
        if score >= self.threshold:
            return True
        if score < DURATION_FLOOR * self.threshold:
            return False
        return duration_s(clean_disfluencies(text)) is not None

    def decide(self, text: str) -> RouteDecision:
        """Scores a request and writes its span when it is delegated (see
        :meth:`needs_delegation`)."""
        score = self.score(text)
        delegate = self._delegates(text, score)
        return RouteDecision(
            text=text,
            score=score,
            delegate=delegate,
            span=self.delegate_span(text) if delegate else None,
        )

    @staticmethod
    def delegate_span(text: str) -> str:
        """The private span that hands ``text`` to the harness.

        The content is the request in the user's words after :func:`clean_disfluencies`,
        cut to :data:`MAX_SPAN_CHARS` and escaped with
        :func:`~venus_ros.core.protocol.escape_tags`, so the span always parses as exactly one
        delegate span whatever the user said.

        Raises:
            ValueError: The request is empty or only whitespace.
        """
        cleaned = clean_disfluencies(text)
        if not cleaned:
            raise ValueError("cannot delegate an empty request")
        return f"<delegate>{escape_tags(cleaned[:MAX_SPAN_CHARS])}</delegate>"
