"""Training the floor-control policy (:mod:`venus_ros.frontends.cascade.floor`), reproducibly.

``venus-ros train floor --seed S`` calls :func:`train_floor`:

1. **Data**: a suite synthesised by the evaluation tools (:func:`venus_ros.eval.synth.synthesize`)
   with a seed from the *train* range (``1_000_000 + S``), so it never shares a seed with an
   evaluation suite: ``n_per_category`` samples of backchannel, interruption, other_directed,
   background, pause, turn_taking and delegation (same voices and phrase banks as evaluation
   suites; note that the phrase banks are shared, only seeds, voices, levels and timing differ).
2. **Observations**: each sample is played through the real
   :class:`~venus_ros.frontends.policy.PolicyFrontend` (Silero VAD, Whisper tiny.en finals and
   partials, espeak-ng) on :func:`venus_ros.core.session.run_offline`, with the scenario's
   scripted assistant turn, under a *teacher* policy that follows the labels (teacher forcing):
   it keeps speaking through backchannels, remarks to others and background talk, yields to an
   interruption at a random boundary between 0.4 s after its onset and 1.0 s after its end
   (every other interruption sample: 1.0 s after its end, so that every boundary a yield
   could happen at is seen), and takes the turn a random 0.3-3.0 s after the user's turn has
   ended.
3. **Labels**, per boundary (the frontend acts at unit boundaries only):

   * speaking, scheduled turn of an ``interruption`` sample: ``yield = 1`` from
     ``overlap start + 0.4 s`` to ``overlap end + 2.0 s`` (the metric's stop window), ``0``
     before the onset, not used in between (too little heard to be required) and after;
   * speaking otherwise (backchannel, other_directed, background, the assistant's own
     responses): ``yield = 0``;
   * listening with user speech to answer: ``start = 1`` from 0.3 s after the end of a turn
     that wants an answer (the user's last turn in pause/turn_taking/delegation samples, the
     interruption's end), not used in the 0.3 s before, ``0`` otherwise (while the user speaks,
     in a mid-sentence pause, after a backchannel, a remark to someone else or background
     talk). Listening with nothing to answer is left to the policy's rule (never starts).

   Each observation gives three rows, one per text variant: finals + partial transcript (the
   frontend with partials), finals only (without partials) and no text (without ASR).
4. **Model**: a perceptron with one hidden ReLU layer and two sigmoid outputs (yield, start),
   numpy full-precision training with Adam and class-balanced binary cross-entropy;
   standardisation folded into the first layer; exported with the ``onnx`` helper API.
5. **Validation**: ``folds``-fold cross-validation split by sample (stratified by category):
   each fold's model is trained on the other folds (early stopping on the held-out fold's
   loss) and predicts the held-out samples, so every sample gets out-of-fold probabilities.
   The final model is trained on all samples for the median best epoch count of the folds.
6. **Thresholds**: chosen on the out-of-fold probabilities by simulating the decisions per
   sample: the yield threshold and count maximise the smallest margin over the goals
   (interruption response >= 0.90, backchannel continuation >= 0.97, other-directed and
   background >= 0.90; interruption samples where the teacher yielded late only, so that no
   boundary is missing); the start threshold maximises the share of samples whose listening
   boundaries are all decided right.
7. **Outputs** in ``out``: ``floor.onnx``, ``floor.json`` (thresholds, sizes, metrics) and
   ``floor_report.md``.

Everything random is seeded from ``seed``; ONNX Runtime and numpy run on one thread's worth of
deterministic arithmetic, so the same seed gives the same model on the same installation.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from venus_ros.eval.scenario import CATEGORIES as SCENARIO_CATEGORIES, OVERLAP_CATEGORIES
from venus_ros.frontends.cascade.floor import (
    ACOUSTIC_FEATURES,
    FEATURE_VERSION,
    N_FEATURES,
    TEXT_DIM,
    FloorFeatures,
    FloorModel,
    build_onnx,
    numpy_forward,
)
from venus_ros.frontends.policy import FloorAction, FloorObservation, FloorPolicy

__all__ = [
    "CATEGORIES",
    "DEFAULT_N_PER_CATEGORY",
    "GOALS",
    "Row",
    "TrainConfig",
    "collect_rows",
    "fit_mlp",
    "train_floor",
    "train_seed",
]

#: Categories the training suite holds: every scenario category but tool use.
CATEGORIES: tuple[str, ...] = tuple(c for c in SCENARIO_CATEGORIES if c != "tool_use")
#: Overlaps the assistant should talk through.
RESUME: tuple[str, ...] = tuple(c for c in OVERLAP_CATEGORIES if c != "interruption")
#: Samples per category by default (the committed model; 6-9 minutes in all on two cores).
DEFAULT_N_PER_CATEGORY = 70
#: The goals the thresholds are chosen for (share of samples).
GOALS: Mapping[str, float] = {
    "interruption": 0.90,
    "backchannel": 0.97,
    "other_directed": 0.90,
    "background": 0.90,
}
YIELD_AFTER_ONSET_S = 0.4
"""Interrupting speech heard before a yield is required."""
STOP_WINDOW_S = 2.0
"""The metric's stop window after the overlap's end (docs/eval.md)."""
START_AFTER_END_S = 0.3
"""Silence after a finished turn from which the policy should take the turn."""
TAIL_S = 5.0
"""Silence played after each recording, as the evaluation runner does."""
VARIANTS = ("full", "finals", "none")
"""Text variants of each observation: finals + partial, finals only, no text."""


def train_seed(seed: int) -> int:
    """The training-suite seed for ``seed``: in the train range, never an evaluation seed."""
    from venus_ros.eval.synth import SEED_RANGES

    seeds = SEED_RANGES["train"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return seeds.start + seed % len(seeds)


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of :func:`fit_mlp` and the data split.

    Attributes:
        hidden: Hidden units.
        epochs: Most passes over the training rows.
        batch: Rows per step.
        lr: Adam learning rate.
        l2: Weight decay (on weights, not biases).
        patience: Epochs without a better validation loss before stopping.
        folds: Cross-validation folds (split by sample, stratified by category).
    """

    hidden: int = 64
    epochs: int = 80
    batch: int = 256
    lr: float = 1e-3
    l2: float = 1e-4
    patience: int = 12
    folds: int = 5


