"""The trained floor-control policy: who holds the floor, decided by a small ONNX model.

At every unit boundary :class:`TrainedFloorPolicy` turns the :class:`FloorObservation` (and a
short history of earlier boundaries) into one feature vector and runs a two-layer perceptron
(``models/floor.onnx``, ONNX Runtime, one thread) with two sigmoid outputs:

* ``p_yield``: while the assistant speaks, the user's overlapping speech is a genuine
  interruption (it yields when ``p_yield >= yield_threshold`` on ``yield_count`` consecutive
  boundaries, or on one with ``p_yield >= CONFIDENT_YIELD``, each with at least
  :data:`MIN_INTERRUPT_OVERLAP_S` of speech over the turn); backchannels, remarks to someone
  else and background talk should keep it low;
* ``p_start``: while listening, the user has finished a turn that wants an answer (it starts
  speaking when ``p_start >= start_threshold``); a mid-sentence pause, a backchannel or
  background talk should keep it low.

Between boundaries (5 sub-steps per unit) an interruption head reads the partial transcript of
speech over the assistant and stops it at once when it is confident (``models/
interruption.npz``, :mod:`venus_ros.training.interruption`; see :class:`TrainedFloorPolicy`).
Speech over the assistant that calls someone else by name is never yielded to.

Features (:func:`acoustic_features`, :data:`ACOUSTIC_FEATURES` names them): the floor state
(speaking, scheduled turn, turn progress and remaining audio, overlap so far), per-unit Silero
VAD statistics of the user channel (echo-cancelled when AEC is on), frame energies (dBFS),
pitch (:func:`venus_ros.frontends.policy.frame_pitch_hz`), silence and utterance durations, the
same unit statistics of the two previous boundaries, whether the last turn ended with our own
yield, how much of the unanswered user speech overlapped the assistant's audio, and the text
the user said since the assistant last took the floor (final transcripts plus the partial one
when partials are on), embedded with all-MiniLM-L6-v2
(:class:`~venus_ros.frontends.cascade.embed.Embedder`; zeros when there is no text or no
embedder).

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
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from venus_ros.frontends.cascade.addressee import vocative
from venus_ros.frontends.policy import (
    FRAME_S,
    FloorAction,
    FloorObservation,
    FloorPolicy,
)
from venus_ros.text.commands import COMMAND_PHRASES, command_of, command_then_question
from venus_ros.text.speech import split_sentences

if TYPE_CHECKING:
    import onnx

    from venus_ros.frontends.cascade.embed import Embedder
    from venus_ros.frontends.cascade.texthead import TextHead
    from venus_ros.frontends.policy import PolicyFrontend

__all__ = [
    "ACOUSTIC_FEATURES",
    "AFTER_YIELD_SILENCE_S",
    "BACKEND_SILENCE_S",
    "COMMAND_PROBE_PATH",
    "FEATURE_VERSION",
    "FIRM_COMMANDS",
    "INTERRUPTION_PATH",
    "LEVEL_MIN_SPEECH_S",
    "MIN_START_SILENCE_S",
    "MODEL_PATH",
    "SUBSTEPS",
    "TEXT_DIM",
    "UNANSWERED_SILENCE_S",
    "UTTERANCE_GAP_S",
    "FloorFeatures",
    "FloorModel",
    "FloorState",
    "TrainedFloorPolicy",
    "UtteranceLevel",
    "acoustic_features",
    "build_onnx",
    "calls_someone_else",
    "load_floor_policy",
    "make_floor_frontend",
    "numpy_forward",
    "observation_text",
]

_HERE = Path(__file__).resolve().parent
MODEL_PATH = _HERE / "models" / "floor.onnx"
"""The committed model."""
INTERRUPTION_PATH = _HERE / "models" / "interruption.npz"
"""The committed interruption head (:mod:`venus_ros.training.interruption`)."""
COMMAND_PROBE_PATH = _HERE / "models" / "command_probe.npz"
"""The committed command probe (:mod:`venus_ros.training.command_probe`)."""
SUBSTEPS = 5
"""Observations per unit the policy asks for when it has the interruption head (200 ms)."""
MIN_INTERRUPT_OVERLAP_S = 0.2
"""Overlapping user speech heard in the assistant's turn before the head may stop it, or the
boundary model on how it sounds: the boundary model yielded on 0.03 s and 0.13 s of voice (a
blip of echo residue) in the reply that answered a cut-in, and the blip was then answered in
its place ("You're welcome!" for a "Thank you." the recogniser made of it; training suites
1002645 and 1002647 through the echo path). In those suites no stop was taken on less by the
words either."""
FIRM_COMMANDS = frozenset({"stop", "quiet", "wait", "moment"})
"""Commands (:data:`~venus_ros.text.commands.COMMANDS`) that stop the assistant as soon as a
partial transcript is only one of them; "never mind" stops it only as a whole utterance. A
wait opens some remarks too ("Hold on, my phone is ringing."), but on the training-split
suites the head already stopped for every such remark at its "Hold on." partial, while a
cut-in's "Hang on." partial (scored just below the threshold) was talked through for 0.8-1.8 s
more, to its next words (4 of 112 interruption stops)."""
INTERRUPT_QUIET_DB = 7.0
"""Speech this far below the user's running level (a TV, someone across the room) never stops
the assistant on the head's word alone."""
LEVEL_MIN_SPEECH_S = 0.2
"""Voiced speech a unit needs for its level to count as its utterance's level
(:class:`UtteranceLevel`): a unit with less holds only an utterance's onset or its fading
last frames (measured 12 dB under the words on a training-split "Quiet, please.")."""
UTTERANCE_GAP_S = 0.8
"""Silence that ends an utterance for :class:`UtteranceLevel` (longer than the VAD's 0.3 s
hangover plus a sub-step, so the final transcript is still read at its utterance's level)."""
CONFIDENT_YIELD = 0.99
"""A boundary whose ``p_yield`` reaches this yields at once, without the ``yield_count`` streak:
one such boundary was rare in remarks to others (0-4 % of them on training-split suites), and
it comes a unit (about a second) sooner; chosen with the streak's threshold raised to 0.7
(``models/floor_report.md``, "Yield rule changed")."""
REMARK_SCORE = 0.25
"""Speech over the turn whose words the interruption head scores below this reads as a remark
or background talk: the boundary model's yield (on how the speech sounds) is not taken for it
until its words read otherwise. On training-split suites (1002203, 1002502, 1002604, 1002605,
plain and echo) the boundary model stopped the assistant for 4 remarks and background lines
scored 0.13-0.26 by then (3 below this bar), and for no interruption scored below 0.31 (224
cut-ins): the bar leaves a margin under the interruptions."""
PRIOR_USER_DB = -26.0
"""The user's voiced level assumed before they spoke to a silent assistant (dBFS)."""
FEATURE_VERSION = 2
"""Bumped whenever the features change; the model records the version it was trained on."""
TEXT_DIM = 384
"""Width of the text embedding (all-MiniLM-L6-v2)."""
BACKEND_SILENCE_S = 0.6
"""User silence after which a waiting backend reply is spoken."""
AFTER_YIELD_SILENCE_S = 0.6
"""User silence after which the policy answers speech it yielded to, whatever the model says
(the VAD ended the utterance 0.3 s earlier and its final transcript is in; at 1.0 s the model's
low ``p_start`` after short cut-ins left their answers 1.1-1.6 s after the user's last word)."""
MIN_START_SILENCE_S = 0.1
"""User silence the model needs before it may take the turn (never over the user's words)."""
UNANSWERED_SILENCE_S = 2.5
"""User silence after which speech the model did not answer is answered anyway: a user who
stopped and waits is never left hanging (longer than the mid-sentence pauses it must wait out)."""

