"""The trained floor-control policy: who holds the floor, decided by a small ONNX model.

At every observation (the frontend observes each unit in :data:`SUBSTEPS` sub-steps of
200 ms) :class:`TrainedFloorPolicy` turns the :class:`FloorObservation` and what it remembers
of the last :data:`HISTORY_S` seconds of frames into one feature vector and runs a two-layer
perceptron (``models/floor.onnx``, ONNX Runtime, one thread) with two sigmoid outputs:

* ``p_yield``: while the assistant speaks, the user's overlapping speech is a genuine
  interruption (it yields when ``p_yield >= yield_threshold`` on ``yield_count`` consecutive
  observations: a short command stops it within a few hundred milliseconds of its onset);
  backchannels, remarks to someone else and background talk should keep it low;
* ``p_start``: while listening, the user has finished a turn that wants an answer (it starts
  speaking when ``p_start >= start_threshold``); a mid-sentence pause, a backchannel or
  background talk should keep it low.

Features (:func:`acoustic_features`, :data:`ACOUSTIC_FEATURES` names them; feature version
:data:`FEATURE_VERSION`), all causal (from frames heard by the observation's time): the floor
state (speaking, scheduled turn, turn progress and remaining audio, overlap so far), silence
and turn durations, whether the last turn ended with our own yield, the overlapped share of
the unanswered user speech; the current utterance (frame by frame: its age, voiced time,
overlapped share, whether it began over the assistant's audio, voiced bursts, level, pitch
and pitch movement); Silero VAD, energy (dBFS) and pitch
(:func:`venus_ros.frontends.policy.frame_pitch_hz`) statistics of the user channel
(echo-cancelled when AEC is on) over trailing windows (:data:`WINDOWS`: the last 0.2, 0.5
and 1 s, and the two seconds before); and the text the user said since the assistant last
took the floor (final transcripts plus the partial one when partials are on), embedded with
all-MiniLM-L6-v2 (:class:`~venus_ros.frontends.cascade.embed.Embedder`; zeros when there is
no text or no embedder).

The feature standardisation is folded into the first layer, so the ONNX graph is
``Gemm -> Relu -> Gemm -> Sigmoid`` on raw features; :func:`numpy_forward` computes the same
thing. Thresholds live in the ONNX metadata (``floor.json`` next to it repeats them with the
training summary). Trained by :func:`venus_ros.training.floor.train_floor`; the report is
``models/floor_report.md``.

Backend replies are not the model's business: while listening with a reply waiting, the policy
starts speaking after :data:`BACKEND_SILENCE_S` of user silence, like the baselines. After a
yield, the policy answers at the latest after :data:`AFTER_YIELD_SILENCE_S` of user silence,
and any speech it has not answered after :data:`UNANSWERED_SILENCE_S`.

``onnx``/``onnxruntime`` and the embedder are imported lazily.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from venus_ros.frontends.policy import (
    FRAME_S,
    FloorAction,
    FloorObservation,
    FloorPolicy,
)

if TYPE_CHECKING:
    import onnx

    from venus_ros.frontends.cascade.embed import Embedder
    from venus_ros.frontends.policy import PolicyFrontend

__all__ = [
    "ACOUSTIC_FEATURES",
    "AFTER_YIELD_SILENCE_S",
    "BACKEND_SILENCE_S",
    "FEATURE_VERSION",
    "HISTORY_S",
    "MIN_START_SILENCE_S",
    "MODEL_PATH",
    "SUBSTEPS",
    "TEXT_DIM",
    "UNANSWERED_SILENCE_S",
    "WINDOWS",
    "FloorFeatures",
    "FloorModel",
    "FloorState",
    "TrainedFloorPolicy",
    "acoustic_features",
    "build_onnx",
    "load_floor_policy",
    "make_floor_frontend",
    "numpy_forward",
    "observation_text",
]

_HERE = Path(__file__).resolve().parent
MODEL_PATH = _HERE / "models" / "floor.onnx"
"""The committed model."""
FEATURE_VERSION = 3
"""Bumped whenever the features change; the model records the version it was trained on."""
TEXT_DIM = 384
"""Width of the text embedding (all-MiniLM-L6-v2)."""
SUBSTEPS = 5
"""Decisions per unit the model is trained for (recorded in the model as ``substeps``)."""
BACKEND_SILENCE_S = 0.6
"""User silence after which a waiting backend reply is spoken."""
AFTER_YIELD_SILENCE_S = 1.0
"""User silence after which the policy answers speech it yielded to, whatever the model says."""
MIN_START_SILENCE_S = 0.2
"""User silence the model needs before it may take the turn (never over the user's words)."""
UNANSWERED_SILENCE_S = 2.5
"""User silence after which speech the model did not answer is answered anyway: a user who
stopped and waits is never left hanging (longer than the mid-sentence pauses it must wait out)."""
HISTORY_S = 3.0
"""Frames of the user channel the features remember."""
UTTERANCE_GAP_S = 0.32
"""Unvoiced time that ends an utterance (a new voiced frame after it starts the next)."""
BURST_GAP_S = 0.096
"""Unvoiced time that separates two voiced bursts of one utterance ("no, no, no")."""

#: The trailing windows the frame statistics are taken over: (name, from s ago, to s ago).
WINDOWS: tuple[tuple[str, float, float], ...] = (
    ("w02", 0.0, 0.2),
    ("w05", 0.0, 0.5),
    ("w1", 0.0, 1.0),
    ("p1", 1.0, 2.0),
    ("p2", 2.0, 3.0),
)
_WINDOW_STATS = (
    "speech_frac",
    "overlap_frac",
    "vad_mean",
    "vad_max",
    "speech_db",
    "frame_db_mean",
    "frame_db_max",
    "frame_db_spread",
    "pitch_mean",
    "pitch_std",
    "voiced_frac",
)
_UTTERANCE_FEATURES = (
    "utt_active",
    "utt_age",
    "utt_speech",
    "utt_overlap",
    "utt_began_over_assistant",
    "utt_bursts",
    "utt_db",
    "utt_pitch_mean",
    "utt_pitch_std",
    "utt_pitch_slope",
)
ACOUSTIC_FEATURES: tuple[str, ...] = (
    "assistant_speaking",
    "forced_turn",
    "assistant_spoken",
    "assistant_remaining",
    "turn_overlap",
    "trailing_silence",
    "log_trailing_silence",
    "user_speaking",
    "user_turn_speech",
    "backend_pending",
    "after_yield",
    "unanswered_overlap",
    "has_text",
    "text_words",
    *_UTTERANCE_FEATURES,
    *(f"{w}_{s}" for w, _, _ in WINDOWS for s in _WINDOW_STATS),
)
"""Names of the acoustic and state features, in vector order (the text embedding follows)."""
N_FEATURES = len(ACOUSTIC_FEATURES) + TEXT_DIM
_HISTORY_FRAMES = round(HISTORY_S / FRAME_S)
_UTTERANCE_GAP = round(UTTERANCE_GAP_S / FRAME_S)
_BURST_GAP = round(BURST_GAP_S / FRAME_S)


def _db(value: float) -> float:
    """dBFS to roughly [0, 1]: -60 dBFS (and silence) -> 0, -30 -> 1."""
    return (max(value, -60.0) + 60.0) / 30.0


@dataclass
class _Utterance:
    """The user's current (or last) utterance, frame by frame."""

    frames: int = 0  # frames since its first voiced frame
    voiced: int = 0
    overlap: int = 0  # voiced frames while the assistant's audio played
    began_over_assistant: bool = False
    bursts: int = 0
    db_sum: float = 0.0
    f0: list[float] = field(default_factory=list)  # voiced pitch estimates, in order


@dataclass
class FloorState:
    """What the features remember between observations (reset per session).

    Attributes:
        vad: Speech probability of the last :data:`HISTORY_S` of frames, oldest first.
        db: Their energies (dBFS).
        f0: Their pitch estimates (Hz, 0 unvoiced).
        playing: Whether the assistant's audio played during each.
        threshold: The VAD threshold of the last observation.
        unit_index: Unit of the last observation.
        unit_frames: Frames of that unit already taken in.
        seen: The last observation taken in, ``(unit_index, substep)``.
        silence_frames: Unvoiced frames since the last voiced one (large before any).
        utterance: The current or last utterance.
        after_yield: The assistant's last turn ended with our yield, and it has not spoken
            since.
        was_speaking: The assistant held the floor at the last observation.
        yielded: The policy answered YIELD at the last observation.
        unanswered_overlap_s: User speech since the assistant last took the floor that
            overlapped the assistant's audio (talk over a turn is rarely a request).
        last_user_turn_speech_s: ``user_turn_speech_s`` at the last observation (a drop means
            the assistant took the floor and the count started over).
    """

    vad: deque[float] = field(default_factory=lambda: deque(maxlen=_HISTORY_FRAMES))
    db: deque[float] = field(default_factory=lambda: deque(maxlen=_HISTORY_FRAMES))
    f0: deque[float] = field(default_factory=lambda: deque(maxlen=_HISTORY_FRAMES))
    playing: deque[bool] = field(default_factory=lambda: deque(maxlen=_HISTORY_FRAMES))
    threshold: float = 0.5
    unit_index: int = -1
    unit_frames: int = 0
    seen: tuple[int, int] | None = None
    silence_frames: int = 1 << 30
    utterance: _Utterance = field(default_factory=_Utterance)
    after_yield: bool = False
    was_speaking: bool = False
    yielded: bool = False
    unanswered_overlap_s: float = 0.0
    last_user_turn_speech_s: float = 0.0
    cached: tuple[tuple[Any, ...], np.ndarray] | None = None


def _take_in(obs: FloorObservation, state: FloorState) -> None:
    """Append the observation's new frames to the state (once per observation)."""
    key = (obs.unit_index, obs.substep)
    if state.seen == key:
        return
    state.seen = key
    if obs.unit_index != state.unit_index:
        state.unit_index, state.unit_frames = obs.unit_index, 0
    if obs.user_turn_speech_s < state.last_user_turn_speech_s - 1e-9:
        state.unanswered_overlap_s = 0.0  # the assistant took the floor: the count restarted
    state.last_user_turn_speech_s = obs.user_turn_speech_s
    state.threshold = obs.vad_threshold
    n = len(obs.vad_probs)
    utt = state.utterance
    for i in range(min(state.unit_frames, n), n):
        p = float(obs.vad_probs[i])
        db = float(obs.frame_db[i]) if i < len(obs.frame_db) else -120.0
        f0 = float(obs.frame_f0[i]) if i < len(obs.frame_f0) else 0.0
        playing = bool(obs.assistant_frames[i]) if i < len(obs.assistant_frames) else False
        state.vad.append(p)
        state.db.append(db)
        state.f0.append(f0)
        state.playing.append(playing)
        voiced = p >= obs.vad_threshold
        if voiced:
            if state.silence_frames >= _UTTERANCE_GAP:
                utt = state.utterance = _Utterance(began_over_assistant=playing)
            elif state.silence_frames:
                utt.frames += state.silence_frames
            if state.silence_frames >= _BURST_GAP:
                utt.bursts += 1
            utt.frames += 1
            utt.voiced += 1
            utt.overlap += int(playing)
            utt.db_sum += db
            if f0 > 0:
                utt.f0.append(f0)
            if playing:
                state.unanswered_overlap_s += FRAME_S
            state.silence_frames = 0
        else:
            state.silence_frames += 1
    state.unit_frames = max(state.unit_frames, n)


def _window_stats(frames: np.ndarray, threshold: float, begin_s: float, end_s: float) -> np.ndarray:
    """:data:`_WINDOW_STATS` of the frames from ``end_s`` to ``begin_s`` ago (``frames``: the
    history as ``[4, n]`` rows vad, dB, f0, playing; missing frames count as silence)."""
    n_all = frames.shape[1]
    lo = round(begin_s / FRAME_S)
    hi = round(end_s / FRAME_S)
    span = hi - lo
    a, b = max(n_all - hi, 0), max(n_all - lo, 0)
    if b <= a:
        return np.zeros(len(_WINDOW_STATS))
    vad, dbs, f0, playing = frames[:, a:b]
    voiced = vad >= threshold
    dbs_c = np.maximum(dbs, -60.0)
    pitched = f0[f0 > 0]
    n_voiced = int(voiced.sum())
    spread = 0.0
    if b - a > 1:
        lo_db, hi_db = np.percentile(dbs_c, (10, 90))
        spread = float(hi_db - lo_db)
    return np.array(
        [
            n_voiced / span,
            float((voiced & (playing > 0)).sum()) / span,
            float(vad.sum()) / span,
            float(vad.max()),
            _db(float(dbs[voiced].mean())) if n_voiced else 0.0,
            _db(float(dbs_c.sum() + -60.0 * (span - (b - a))) / span),
            _db(float(dbs.max())),
            min(spread, 60.0) / 30.0,
            float(pitched.mean()) / 300.0 if pitched.size else 0.0,
            float(pitched.std()) / 100.0 if pitched.size > 1 else 0.0,
            pitched.size / span,
        ]
    )


def _utterance_features(state: FloorState) -> np.ndarray:
    utt = state.utterance
    if not utt.voiced:
        return np.zeros(len(_UTTERANCE_FEATURES))
    active = state.silence_frames < _UTTERANCE_GAP
    f0 = np.asarray(utt.f0, np.float64)
    recent = f0[-8:]
    slope = (float(recent.mean()) - float(f0.mean())) / 100.0 if f0.size > 1 else 0.0
    return np.array(
        [
            float(active),
            min((utt.frames + state.silence_frames) * FRAME_S, 5.0) / 5.0,
            min(utt.voiced * FRAME_S, 5.0) / 5.0,
            utt.overlap / utt.voiced,
            float(utt.began_over_assistant),
            min(utt.bursts, 5) / 5.0,
            _db(utt.db_sum / utt.voiced),
            float(f0.mean()) / 300.0 if f0.size else 0.0,
            float(f0.std()) / 100.0 if f0.size > 1 else 0.0,
            float(np.clip(slope, -1.0, 1.0)),
        ]
    )


def observation_text(obs: FloorObservation, partials: bool = True) -> str:
    """The user's words the text feature embeds: finals since the assistant last took the
    floor, plus the partial transcript of the utterance in progress when ``partials``."""
    parts = [obs.user_text.strip()]
    if partials:
        parts.append(obs.transcript.strip())
    return " ".join(p for p in parts if p)


_TEXT_AT = ACOUSTIC_FEATURES.index("has_text")


def acoustic_features(obs: FloorObservation, state: FloorState, text: str) -> np.ndarray:
    """The acoustic and state part of the feature vector (:data:`ACOUSTIC_FEATURES`).

    Takes the observation's new frames into ``state`` (once per observation; nothing from
    after it is used); :meth:`FloorFeatures.advance` records the decision. The text-free part
    is computed once per observation and state (texts are often tried in several variants).
    """
    _take_in(obs, state)
    key = (obs.unit_index, obs.substep, state.after_yield, state.was_speaking, state.yielded)
    if state.cached is None or state.cached[0] != key:
        state.cached = (key, _core_features(obs, state))
    out = state.cached[1].copy()
    words = len(text.split())
    out[_TEXT_AT] = float(words > 0)
    out[_TEXT_AT + 1] = min(words, 20) / 20.0
    return out


def _core_features(obs: FloorObservation, state: FloorState) -> np.ndarray:
    silence = max(obs.trailing_silence_s, 0.0)
    head = np.array(
        [
            float(obs.assistant_speaking),
            float(obs.forced_turn),
            min(obs.assistant_spoken_s, 10.0) / 10.0,
            min(obs.assistant_remaining_s, 10.0) / 10.0,
            min(obs.turn_overlap_s, 5.0) / 5.0,
            min(silence, 5.0) / 5.0,
            math.log1p(min(silence, 30.0)),
            float(obs.user_speaking),
            min(obs.user_turn_speech_s, 10.0) / 10.0,
            float(obs.backend_pending > 0),
            float(_after_yield(obs, state)),
            min(state.unanswered_overlap_s / max(obs.user_turn_speech_s, FRAME_S), 1.0),
            0.0,  # has_text
            0.0,  # text_words
        ]
    )
    frames = np.array([state.vad, state.db, state.f0, state.playing], np.float64).reshape(4, -1)
    windows = [_window_stats(frames, state.threshold, a, b) for _, a, b in WINDOWS]
    return np.concatenate([head, _utterance_features(state), *windows])


def _after_yield(obs: FloorObservation, state: FloorState) -> bool:
    """Listening, and the assistant's last turn ended with our yield (maybe at the last
    observation, which :meth:`FloorFeatures.advance` has not turned into ``after_yield``
    yet)."""
    if obs.assistant_speaking:
        return False
    return state.after_yield or (state.was_speaking and state.yielded)


class FloorFeatures:
    """Observation -> feature vector, with the state the features keep between boundaries.

    Args:
        embedder: The sentence embedder for the text feature; None leaves it at zeros.
        partials: Include the partial transcript in the text (when the frontend makes one).
        cache_size: Embeddings kept per text (the same text recurs across boundaries).
    """

    def __init__(
        self, embedder: Embedder | None = None, partials: bool = True, cache_size: int = 256
    ) -> None:
        self.embedder = embedder
        self.partials = partials
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.state = FloorState()

    def reset(self) -> None:
        """Forget the session (the embedding cache is kept: it depends on the text only)."""
        self.state = FloorState()

    def embed(self, text: str) -> np.ndarray:
        """The text's embedding (zeros for no text or no embedder), cached."""
        if not text or self.embedder is None:
            return np.zeros(TEXT_DIM)
        hit = self._cache.get(text)
        if hit is None:
            hit = np.asarray(self.embedder.embed([text])[0], dtype=np.float64)
            if hit.shape != (TEXT_DIM,):
                raise ValueError(f"embedder returned shape {hit.shape}, expected ({TEXT_DIM},)")
            self._cache[text] = hit
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        return hit

    def vector(self, obs: FloorObservation, text: str | None = None) -> np.ndarray:
        """The full feature vector (acoustic + text embedding), float64 ``[N_FEATURES]``.

        ``text`` overrides :func:`observation_text` (training builds variants with it).
        """
        if text is None:
            text = observation_text(obs, self.partials)
        return np.concatenate([acoustic_features(obs, self.state, text), self.embed(text)])

    def advance(self, obs: FloorObservation, action: FloorAction) -> None:
        """Update the state after the observation ``obs`` (any sub-step) was answered
        ``action``."""
        state = self.state
        _take_in(obs, state)
        state.after_yield = _after_yield(obs, state)
        state.was_speaking = obs.assistant_speaking
        state.yielded = obs.assistant_speaking and action is FloorAction.YIELD


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloorModel:
    """Weights of the two-layer perceptron and its decision settings.

    The first layer takes raw features: standardisation is already folded into ``w1``/``b1``.

    Attributes:
        w1: ``[n_features, hidden]``.
        b1: ``[hidden]``.
        w2: ``[hidden, 2]`` (columns: yield, start).
        b2: ``[2]``.
        yield_threshold: ``p_yield`` at or above which a boundary counts towards yielding.
        yield_count: Consecutive such boundaries needed to yield.
        start_threshold: ``p_start`` at or above which the policy takes the turn.
        metadata: Anything else recorded with the model (training summary), string values.
        substeps: Decisions per unit it was trained for (the frontend should observe as many).
    """

    w1: npt.NDArray[np.float32]
    b1: npt.NDArray[np.float32]
    w2: npt.NDArray[np.float32]
    b2: npt.NDArray[np.float32]
    yield_threshold: float
    yield_count: int
    start_threshold: float
    metadata: Mapping[str, str] = field(default_factory=dict)
    substeps: int = SUBSTEPS


def numpy_forward(model: FloorModel, x: np.ndarray) -> np.ndarray:
    """The model in numpy: ``[n, n_features]`` -> ``[n, 2]`` probabilities (yield, start)."""
    h = np.maximum(np.asarray(x, np.float32) @ model.w1 + model.b1, 0.0)
    z = h @ model.w2 + model.b2
    return 1.0 / (1.0 + np.exp(-z))


def build_onnx(model: FloorModel) -> onnx.ModelProto:
    """The ONNX graph of :func:`numpy_forward`, with thresholds in ``metadata_props``.

    Input ``features`` (float32 ``[batch, n_features]``), output ``probs`` (float32
    ``[batch, 2]``: yield, start).
    """
    from onnx import TensorProto, helper, numpy_helper

    n_in, hidden = model.w1.shape
    inits = [
        numpy_helper.from_array(np.asarray(model.w1, np.float32), "w1"),
        numpy_helper.from_array(np.asarray(model.b1, np.float32), "b1"),
        numpy_helper.from_array(np.asarray(model.w2, np.float32), "w2"),
        numpy_helper.from_array(np.asarray(model.b2, np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["z1"], name="layer1"),
        helper.make_node("Relu", ["z1"], ["h1"], name="relu"),
        helper.make_node("Gemm", ["h1", "w2", "b2"], ["z2"], name="layer2"),
        helper.make_node("Sigmoid", ["z2"], ["probs"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "floor_policy",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 2])],
        inits,
    )
    proto = helper.make_model(
        graph,
        producer_name="venus_ros.training.floor",
        opset_imports=[helper.make_opsetid("", 13)],
    )
    proto.ir_version = 8  # readable by every onnxruntime >= 1.17
    meta = {
        "feature_version": str(FEATURE_VERSION),
        "n_features": str(n_in),
        "hidden": str(hidden),
        "yield_threshold": repr(float(model.yield_threshold)),
        "yield_count": str(int(model.yield_count)),
        "start_threshold": repr(float(model.start_threshold)),
        "substeps": str(int(model.substeps)),
        **{str(k): str(v) for k, v in model.metadata.items()},
    }
    helper.set_model_props(proto, meta)
    import onnx

    onnx.checker.check_model(proto)
    return proto


# ---------------------------------------------------------------------------------------------
# The policy
# ---------------------------------------------------------------------------------------------


class TrainedFloorPolicy(FloorPolicy):
    """The floor policy of the cascade frontend: an ONNX perceptron over :class:`FloorFeatures`.

    Decides at every sub-step (the model was trained on :attr:`substeps` observations per unit,
    ``substeps`` in its metadata; the frontend should observe that often): while the assistant
    speaks, it yields once ``p_yield >= yield_threshold`` on ``yield_count`` consecutive
    observations, and keeps answering YIELD until the turn is over (the frontend acts on the
    boundary's answer, or sooner); while listening, a start decided at a sub-step is kept to
    the unit's boundary. Rules around the model: with nothing to answer (no user speech since
    the assistant last spoke and no backend reply) it never starts; a waiting backend reply is
    spoken after :data:`BACKEND_SILENCE_S` of silence; the model takes the turn only after
    :data:`MIN_START_SILENCE_S` of silence (never over the user); speech the policy yielded to
    is answered after :data:`AFTER_YIELD_SILENCE_S` of silence at the latest (the floor was
    given to the user, so it is taken back when they stop).

    Args:
        path: The ONNX model (default :data:`MODEL_PATH`).
        embedder: Sentence embedder for the text feature; None builds the packaged one, or
            runs without text if the model package is missing and ``text=False``.
        text: Use the text feature (False: the embedding is zeros, as the model saw for
            observations without a transcript).
        partials: Put the partial transcript in the text.
        yield_threshold: Override the model's value.
        start_threshold: Override the model's value.
        yield_count: Override the model's value.

    Raises:
        FileNotFoundError: No model at ``path``.
        ValueError: The model was trained on other features (an older feature version).
    """

    name = "floor"
    #: The frontend should run partial transcripts (``asr_partials``): the model was chosen
    #: with them (without, remarks to other people are told from interruptions less well).
    wants_partials: bool = True

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        text: bool = True,
        partials: bool = True,
        yield_threshold: float | None = None,
        start_threshold: float | None = None,
        yield_count: int | None = None,
    ) -> None:
        from venus_ros.engines.providers import make_session

        self.path = Path(path) if path is not None else MODEL_PATH
        if not self.path.is_file():
            raise FileNotFoundError(
                f"floor model {self.path} not found; train it with `venus-ros train floor --seed S`"
            )
        try:
            # The engines' session factory: TensorRT -> CUDA -> CPU where usable (one probe).
            self._session = make_session(self.path, threads=1)
        except Exception as exc:  # onnxruntime raises its own types for a file it cannot read
            detail = " ".join(str(exc).split())[:200]
            raise ValueError(
                f"floor model {self.path} is not a valid ONNX model ({detail})"
            ) from None
        meta = dict(self._session.get_modelmeta().custom_metadata_map)
        self.metadata: Mapping[str, str] = meta
        version = int(meta.get("feature_version", "-1"))
        n_features = int(meta.get("n_features", "-1"))
        if version != FEATURE_VERSION or n_features != N_FEATURES:
            raise ValueError(
                f"floor model {self.path}: trained on feature version {version} with "
                f"{n_features} features; this code computes version {FEATURE_VERSION} with "
                f"{N_FEATURES}: retrain it (`venus-ros train floor --echo-share 0.5`) or use "
                "the committed model"
            )
        #: Observations per unit the model was trained for (the frontend's ``substeps``).
        self.substeps = int(meta.get("substeps", "1"))
        self.yield_threshold = float(
            meta["yield_threshold"] if yield_threshold is None else yield_threshold
        )
        self.start_threshold = float(
            meta["start_threshold"] if start_threshold is None else start_threshold
        )
        self.yield_count = int(meta["yield_count"] if yield_count is None else yield_count)
        #: Whether the model reads the text embedding (a model trained without it says
        #: ``uses_text=0``: no embedder is built and the text slots stay zeros).
        self.uses_text = meta.get("uses_text", "1") != "0"
        text = text and self.uses_text
        if text and embedder is None:
            from venus_ros.frontends.cascade.embed import Embedder

            embedder = _shared_embedder(Embedder)
        self.features = FloorFeatures(embedder if text else None, partials=partials)
        self._streak = 0
        self._yielding = False
        self._start_at: tuple[int, int] | None = None  # (unit, sub-step) of a start
        self.last_probs: tuple[float, float] = (0.0, 0.0)

    def reset(self) -> None:
        """Start a session: forget the feature state and the yield streak."""
        self.features.reset()
        self._streak = 0
        self._yielding = False
        self._start_at = None
        self.last_probs = (0.0, 0.0)

    def probabilities(self, obs: FloorObservation) -> tuple[float, float]:
        """``(p_yield, p_start)`` for an observation, given the current state."""
        x = self.features.vector(obs).astype(np.float32)[None, :]
        (probs,) = self._session.run(["probs"], {"features": x})
        return float(probs[0, 0]), float(probs[0, 1])

    def decide(self, obs: FloorObservation) -> FloorAction:
        """The action at an observation, sub-step or boundary (see the class docstring)."""
        p_yield, p_start = self.probabilities(obs)
        self.last_probs = (p_yield, p_start)
        if obs.assistant_speaking:
            self._start_at = None
            if not self._yielding:
                self._streak = self._streak + 1 if p_yield >= self.yield_threshold else 0
                self._yielding = self._streak >= self.yield_count
            action = FloorAction.YIELD if self._yielding else FloorAction.KEEP_SPEAKING
        else:
            self._streak = 0
            self._yielding = False
            action = FloorAction.KEEP_LISTENING
            started = self._start_at
            if started is not None and started[0] == obs.unit_index and started[1] < obs.substep:
                action = FloorAction.START_SPEAKING  # decided at an earlier sub-step
            elif obs.backend_pending > 0 and obs.trailing_silence_s >= BACKEND_SILENCE_S:
                action = FloorAction.START_SPEAKING
            elif obs.user_turn_speech_s > 0 and (
                (p_start >= self.start_threshold and obs.trailing_silence_s >= MIN_START_SILENCE_S)
                or (
                    _after_yield(obs, self.features.state)
                    and obs.trailing_silence_s >= AFTER_YIELD_SILENCE_S
                )
                or obs.trailing_silence_s >= UNANSWERED_SILENCE_S
            ):
                action = FloorAction.START_SPEAKING
            if action is FloorAction.START_SPEAKING and (
                started is None or started[0] != obs.unit_index
            ):
                self._start_at = (obs.unit_index, obs.substep)
        self.features.advance(obs, action)
        return action