@dataclass(frozen=True)
class Row:
    """One boundary observation, featurised, with its labels.

    Attributes:
        sample: Sample id.
        category: Its category.
        t: Boundary time (s).
        speaking: The assistant held the floor.
        forced: The turn was the scenario's scripted one.
        acoustic: Acoustic features per text variant, ``[len(VARIANTS), n_acoustic]``.
        texts: The text of each variant.
        y_yield: 1/0, or -1 when not used.
        y_start: 1/0, or -1 when not used.
    """

    sample: str
    category: str
    t: float
    speaking: bool
    forced: bool
    acoustic: np.ndarray
    texts: tuple[str, ...]
    y_yield: int
    y_start: int


@dataclass
class _Truth:
    """What the labels need to know about a sample."""

    category: str
    overlap: tuple[float, float] | None
    respond_after: float | None  # end of the turn that wants an answer
    yield_at: float | None  # the teacher yields at the first boundary at or after this
    start_delay: float  # the teacher starts this long after respond_after


def _truth(sample: Any, rng: np.random.Generator, late: bool) -> _Truth:
    category = sample.category
    overlap = tuple(sample.overlap) if sample.overlap is not None else None
    respond_after: float | None = None
    yield_at: float | None = None
    if category == "interruption":
        s, e = overlap
        respond_after = e
        yield_at = e + 1.0 if late else float(rng.uniform(s + YIELD_AFTER_ONSET_S, e + 1.0))
    elif category not in RESUME and sample.turns:
        respond_after = max(turn.end for turn in sample.turns)
    return _Truth(category, overlap, respond_after, yield_at, float(rng.uniform(0.3, 3.0)))


def _labels(obs: FloorObservation, truth: _Truth) -> tuple[int, int]:
    """``(y_yield, y_start)`` for a boundary observation (-1: not used)."""
    t = obs.t
    if obs.assistant_speaking:
        if obs.forced_turn and truth.category == "interruption" and truth.overlap is not None:
            s, e = truth.overlap
            if t < s:
                return 0, -1
            if s + YIELD_AFTER_ONSET_S <= t <= e + STOP_WINDOW_S:
                return 1, -1
            return -1, -1
        return 0, -1
    if obs.user_turn_speech_s <= 0:
        return -1, -1
    if truth.respond_after is None:
        return -1, 0
    if t >= truth.respond_after + START_AFTER_END_S:
        return -1, 1
    if t >= truth.respond_after:
        return -1, -1
    return -1, 0