_UNIT_FEATURES = (
    "speech_frac",
    "overlap_frac",
    "vad_mean",
    "vad_max",
    "speech_db",
    "frame_db_mean",
    "frame_db_max",
    "frame_db_spread",
)
ACOUSTIC_FEATURES: tuple[str, ...] = (
    "assistant_speaking",
    "forced_turn",
    "assistant_spoken",
    "assistant_remaining",
    "turn_overlap",
    *_UNIT_FEATURES,
    "trailing_silence",
    "log_trailing_silence",
    "user_speaking",
    "user_turn_speech",
    "utterance_speech",
    "utterance_overlap",
    "pitch_mean",
    "pitch_std",
    "pitch_voiced_frac",
    "backend_pending",
    "after_yield",
    "unanswered_overlap",
    "has_text",
    "text_words",
    *(f"prev1_{name}" for name in _UNIT_FEATURES),
    *(f"prev2_{name}" for name in _UNIT_FEATURES),
)
"""Names of the acoustic and state features, in vector order (the text embedding follows)."""
N_FEATURES = len(ACOUSTIC_FEATURES) + TEXT_DIM


def _db(value: float) -> float:
    """dBFS to roughly [0, 1]: -60 dBFS (and silence) -> 0, -30 -> 1."""
    return (max(value, -60.0) + 60.0) / 30.0