_EMBEDDER: Any = None


def _shared_embedder(factory: Any) -> Embedder:
    """One embedder per process (its ONNX session is stateless)."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = factory(threads=1)
    return _EMBEDDER


def load_floor_policy(path: str | Path | None = None, **options: Any) -> TrainedFloorPolicy:
    """The committed (or given) floor model as a policy; ``options`` as
    :class:`TrainedFloorPolicy` takes them."""
    return TrainedFloorPolicy(path, **options)


def read_sidecar(path: str | Path | None = None) -> dict[str, Any]:
    """The JSON written next to a model (``floor.json``): thresholds and training summary."""
    onnx_path = Path(path) if path is not None else MODEL_PATH
    return json.loads(onnx_path.with_suffix(".json").read_text(encoding="utf-8"))


def make_floor_frontend(options: str = "", **kwargs: Any) -> PolicyFrontend:
    """The ``floor`` frontend: :class:`~venus_ros.frontends.policy.PolicyFrontend` around the
    trained policy.

    Options (comma-separated): ``asr``/``noasr`` (Whisper, on), ``partials``/``nopartials``
    (partial transcripts every unit, on: the text feature then sees words before the user
    stops), ``aec``/``noaec`` (off), ``notext`` (no text feature), ``tts=ENGINE``,
    ``model=PATH``, ``yield=P``, ``start=P`` (threshold overrides), ``substeps=N`` (default:
    the model's, :data:`SUBSTEPS` for this feature version). ``kwargs`` go to
    :class:`~venus_ros.frontends.policy.PolicyFrontend` (e.g. ``delegator``).

    Raises:
        venus_ros.core.frontend.FrontendError: an unknown option.
    """
    from venus_ros.core.frontend import FrontendError
    from venus_ros.frontends.policy import PolicyFrontend, parse_options

    frontend_kwargs, own = parse_options(
        "floor",
        options,
        values={"model": str, "yield": _probability, "start": _probability},
        flags=("notext",),
    )
    frontend_kwargs.setdefault("asr_partials", frontend_kwargs.get("asr", True) is not False)
    policy_kwargs: dict[str, Any] = {"partials": bool(frontend_kwargs["asr_partials"])}
    if own.get("notext"):
        policy_kwargs["text"] = False
    if "model" in own:
        policy_kwargs["path"] = own["model"]
    for key in ("yield", "start"):
        if key in own:
            policy_kwargs[f"{key}_threshold"] = own[key]
    try:
        policy = load_floor_policy(**policy_kwargs)
        frontend_kwargs.setdefault("substeps", policy.substeps)
        return PolicyFrontend(policy, **frontend_kwargs, **kwargs)
    except (ValueError, FileNotFoundError) as exc:
        raise FrontendError(f"frontend 'floor': {exc}") from exc


def _probability(value: str) -> float:
    p = float(value)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{value} is not a probability")
    return p