class _Teacher(FloorPolicy):
    """Follows the labels (see the module docstring) and featurises every boundary."""

    name = "floor-teacher"

    def __init__(self, sample: Any, truth: _Truth) -> None:
        self.sample = sample
        self.truth = truth
        self.features = FloorFeatures(None)
        self.rows: list[Row] = []
        self._started = False

    def reset(self) -> None:
        self.features.reset()
        self.rows = []
        self._started = False

    def decide(self, obs: FloorObservation) -> FloorAction:
        if not obs.is_boundary:
            return (
                FloorAction.KEEP_SPEAKING if obs.assistant_speaking else FloorAction.KEEP_LISTENING
            )
        truth = self.truth
        if obs.assistant_speaking:
            action = FloorAction.KEEP_SPEAKING
            if obs.forced_turn and truth.yield_at is not None and obs.t + 1e-9 >= truth.yield_at:
                action = FloorAction.YIELD
        else:
            action = FloorAction.KEEP_LISTENING
            if (
                not self._started
                and truth.respond_after is not None
                and obs.user_turn_speech_s > 0
                and obs.t >= truth.respond_after + truth.start_delay
            ):
                action = FloorAction.START_SPEAKING
                self._started = True
        y_yield, y_start = _labels(obs, truth)
        texts = (
            " ".join(p for p in (obs.user_text.strip(), obs.transcript.strip()) if p),
            obs.user_text.strip(),
            "",
        )
        from venus_ros.frontends.cascade.floor import acoustic_features

        acoustic = np.stack([acoustic_features(obs, self.features.state, x) for x in texts])
        self.rows.append(
            Row(
                self.sample.id,
                truth.category,
                obs.t,
                obs.assistant_speaking,
                obs.forced_turn,
                acoustic,
                texts,
                y_yield,
                y_start,
            )
        )
        self.features.advance(obs, action)
        return action


def _run_teacher(
    sample: Any, truth: _Truth, echo: bool = False, echo_gain_db: float | None = None
) -> list[Row]:
    """The teacher's rows for one sample; ``echo``: the microphone hears the speaker (the
    evaluation's echo path, :data:`venus_ros.eval.runner.ECHO_DELAY_S` /
    :data:`~venus_ros.eval.runner.ECHO_GAIN_DB`) and the frontend cancels it (AEC)."""
    from venus_ros.core.clock import FakeClock
    from venus_ros.core.session import SessionConfig, run_offline
    from venus_ros.frontends.policy import PolicyFrontend

    teacher = _Teacher(sample, truth)
    frontend = PolicyFrontend(teacher, asr_partials=True, aec=echo)
    try:
        if sample.assistant_turns:
            frontend.schedule_turns([(t.start, t.text) for t in sample.assistant_turns])
        audio, rate = sample.load_audio()
        audio = np.concatenate([audio, np.zeros(round(TAIL_S * rate), np.float32)])
        config = SessionConfig(timeline_window_s=len(audio) / rate + 120.0)
        if not echo:
            run_offline(audio, rate, frontend, clock=FakeClock(), config=config)
        else:
            from venus_ros.eval import runner

            db = runner.ECHO_GAIN_DB if echo_gain_db is None else echo_gain_db
            mic, hear = runner.echo_input(audio, rate, config.chunk_ms, gain_db=db)
            run_offline(mic, rate, frontend, clock=FakeClock(), config=config, on_start=hear)
    finally:
        frontend.close()
    return teacher.rows


def collect_rows(
    suite: Any, seed: int, folds: int, progress: bool = False, echo_share: float = 0.0
) -> tuple[list[Row], dict[str, int], set[str]]:
    """Run the teacher over every sample (a seeded ``echo_share`` of them through the echo
    path with echo cancellation).

    Returns:
        The rows, each sample's cross-validation fold (stratified by category: a seeded
        permutation per category dealt round robin) and the ids of the interruption samples
        where the teacher yielded late (every other one).
    """
    by_category: dict[str, list[Any]] = {}
    for sample in suite.samples:
        by_category.setdefault(sample.category, []).append(sample)
    fold_of: dict[str, int] = {}
    late: set[str] = set()
    for category, samples in sorted(by_category.items()):
        rng = np.random.default_rng([seed, 7, CATEGORIES.index(category)])
        for rank, i in enumerate(rng.permutation(len(samples))):
            fold_of[samples[int(i)].id] = rank % folds
        if category == "interruption":
            late |= {sample.id for i, sample in enumerate(samples) if i % 2 == 0}
    rows: list[Row] = []
    bar = _bar(len(suite.samples), progress, "observing")
    for k, sample in enumerate(suite.samples):
        rng = np.random.default_rng([seed, 11, k])
        truth = _truth(sample, rng, sample.id in late)
        echo = echo_share > 0 and bool(np.random.default_rng([seed, 13, k]).random() < echo_share)
        rows.extend(_run_teacher(sample, truth, echo))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return rows, fold_of, late


def _bar(total: int, enabled: bool, desc: str) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="sample")


# ---------------------------------------------------------------------------------------------
# Matrices and the model
# ---------------------------------------------------------------------------------------------


@dataclass
class _Data:
    x: np.ndarray  # [n, N_FEATURES]
    y: np.ndarray  # [n, 2] labels (-1 unused)
    row: np.ndarray  # [n] index into rows
    variant: np.ndarray  # [n] index into VARIANTS
    fold: np.ndarray  # [n] cross-validation fold of the row's sample