def _unit_stats(obs: FloorObservation) -> np.ndarray:
    """The per-unit statistics of :data:`_UNIT_FEATURES`."""
    n = len(obs.vad_probs)
    if n == 0:
        return np.zeros(len(_UNIT_FEATURES))
    probs = np.asarray(obs.vad_probs, dtype=np.float64)
    dbs = np.asarray(obs.frame_db, dtype=np.float64)
    span = n * FRAME_S
    spread = float(np.percentile(dbs, 90) - np.percentile(dbs, 10)) if n > 1 else 0.0
    return np.array(
        [
            obs.user_speech_s / span,
            obs.overlap_s / span,
            float(probs.mean()),
            float(probs.max()),
            _db(obs.user_speech_db),
            _db(float(np.mean(np.maximum(dbs, -60.0)))),
            _db(float(dbs.max())),
            min(spread, 60.0) / 30.0,
        ]
    )


@dataclass
class FloorState:
    """What the features remember between boundaries (reset per session).

    Attributes:
        prev: Unit statistics of the last two boundaries, newest first.
        utterance_s: Voiced time of the user's current utterance (consecutive units with
            speech or with the VAD still in speech), up to the last boundary.
        utterance_overlap_s: The part of it that overlapped the assistant's audio.
        after_yield: The assistant's last turn ended with our yield, and it has not spoken
            since.
        was_speaking: The assistant held the floor at the last boundary.
        yielded: The policy answered YIELD at the last boundary.
        unanswered_overlap_s: User speech since the assistant last took the floor that
            overlapped the assistant's audio (talk over a turn is rarely a request).
        last_user_turn_speech_s: ``user_turn_speech_s`` at the last boundary (a drop means
            the assistant took the floor and the count started over).
    """

    prev: list[np.ndarray] = field(
        default_factory=lambda: [np.zeros(len(_UNIT_FEATURES)), np.zeros(len(_UNIT_FEATURES))]
    )
    utterance_s: float = 0.0
    utterance_overlap_s: float = 0.0
    after_yield: bool = False
    was_speaking: bool = False
    yielded: bool = False
    unanswered_overlap_s: float = 0.0
    last_user_turn_speech_s: float = 0.0


def _unanswered_overlap(obs: FloorObservation, state: FloorState) -> float:
    """Overlapped share of the user's speech since the assistant last took the floor."""
    restarted = obs.user_turn_speech_s < state.last_user_turn_speech_s - 1e-9
    return (0.0 if restarted else state.unanswered_overlap_s) + obs.overlap_s


def observation_text(obs: FloorObservation, partials: bool = True) -> str:
    """The user's words the text feature embeds: finals since the assistant last took the
    floor, plus the partial transcript of the utterance in progress when ``partials``."""
    parts = [obs.user_text.strip()]
    if partials:
        parts.append(obs.transcript.strip())
    return " ".join(p for p in parts if p)


def acoustic_features(obs: FloorObservation, state: FloorState, text: str) -> np.ndarray:
    """The acoustic and state part of the feature vector (:data:`ACOUSTIC_FEATURES`).

    Does not change ``state``; :meth:`FloorFeatures.advance` does, at boundaries.
    """
    unit = _unit_stats(obs)
    speech_here = obs.user_speech_s > 0 or obs.user_speaking
    utterance = (state.utterance_s if speech_here else 0.0) + obs.user_speech_s
    utterance_overlap = (state.utterance_overlap_s if speech_here else 0.0) + obs.overlap_s
    f0 = np.asarray(obs.frame_f0, dtype=np.float64)
    voiced = f0[f0 > 0]
    pitch_mean = float(voiced.mean()) / 300.0 if voiced.size else 0.0
    pitch_std = float(voiced.std()) / 100.0 if voiced.size > 1 else 0.0
    pitch_frac = voiced.size / f0.size if f0.size else 0.0
    silence = max(obs.trailing_silence_s, 0.0)
    words = len(text.split())
    head = np.array(
        [
            float(obs.assistant_speaking),
            float(obs.forced_turn),
            min(obs.assistant_spoken_s, 10.0) / 10.0,
            min(obs.assistant_remaining_s, 10.0) / 10.0,
            min(obs.turn_overlap_s, 5.0) / 5.0,
        ]
    )
    tail = np.array(
        [
            min(silence, 5.0) / 5.0,
            math.log1p(min(silence, 30.0)),
            float(obs.user_speaking),
            min(obs.user_turn_speech_s, 10.0) / 10.0,
            min(utterance, 5.0) / 5.0,
            min(utterance_overlap, 5.0) / 5.0,
            pitch_mean,
            pitch_std,
            pitch_frac,
            float(obs.backend_pending > 0),
            float(_after_yield(obs, state)),
            min(_unanswered_overlap(obs, state) / max(obs.user_turn_speech_s, FRAME_S), 1.0),
            float(words > 0),
            min(words, 20) / 20.0,
        ]
    )
    return np.concatenate([head, unit, tail, state.prev[0], state.prev[1]])