def _matrices(
    rows: Sequence[Row], fold_of: Mapping[str, int], embed: Callable[[list[str]], np.ndarray]
) -> tuple[_Data, int]:
    texts = sorted({t for r in rows for t in r.texts if t})
    vectors = embed(texts) if texts else np.zeros((0, TEXT_DIM))
    index = {t: i for i, t in enumerate(texts)}
    zero = np.zeros(TEXT_DIM)
    xs, ys, which, variants, folds = [], [], [], [], []
    for i, r in enumerate(rows):
        if r.y_yield < 0 and r.y_start < 0:
            continue
        for v, text in enumerate(r.texts):
            emb = vectors[index[text]] if text else zero
            xs.append(np.concatenate([r.acoustic[v], emb]))
            ys.append((r.y_yield, r.y_start))
            which.append(i)
            variants.append(v)
            folds.append(fold_of[r.sample])
    return _Data(
        np.asarray(xs, np.float64),
        np.asarray(ys, np.int64),
        np.asarray(which),
        np.asarray(variants),
        np.asarray(folds),
    ), len(texts)


def _bce_weights(y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Class-balanced weights per head (each class of a head weighs half of it)."""
    w = np.zeros(y.shape, np.float64)
    for h in range(y.shape[1]):
        used = mask[:, h]
        pos = used & (y[:, h] == 1)
        neg = used & (y[:, h] == 0)
        if pos.any():
            w[pos, h] = 0.5 / pos.sum()
        if neg.any():
            w[neg, h] = 0.5 / neg.sum()
        w[:, h] *= used.sum()
    return w


def fit_mlp(
    x: np.ndarray,
    y: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    config: TrainConfig,
    seed: int,
    epochs: int | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Train the two-headed perceptron; standardisation folded into the first layer.

    Args:
        x: Training features ``[n, d]``.
        y: Labels ``[n, 2]`` (yield, start), -1 where a head is not trained.
        x_val: Validation features (early stopping); may be empty when ``epochs`` is given.
        y_val: Validation labels.
        config: Hyper-parameters.
        seed: Initialisation and shuffling seed.
        epochs: Train exactly this many epochs and keep the last weights (no early stopping).

    Returns:
        ``({"w1", "b1", "w2", "b2"}, history)`` with raw-feature weights (float32).
    """
    rng = np.random.default_rng([seed, 13])
    mean = x.mean(axis=0)
    std = np.maximum(x.std(axis=0), 1e-2)
    xs = (x - mean) / std
    xv = (x_val - mean) / std
    mask, mask_v = y >= 0, y_val >= 0
    yt, yv = np.clip(y, 0, 1).astype(np.float64), np.clip(y_val, 0, 1).astype(np.float64)
    w, wv = _bce_weights(y, mask), _bce_weights(y_val, mask_v)
    d, hdim = x.shape[1], config.hidden
    params = {
        "w1": rng.normal(0.0, math.sqrt(2.0 / d), (d, hdim)),
        "b1": np.zeros(hdim),
        "w2": rng.normal(0.0, math.sqrt(1.0 / hdim), (hdim, 2)),
        "b2": np.zeros(2),
    }
    m = {k: np.zeros_like(v) for k, v in params.items()}
    s = {k: np.zeros_like(v) for k, v in params.items()}
    step = 0

    def forward(p: dict[str, np.ndarray], a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = np.maximum(a @ p["w1"] + p["b1"], 0.0)
        return h, h @ p["w2"] + p["b2"]

    def loss_of(p: dict[str, np.ndarray], a: np.ndarray, t: np.ndarray, wt: np.ndarray) -> float:
        _, z = forward(p, a)
        ll = np.logaddexp(0.0, z) - t * z
        return float((ll * wt).sum() / max(wt.sum(), 1e-12))

    best = (math.inf, {k: v.copy() for k, v in params.items()}, 0)
    history: list[tuple[int, float, float]] = []
    n = len(xs)
    for epoch in range(epochs or config.epochs):
        order = rng.permutation(n)
        for start in range(0, n, config.batch):
            idx = order[start : start + config.batch]
            a, t, wt = xs[idx], yt[idx], w[idx]
            h, z = forward(params, a)
            p = 1.0 / (1.0 + np.exp(-z))
            dz = (p - t) * wt / max(len(idx), 1)
            grads = {
                "w2": h.T @ dz + config.l2 * params["w2"],
                "b2": dz.sum(axis=0),
            }
            dh = (dz @ params["w2"].T) * (h > 0)
            grads["w1"] = a.T @ dh + config.l2 * params["w1"]
            grads["b1"] = dh.sum(axis=0)
            step += 1
            for k, g in grads.items():
                m[k] = 0.9 * m[k] + 0.1 * g
                s[k] = 0.999 * s[k] + 0.001 * g * g
                mh = m[k] / (1 - 0.9**step)
                sh = s[k] / (1 - 0.999**step)
                params[k] -= config.lr * mh / (np.sqrt(sh) + 1e-8)
        train_loss = loss_of(params, xs, yt, w)
        val_loss = loss_of(params, xv, yv, wv) if len(xv) else train_loss
        history.append((epoch + 1, train_loss, val_loss))
        if epochs is not None:
            best = (val_loss, params, epoch + 1)
        elif val_loss < best[0] - 1e-5:
            best = (val_loss, {k: v.copy() for k, v in params.items()}, epoch + 1)
        elif epoch + 1 - best[2] >= config.patience:
            break
    p = best[1]
    w1 = p["w1"] / std[:, None]
    b1 = p["b1"] - (mean / std) @ p["w1"]
    weights = {
        "w1": w1.astype(np.float32),
        "b1": b1.astype(np.float32),
        "w2": p["w2"].astype(np.float32),
        "b2": p["b2"].astype(np.float32),
    }
    info = {
        "best_epoch": best[2],
        "epochs_run": len(history),
        "best_val_loss": best[0],
        "history": history,
    }
    return weights, info


# ---------------------------------------------------------------------------------------------
# Thresholds and validation metrics
# ---------------------------------------------------------------------------------------------


@dataclass
class _SampleTrace:
    """One sample's boundaries in time order, with the model's probabilities."""

    category: str
    overlap: tuple[float, float] | None
    rows: list[tuple[Row, float, float]] = field(default_factory=list)  # row, p_yield, p_start


def _traces(
    rows: Sequence[Row], data: _Data, probs: np.ndarray, variant: int, samples: Mapping[str, Any]
) -> dict[str, _SampleTrace]:
    """Per sample, every boundary (also unlabelled ones) with its (out-of-fold) probabilities."""
    p_by_row: dict[int, tuple[float, float]] = {}
    sel = data.variant == variant
    for i, p in zip(data.row[sel], probs[sel], strict=True):
        p_by_row[int(i)] = (float(p[0]), float(p[1]))
    traces: dict[str, _SampleTrace] = {}
    for i, r in enumerate(rows):
        if r.sample not in samples:
            continue
        trace = traces.setdefault(r.sample, _SampleTrace(r.category, samples[r.sample]))
        py, ps = p_by_row.get(i, (math.nan, math.nan))
        trace.rows.append((r, py, ps))
    return traces


def _yield_outcomes(
    traces: Mapping[str, _SampleTrace], threshold: float, count: int, late: set[str]
) -> dict[str, list[bool]]:
    """Per overlap category, per sample: did the simulated policy behave as expected?

    Interruption samples count only where the teacher yielded late (``late``), so that every
    boundary of the stop window was observed.
    """
    out: dict[str, list[bool]] = {}
    for sample_id, trace in traces.items():
        if trace.category not in GOALS or trace.overlap is None:
            continue
        if trace.category == "interruption" and sample_id not in late:
            continue
        s, e = trace.overlap
        streak, fired = 0, False
        for r, py, _ in trace.rows:
            if not (r.speaking and r.forced) or r.t > e + STOP_WINDOW_S:
                continue
            streak = streak + 1 if py >= threshold else 0
            if streak >= count and r.t >= s:
                fired = True
                break
        good = fired if trace.category == "interruption" else not fired
        out.setdefault(trace.category, []).append(good)
    return out


def _rates(outcomes: Mapping[str, list[bool]]) -> dict[str, float]:
    return {c: float(np.mean(v)) for c, v in outcomes.items() if v}


def _choose_yield(
    traces: Mapping[str, _SampleTrace], late: set[str]
) -> tuple[float, int, dict[str, float]]:
    """The best (smallest goal margin, then summed rates) yield settings; among equals, one
    boundary rather than two, then the middle of the plateau of thresholds."""
    scored: list[tuple[tuple[float, float], int, float, dict[str, float]]] = []
    for count in (1, 2):
        for threshold in np.round(np.arange(0.05, 0.951, 0.025), 3):
            rates = _rates(_yield_outcomes(traces, float(threshold), count, late))
            if not rates:
                continue
            margin = min(rates.get(c, 1.0) - goal for c, goal in GOALS.items())
            key = (round(margin, 9), round(sum(rates.values()), 9))
            scored.append((key, count, float(threshold), rates))
    if not scored:
        return 0.5, 1, {}
    top = max(key for key, _, _, _ in scored)
    count = min(c for key, c, _, _ in scored if key == top)
    plateau = [(t, r) for key, c, t, r in scored if key == top and c == count]
    threshold, rates = plateau[len(plateau) // 2]
    return threshold, count, rates


def _start_outcomes(traces: Mapping[str, _SampleTrace], threshold: float) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for trace in traces.values():
        labelled = [(r, ps) for r, _, ps in trace.rows if r.y_start >= 0 and not math.isnan(ps)]
        if not labelled:
            continue
        wrong = any(ps >= threshold for r, ps in labelled if r.y_start == 0)
        wanted = [ps for r, ps in labelled if r.y_start == 1]
        missed = bool(wanted) and not any(ps >= threshold for ps in wanted)
        out.setdefault(trace.category, []).append(not wrong and not missed)
    return out


def _choose_start(traces: Mapping[str, _SampleTrace]) -> tuple[float, dict[str, float]]:
    scores = []
    grid = np.round(np.arange(0.05, 0.951, 0.025), 3)
    for threshold in grid:
        outcomes = _start_outcomes(traces, float(threshold))
        flat = [g for v in outcomes.values() for g in v]
        scores.append(float(np.mean(flat)) if flat else 0.0)
    top = max(scores)
    plateau = [float(t) for t, sc in zip(grid, scores, strict=True) if sc >= top - 1e-12]
    threshold = plateau[len(plateau) // 2]
    return threshold, _rates(_start_outcomes(traces, threshold))


def _auc(y: np.ndarray, p: np.ndarray) -> float | None:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return None
    order = np.argsort(np.concatenate([neg, pos]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return float((ranks[len(neg) :].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _head_metrics(y: np.ndarray, p: np.ndarray, threshold: float) -> dict[str, Any]:
    used = y >= 0
    y, p = y[used], p[used]
    pred = p >= threshold
    return {
        "n": int(used.sum()),
        "positives": int((y == 1).sum()),
        "accuracy": float(np.mean(pred == (y == 1))) if len(y) else None,
        "recall": float(np.mean(pred[y == 1])) if (y == 1).any() else None,
        "specificity": float(np.mean(~pred[y == 0])) if (y == 0).any() else None,
        "auc": _auc(y, p),
    }


# ---------------------------------------------------------------------------------------------
# The whole run
# ---------------------------------------------------------------------------------------------


def train_floor(
    seed: int,
    out: Path,
    *,
    n_per_category: int = DEFAULT_N_PER_CATEGORY,
    progress: bool = False,
    config: TrainConfig | None = None,
    categories: Sequence[str] = CATEGORIES,
    work_dir: Path | None = None,
    embedder: Any = None,
    echo_share: float = 0.0,
) -> dict[str, Any]:
    """Synthesise training data, train the floor model, choose thresholds, export, report.

    Args:
        seed: The run's seed (>= 0); the suite seed is :func:`train_seed` of it.
        out: Folder for ``floor.onnx``, ``floor.json`` and ``floor_report.md`` (created).
        n_per_category: Samples synthesised per category.
        progress: Progress bars on stderr.
        config: Hyper-parameters (:class:`TrainConfig`).
        categories: Categories synthesised (a subset of :data:`CATEGORIES`).
        work_dir: Where the suite is written (default: a temporary folder, removed after).
        embedder: A sentence embedder (default: the packaged MiniLM, one thread).
        echo_share: Share of the samples played through the echo path (the microphone hears
            the speaker; the frontend cancels it), as a robot hears itself.

    Returns:
        The summary written to ``floor.json``.

    Raises:
        ValueError: A bad seed, size or category.
    """
    from venus_ros.eval.synth import synthesize

    config = config or TrainConfig()
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown or not categories:
        raise ValueError(f"categories must be drawn from {CATEGORIES}, got {list(categories)}")
    if isinstance(n_per_category, bool) or not isinstance(n_per_category, int):
        raise ValueError(f"n_per_category must be an int, got {n_per_category!r}")
    if n_per_category < 2:
        raise ValueError(
            f"n_per_category must be >= 2 (train and validation), got {n_per_category}"
        )
    suite_seed = train_seed(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="floor-train-") as tmp:
        folder = Path(work_dir) if work_dir is not None else Path(tmp) / "suite"
        t0 = time.perf_counter()
        suite = synthesize(
            folder,
            n_per_category,
            suite_seed,
            list(categories),
            purpose="train",
            progress=progress,
            overwrite=True,
        )
        timings["synthesis_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows, fold_of, late = collect_rows(suite, seed, config.folds, progress, echo_share)
        timings["observation_s"] = time.perf_counter() - t0
        audio_s = sum(s.duration_s for s in suite.samples)
        overlaps = {s.id: tuple(s.overlap) for s in suite.samples if s.overlap is not None}
    if embedder is None:
        from venus_ros.frontends.cascade.embed import Embedder

        embedder = Embedder(threads=1)
    t0 = time.perf_counter()
    data, n_texts = _matrices(rows, fold_of, lambda texts: embedder.embed(texts))
    timings["embedding_s"] = time.perf_counter() - t0

    # cross-validation by sample: out-of-fold probabilities for every row
    t0 = time.perf_counter()
    oof = np.zeros((len(data.x), 2))
    folds_info = []
    for fold in range(config.folds):
        held = data.fold == fold
        if not held.any() or held.all():
            continue
        fold_weights, info = fit_mlp(
            data.x[~held], data.y[~held], data.x[held], data.y[held], config, seed + 101 * fold
        )
        probe = FloorModel(**fold_weights, yield_threshold=0.5, yield_count=1, start_threshold=0.5)
        oof[held] = numpy_forward(probe, data.x[held])
        folds_info.append({k: v for k, v in info.items() if k != "history"})
    timings["cross_validation_s"] = time.perf_counter() - t0
    epochs = int(np.median([f["best_epoch"] for f in folds_info])) if folds_info else 20
    t0 = time.perf_counter()
    empty = data.x[:0]
    weights, fit_info = fit_mlp(data.x, data.y, empty, data.y[:0], config, seed, epochs=epochs)
    timings["fit_s"] = time.perf_counter() - t0

    samples = {r.sample: overlaps.get(r.sample) for r in rows}
    traces = {v: _traces(rows, data, oof, i, samples) for i, v in enumerate(VARIANTS)}
    yield_threshold, yield_count, yield_rates = _choose_yield(traces["full"], late)
    start_threshold, start_rates = _choose_start(traces["full"])

    validation: dict[str, Any] = {}
    for i, variant in enumerate(VARIANTS):
        sel = data.variant == i
        outcomes = _yield_outcomes(traces[variant], yield_threshold, yield_count, late)
        validation[variant] = {
            "yield_head": _head_metrics(data.y[sel, 0], oof[sel, 0], yield_threshold),
            "start_head": _head_metrics(data.y[sel, 1], oof[sel, 1], start_threshold),
            "overlap_rates": _rates(outcomes),
            "overlap_counts": {c: len(v) for c, v in outcomes.items()},
            "listening_pass_rates": _rates(_start_outcomes(traces[variant], start_threshold)),
        }
    sizes = {
        "suite_seed": suite_seed,
        "samples": len(suite.samples),
        "samples_per_category": n_per_category,
        "echo_share": echo_share,
        "folds": config.folds,
        "audio_s": round(audio_s, 1),
        "boundaries": len(rows),
        "labelled_rows": len(data.x),
        "distinct_texts": n_texts,
        "yield_positives": int((data.y[:, 0] == 1).sum()),
        "yield_negatives": int((data.y[:, 0] == 0).sum()),
        "start_positives": int((data.y[:, 1] == 1).sum()),
        "start_negatives": int((data.y[:, 1] == 0).sum()),
    }
    model = FloorModel(
        **weights,
        yield_threshold=yield_threshold,
        yield_count=yield_count,
        start_threshold=start_threshold,
        metadata={
            "train_seed": str(seed),
            "suite_seed": str(suite_seed),
            "samples": str(len(suite.samples)),
            "trainer": "venus_ros.training.floor.train_floor",
        },
    )
    proto = build_onnx(model)
    onnx_path = out / "floor.onnx"
    onnx_path.write_bytes(proto.SerializeToString())
    agreement = _check_onnx(onnx_path, model, data.x[:: max(1, len(data.x) // 512)])
    timings["total_s"] = time.perf_counter() - started
    summary: dict[str, Any] = {
        "feature_version": FEATURE_VERSION,
        "n_features": N_FEATURES,
        "acoustic_features": list(ACOUSTIC_FEATURES),
        "text_dim": TEXT_DIM,
        "seed": seed,
        "categories": list(categories),
        "config": {k: getattr(config, k) for k in TrainConfig.__dataclass_fields__},
        "thresholds": {
            "yield_threshold": yield_threshold,
            "yield_count": yield_count,
            "start_threshold": start_threshold,
        },
        "tuned_rates": {"yield": yield_rates, "start": start_rates},
        "sizes": sizes,
        "fit": {
            "final_epochs": epochs,
            "final_train_loss": fit_info["history"][-1][1] if fit_info["history"] else None,
            "folds": folds_info,
        },
        "validation": validation,
        "onnx": {
            "bytes": onnx_path.stat().st_size,
            "sha256": hashlib.sha256(onnx_path.read_bytes()).hexdigest(),
            "max_abs_diff_vs_numpy": agreement,
        },
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "total_s": round(timings["total_s"], 1),
        "platform": {"python": platform.python_version(), "numpy": np.__version__},
    }
    (out / "floor.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "floor_report.md").write_text(_report(summary), encoding="utf-8")
    return summary


def _check_onnx(path: Path, model: FloorModel, x: np.ndarray) -> float:
    """Largest difference between ONNX Runtime and :func:`numpy_forward` on ``x``."""
    import onnxruntime as ort

    if not len(x):
        return 0.0
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    (got,) = session.run(["probs"], {"features": x.astype(np.float32)})
    return float(np.max(np.abs(got - numpy_forward(model, x))))


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _report(summary: Mapping[str, Any]) -> str:
    th = summary["thresholds"]
    sz = summary["sizes"]
    listening = summary["validation"]["full"]["listening_pass_rates"]
    lines = [
        "# Floor policy: training report",
        "",
        "Written by `venus_ros.training.floor.train_floor` "
        f"(`venus-ros train floor --seed {summary['seed']}`). Validation numbers are "
        f"out-of-fold predictions of {sz['folds']}-fold cross-validation split by sample "
        "(stratified by category) on teacher-forced observations of the training suite (see "
        "the module docstring); the evaluation-suite numbers are measured separately with "
        "`venus-ros eval run` on a fresh evaluation-seed suite. The training suite uses the "
        "evaluation tools' phrase banks: validation and evaluation measure generalisation "
        "across voices, rates, levels, timing and recognition errors, not to unseen wording.",
        "",
        "## Data",
        "",
        "| item | value |",
        "|---|---|",
        *(f"| {k} | {_fmt(v)} |" for k, v in sz.items()),
        "",
        f"Categories: {', '.join(summary['categories'])}. Each boundary gives three rows "
        "(text variants: finals + partial, finals only, no text).",
        "",
        "## Model",
        "",
        f"Perceptron {summary['n_features']} -> {summary['config']['hidden']} (ReLU) -> 2 "
        f"(sigmoid: yield, start); {len(summary['acoustic_features'])} acoustic/state features "
        f"+ {summary['text_dim']}-d MiniLM text embedding. ONNX file: "
        f"{summary['onnx']['bytes']} bytes; max |ONNX - numpy| = "
        f"{summary['onnx']['max_abs_diff_vs_numpy']:.2e}. Final model: all samples, "
        f"{summary['fit']['final_epochs']} epochs (median best epoch of the folds: "
        + ", ".join(
            f"{f['best_epoch']} (loss {f['best_val_loss']:.3f})" for f in summary["fit"]["folds"]
        )
        + ").",
        "",
        f"Thresholds (chosen on the out-of-fold predictions, variant `full`): yield >= "
        f"{th['yield_threshold']:.3f} on {th['yield_count']} consecutive boundary(ies); "
        f"start >= {th['start_threshold']:.3f}.",
        "",
        "## Validation",
        "",
        "Per-sample simulated decisions (share of samples behaving as expected: interruption "
        "= yielded by the overlap end + 2 s, over the samples where the teacher yielded late; "
        "others = did not yield by then). Listening pass: every labelled listening boundary "
        "decided right (no start in a pause, after a backchannel or background talk, or "
        "while the user speaks; a start after a finished turn).",
        "",
        "| text variant | " + " | ".join(f"{c} (n)" for c in GOALS) + " | listening pass |",
        "|---|" + "---|" * (len(GOALS) + 1),
    ]
    for variant, v in summary["validation"].items():
        rates = v["overlap_rates"]
        counts = v["overlap_counts"]
        listen = v["listening_pass_rates"]
        flat = np.mean(list(listen.values())) if listen else None
        lines.append(
            f"| {variant} | "
            + " | ".join(f"{_fmt(rates.get(c))} ({counts.get(c, 0)})" for c in GOALS)
            + f" | {_fmt(None if flat is None else float(flat))} |"
        )
    lines += [
        "",
        "Goals: " + ", ".join(f"{c} {g:.2f}" for c, g in GOALS.items()) + ".",
        "",
        "Per-row head metrics (out-of-fold, labelled rows):",
        "",
        "| variant | head | n | positives | accuracy | recall | specificity | AUC |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, v in summary["validation"].items():
        for head in ("yield_head", "start_head"):
            m = v[head]
            lines.append(
                f"| {variant} | {head[:-5]} | {m['n']} | {m['positives']} | "
                f"{_fmt(m['accuracy'])} | {_fmt(m['recall'])} | {_fmt(m['specificity'])} | "
                f"{_fmt(m['auc'])} |"
            )
    lines += [
        "",
        "Listening pass rate per category (variant full): "
        + ", ".join(f"{c} {_fmt(r)}" for c, r in listening.items()),
        "",
        "## Time",
        "",
        *(f"- {k}: {v}" for k, v in summary["timings_s"].items()),
        "",
        "## Evaluation",
        "",
        "Evaluation-suite results are measured separately (`venus-ros eval run --frontend "
        "floor`) and kept in `floor_eval.md` next to the model, with the sha256 of the model "
        f"they were measured on (this one: `{summary['onnx']['sha256'][:16]}...`).",
        "",
    ]
    return "\n".join(lines)