def _after_yield(obs: FloorObservation, state: FloorState) -> bool:
    """Listening, and the assistant's last turn ended with our yield (maybe at the last
    boundary, which :meth:`FloorFeatures.advance` has not turned into ``after_yield`` yet)."""
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
        """Update the state after the boundary observation ``obs`` was answered ``action``."""
        state = self.state
        speech_here = obs.user_speech_s > 0 or obs.user_speaking
        if speech_here:
            state.utterance_s += obs.user_speech_s
            state.utterance_overlap_s += obs.overlap_s
        else:
            state.utterance_s = state.utterance_overlap_s = 0.0
        state.after_yield = _after_yield(obs, state)
        state.unanswered_overlap_s = _unanswered_overlap(obs, state)
        state.last_user_turn_speech_s = obs.user_turn_speech_s
        state.was_speaking = obs.assistant_speaking
        state.yielded = obs.assistant_speaking and action is FloorAction.YIELD
        state.prev = [_unit_stats(obs), state.prev[0]]


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
    """

    w1: npt.NDArray[np.float32]
    b1: npt.NDArray[np.float32]
    w2: npt.NDArray[np.float32]
    b2: npt.NDArray[np.float32]
    yield_threshold: float
    yield_count: int
    start_threshold: float
    metadata: Mapping[str, str] = field(default_factory=dict)


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

    The model decides at boundaries; between them only the interruption head can stop the
    assistant (below), and the turn is taken by the same rules as at a boundary once a final
    transcript is in (the frontend may start speaking there); sub-step observations do not
    change the feature state. Rules around
    the model: with nothing to answer
    (no user speech since the assistant last spoke and no backend reply) it never starts; a
    waiting backend reply is spoken after :data:`BACKEND_SILENCE_S` of silence; the model takes
    the turn only after :data:`MIN_START_SILENCE_S` of silence (never over the user); speech the
    policy yielded to is answered after :data:`AFTER_YIELD_SILENCE_S` of silence at the latest
    (the floor was given to the user, so it is taken back when they stop).

    **Stopping between boundaries.** While the assistant speaks, the partial transcript of user
    speech over it (the frontend transcribes it every 0.2 s from 0.25 s on, as far as each
    unit's recognition budget allows: ``OVERLAP_PARTIAL_BUDGET_S``) is scored by the
    interruption head (:class:`~venus_ros.frontends.cascade.texthead.TextHead`, trained by
    :mod:`venus_ros.training.interruption` on what Whisper makes of the first second of
    training interruptions, backchannels, remarks to others, background talk and the
    assistant's own echo). A score at or above the head's threshold, with at least
    :data:`MIN_INTERRUPT_OVERLAP_S` of overlapping speech and a level not
    :data:`INTERRUPT_QUIET_DB` below the user's running level, is a ``YIELD`` at once, at any
    sub-step: the assistant stops within about half a second of a clear "wait" or "stop". Where
    there is no partial (a short "Stop." can end before one, and partials thin out after the
    first second), the final transcripts since the assistant took the floor are read instead,
    at the level of their utterance (:class:`UtteranceLevel`; partials too), against the
    head's threshold for a complete utterance (``final_threshold``, chosen with the partials'
    by the trainer on what the recogniser makes of whole training utterances). The boundary
    after such a stop sees it as a yield (the answer follows the user's end). Below the
    threshold the boundary model decides as before, except that words read as a remark or
    background talk (a score below :data:`REMARK_SCORE`) are not yielded to on how they sound.

    Args:
        path: The ONNX model (default :data:`MODEL_PATH`).
        embedder: Sentence embedder for the text feature; None builds the packaged one, or
            runs without text if the model package is missing and ``text=False``.
        text: Use the text feature (False: the embedding is zeros, as the model saw for
            observations without a transcript).
        partials: Put the partial transcript in the text.
        interruption: The interruption head (:data:`INTERRUPTION_PATH`; a path for another,
            False for none). With it the policy asks for :data:`SUBSTEPS` observations per unit
            and stops the assistant at any of them (see below).
        name: The assistant's name: speech over it that calls someone else by name is never
            yielded to (:meth:`said_to_someone_else`).
        yield_threshold: Override the model's value.
        start_threshold: Override the model's value.
        yield_count: Override the model's value.
        confident_yield: ``p_yield`` at which one boundary yields (:data:`CONFIDENT_YIELD`;
            above 1.0: only the streak does).

    Raises:
        FileNotFoundError: No model at ``path``.
        ValueError: The model was trained on other features.
    """

    name = "floor"
    #: A short command over the assistant is an interruption (:meth:`interrupts`): the
    #: recogniser weighs a short utterance over it against them (a misheard "Hold on." read as
    #: "Go on." is read as what it more likely was), and the opening of a longer one as it
    #: is heard against those of two words or more (its partials: "Hanyo." for the "Hang on"
    #: of "Hang on, that's not ...").
    expected_over_turn: tuple[str, ...] = COMMAND_PHRASES
    #: ... and with a probe of how they sound (a command the decoder misheard in full).
    expected_probe: Path | None = COMMAND_PROBE_PATH
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
        interruption: bool | str | Path = True,
        name: str = "Venus",
        yield_threshold: float | None = None,
        start_threshold: float | None = None,
        yield_count: int | None = None,
        confident_yield: float = CONFIDENT_YIELD,
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
                f"{N_FEATURES}: retrain it"
            )
        self.yield_threshold = float(
            meta["yield_threshold"] if yield_threshold is None else yield_threshold
        )
        self.start_threshold = float(
            meta["start_threshold"] if start_threshold is None else start_threshold
        )
        self.yield_count = int(meta["yield_count"] if yield_count is None else yield_count)
        if not confident_yield > 0.0:
            raise ValueError(f"confident_yield: must be > 0, got {confident_yield}")
        self.confident_yield = float(confident_yield)
        if text and embedder is None:
            from venus_ros.frontends.cascade.embed import Embedder

            embedder = _shared_embedder(Embedder)
        self.features = FloorFeatures(embedder if text else None, partials=partials)
        self.interruption: TextHead | None = None
        if interruption is not False and text and partials:
            head_path = INTERRUPTION_PATH if interruption is True else Path(interruption)
            if head_path.is_file() or interruption is not True:
                self.interruption = _load_head(head_path, embedder)
        self.name = name
        #: Observations per unit this policy asks the frontend for.
        self.substeps = SUBSTEPS if self.interruption is not None else 1
        self.reset()

    def reset(self) -> None:
        """Start a session: forget the feature state, the yield streak and the user's level."""
        self.features.reset()
        self._streak = 0
        self._stopped_early = False
        self.user_db = PRIOR_USER_DB
        self.last_probs: tuple[float, float] = (0.0, 0.0)
        #: The head's score of the words read at the latest observation (None: none read).
        self.last_interruption: float | None = None
        #: ``(text, head score, command, asks)`` of the latest text read (a partial is kept
        #: between recognitions: each is read once, not per sub-step; :func:`_cut_in_reading`).
        self._scored: tuple[str, float, str | None, bool] | None = None
        #: Level of the user's latest utterance heard over the current turn.
        self._level = UtteranceLevel()
        #: The finals as the assistant took the floor (a turn that does not answer them, a
        #: backend reply, leaves them in ``user_text``: only newer ones are read over it).
        self._before_turn = ""

    def said_to_someone_else(self, obs: FloorObservation) -> bool:
        """Whether the latest of the user's sentences since the assistant took the floor that
        calls anyone by name calls someone else ("Yeah. Sam, can you grab the mail?";
        :func:`~venus_ros.frontends.cascade.addressee.vocative`): such speech over the
        assistant is never yielded to."""
        return calls_someone_else(observation_text(obs, self.features.partials), self.name)

    def interrupts(self, obs: FloorObservation) -> bool:
        """Whether the speech over the assistant is an interruption by the head's reading of
        its transcript (see the class docstring); records the score.

        The text is the partial transcript of the utterance in progress, or, when there is
        none (a short "Stop." ends before a partial, or its partial window is over), the
        final transcripts of the speech over this turn. Its level is that of the utterance
        (:class:`UtteranceLevel`; the final comes after the speech ends). A final whose
        latest sentence only asks to stop or wait (:func:`~venus_ros.text.commands.
        command_of`: "Enough.", "Hold up, please.") interrupts whatever the head's score: a
        short command is an interruption, and the head, trained without the evaluation's
        wording, reads some of them (one-word ones most) below its threshold. So does a
        partial whose latest sentence only asks to stop, be quiet or wait
        (:data:`FIRM_COMMANDS`: "Enough." or "Hang on." heard 0.3 s in is not talked through
        to its final). A command that goes on to ask a question (:func:`~venus_ros.text.commands.
        command_then_question`: "Hang on, is there parking?", "Stop, does it ...")
        interrupts as a partial too."""
        self.last_interruption = None
        if self.interruption is None or not obs.assistant_speaking:
            return False
        self._level.update(obs)
        finals = obs.user_text
        if self._before_turn and finals.startswith(self._before_turn):
            finals = finals[len(self._before_turn) :]  # said before the turn (a backend reply's)
        partial = obs.transcript.strip()
        text = partial or finals.strip()
        if not text or obs.turn_overlap_s < MIN_INTERRUPT_OVERLAP_S:
            return False
        level = self._level.db
        if level is not None and self.user_db - level > INTERRUPT_QUIET_DB:
            return False
        if self._scored is None or self._scored[0] != text:
            score = self.interruption_score(text)
            assert score is not None  # (there is a head: checked above)
            self._scored = (text, score, *_cut_in_reading(text))
        _, score, command, asks = self._scored
        self.last_interruption = score
        if asks or (command is not None and (not partial or command in FIRM_COMMANDS)):
            return True  # a whole utterance that only asks to stop or wait ("Enough.")
        return score >= self.interruption.threshold_for(final=not partial)

    def interruption_score(self, text: str) -> float | None:
        """The interruption head's probability that ``text``, said over the assistant, cuts it
        off to be answered (None without a head). The latest text read over the turn is not
        embedded again (the addressee gate asks about the final the floor has just read)."""
        if self.interruption is None:
            return None
        if self._scored is not None and self._scored[0] == text:
            return self._scored[1]
        embedding = self.features.embed(text)[None, :]
        return float(self.interruption.scores(embedding, [text])[0])

    def probabilities(self, obs: FloorObservation) -> tuple[float, float]:
        """``(p_yield, p_start)`` for an observation, given the current state."""
        x = self.features.vector(obs).astype(np.float32)[None, :]
        (probs,) = self._session.run(["probs"], {"features": x})
        return float(probs[0, 0]), float(probs[0, 1])

    def decide(self, obs: FloorObservation) -> FloorAction:
        """The action at an observation (see the class docstring)."""
        if not obs.assistant_speaking:
            self._level.reset()
            self._before_turn = obs.user_text
        elsewhere = obs.assistant_speaking and self.said_to_someone_else(obs)
        interrupted = not elsewhere and self.interrupts(obs)
        if not obs.is_boundary:
            if interrupted:
                self._stopped_early = True  # the frontend stops the turn now
                return FloorAction.YIELD
            if obs.assistant_speaking:
                return FloorAction.KEEP_SPEAKING
            # A turn may start between boundaries once a final transcript is in: the model
            # is asked on the unit so far, and its state moves on only at the boundary.
            if obs.user_text and obs.trailing_silence_s >= MIN_START_SILENCE_S:
                if self._starts(obs, self.probabilities(obs)[1]):
                    return FloorAction.START_SPEAKING
            return FloorAction.KEEP_LISTENING
        if self._stopped_early and not obs.assistant_speaking:
            # The turn ended mid-unit by our yield: the features see it as a boundary's yield.
            self.features.state.was_speaking = self.features.state.yielded = True
        self._stopped_early = False
        if not obs.assistant_speaking and obs.user_speech_s >= 0.3 and obs.overlap_s == 0.0:
            self.user_db += 0.3 * (obs.user_speech_db - self.user_db)
        p_yield, p_start = self.probabilities(obs)
        self.last_probs = (p_yield, p_start)
        if obs.assistant_speaking:
            # Only speech over the turn is yielded to: the user's words before a turn taken
            # between boundaries are in this unit too, and are what the turn answers.
            over = obs.turn_overlap_s >= MIN_INTERRUPT_OVERLAP_S
            likely = over and p_yield >= self.yield_threshold
            self._streak = self._streak + 1 if likely else 0
            confident = over and p_yield >= self.confident_yield
            sounds = self._streak >= self.yield_count or confident
            heard = self.last_interruption
            remark = heard is not None and heard < REMARK_SCORE
            yields = interrupted or (sounds and not remark)
            action = FloorAction.YIELD if yields and not elsewhere else FloorAction.KEEP_SPEAKING
        else:
            self._streak = 0
            starts = self._starts(obs, p_start)
            action = FloorAction.START_SPEAKING if starts else FloorAction.KEEP_LISTENING
        self.features.advance(obs, action)
        if action is FloorAction.YIELD:
            self._streak = 0
        return action

    def _starts(self, obs: FloorObservation, p_start: float) -> bool:
        """Whether to take the turn while listening (see the class docstring's rules)."""
        silence = obs.trailing_silence_s
        if obs.backend_pending > 0 and silence >= BACKEND_SILENCE_S:
            return True
        return obs.user_turn_speech_s > 0 and (
            (p_start >= self.start_threshold and silence >= MIN_START_SILENCE_S)
            or (_after_yield(obs, self.features.state) and silence >= AFTER_YIELD_SILENCE_S)
            or silence >= UNANSWERED_SILENCE_S
        )


def _cut_in_reading(text: str) -> tuple[str | None, bool]:
    """``(command, asks)`` of speech over the assistant: the command its latest sentence is
    made of (:func:`~venus_ros.text.commands.command_of`), and whether it makes a command and
    then asks a question (:func:`~venus_ros.text.commands.command_then_question`)."""
    sentences = split_sentences(text)  # none in "...": the recogniser's dots only
    command = command_of(sentences[-1]) if sentences else None
    return command, command_then_question(text) is not None


class UtteranceLevel:
    """The level of the user's latest utterance, from the observations of its units.

    An utterance's level is that of its loudest unit with at least
    :data:`LEVEL_MIN_SPEECH_S` of voiced speech, or, while it has none, of its loudest unit with
    any: units with less hold only its onset or its fading end, and a word as short as "Wait."
    can fall in two of them (its onset at its level, its fading end 10 dB below: the later
    unit read it as speech from across the room). It stays after the speech ends
    (the final transcript comes later) until :data:`UTTERANCE_GAP_S` of silence has passed and
    new speech begins. Sub-step observations cover their unit so far, so a unit is counted as
    often as it is observed; the maximum does not mind.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the utterance (nothing heard)."""
        self._full: float | None = None
        self._any: float | None = None
        self._ended = True

    def update(self, obs: FloorObservation) -> None:
        """Take in one observation."""
        if obs.trailing_silence_s >= UTTERANCE_GAP_S:
            self._ended = True
            return
        if obs.user_speech_s <= 0.0:
            return
        if self._ended:
            self._full = self._any = None
            self._ended = False
        db = obs.user_speech_db
        self._any = db if self._any is None else max(self._any, db)
        if obs.user_speech_s >= LEVEL_MIN_SPEECH_S:
            self._full = db if self._full is None else max(self._full, db)

    @property
    def db(self) -> float | None:
        """The utterance's level in dBFS (None before any speech)."""
        return self._full if self._full is not None else self._any


def calls_someone_else(text: str, name: str = "Venus") -> bool:
    """Whether the latest sentence of ``text`` that calls anyone by name calls someone other
    than ``name`` (:func:`~venus_ros.frontends.cascade.addressee.vocative`)."""
    for sentence in reversed(split_sentences(text) if text else []):
        called = vocative(sentence, name)
        if called is not None:
            return called != name.lower()
    return False


def _load_head(path: Path, embedder: Embedder | None) -> TextHead:
    """The interruption head at ``path``, checked against the embedder it will be fed by."""
    from venus_ros.frontends.cascade.texthead import TextHead

    try:
        head = TextHead.load(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"interruption head {path}: {exc}") from None
    name = getattr(embedder, "name", None)
    if head.dim != TEXT_DIM:
        raise ValueError(f"interruption head {path}: expects {head.dim}-d embeddings")
    if head.embedder and name and head.embedder != name:
        raise ValueError(
            f"interruption head {path}: trained with embedder {head.embedder!r}, fed by "
            f"{name!r}; retrain it with `python -m venus_ros.training.interruption`"
        )
    return head


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
    ``model=PATH``, ``yield=P``, ``start=P`` (threshold overrides). ``kwargs`` go to
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
