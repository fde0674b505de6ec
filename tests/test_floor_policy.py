"""The trained floor policy: features, the ONNX model, decisions, and training determinism."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from venus_ros.frontends.cascade.floor import (
    ACOUSTIC_FEATURES,
    CONFIDENT_YIELD,
    MODEL_PATH,
    N_FEATURES,
    TEXT_DIM,
    FloorFeatures,
    FloorModel,
    TrainedFloorPolicy,
    acoustic_features,
    build_onnx,
    numpy_forward,
    observation_text,
)
from venus_ros.frontends.policy import FloorAction, FloorObservation

FRAMES = 31


def make_obs(**changes: object) -> FloorObservation:
    """A quiet listening boundary observation; ``changes`` override fields."""
    base = FloorObservation(
        unit_index=3,
        substep=0,
        substeps=1,
        t=4.0,
        frames_start_s=3.0,
        frames_end_s=3.992,
        vad_probs=(0.01,) * FRAMES,
        frame_db=(-120.0,) * FRAMES,
        assistant_frames=(False,) * FRAMES,
        vad_threshold=0.5,
        user_speech_s=0.0,
        user_speech_db=-120.0,
        overlap_s=0.0,
        trailing_silence_s=4.0,
        user_speaking=False,
        user_turn_speech_s=0.0,
        user_text="",
        transcript="",
        assistant_speaking=False,
        forced_turn=False,
        assistant_spoken_s=0.0,
        assistant_remaining_s=0.0,
        turn_overlap_s=0.0,
        backend_pending=0,
        frame_f0=(0.0,) * FRAMES,
    )
    return replace(base, **changes)


def overlapping(**changes: object) -> FloorObservation:
    """The assistant speaking, the user talking over it for the whole unit at -25 dBFS."""
    fields: dict[str, object] = {
        "vad_probs": (0.95,) * FRAMES,
        "frame_db": (-25.0,) * FRAMES,
        "assistant_frames": (True,) * FRAMES,
        "user_speech_s": FRAMES * 0.032,
        "user_speech_db": -25.0,
        "overlap_s": FRAMES * 0.032,
        "trailing_silence_s": 0.0,
        "user_speaking": True,
        "user_turn_speech_s": 1.5,
        "assistant_speaking": True,
        "forced_turn": True,
        "assistant_spoken_s": 3.0,
        "assistant_remaining_s": 4.0,
        "turn_overlap_s": 1.5,
        "frame_f0": (150.0,) * 20 + (0.0,) * 11,
    }
    fields.update(changes)
    return make_obs(**fields)


def feature(vector: np.ndarray, name: str) -> float:
    return float(vector[ACOUSTIC_FEATURES.index(name)])


class CountingEmbedder:
    """A deterministic stand-in for the MiniLM embedder that counts its calls."""

    dim = TEXT_DIM

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), TEXT_DIM), np.float32)
        for i, text in enumerate(texts):
            digest = hashlib.sha256(text.encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            v = rng.normal(size=TEXT_DIM)
            out[i] = v / np.linalg.norm(v)
        return out


# --- features ---------------------------------------------------------------------------------


def test_quiet_listening_features() -> None:
    features = FloorFeatures(None)
    v = features.vector(make_obs())
    assert v.shape == (N_FEATURES,)
    assert feature(v, "assistant_speaking") == 0.0
    assert feature(v, "speech_frac") == 0.0
    assert feature(v, "speech_db") == 0.0  # silence maps to the floor of the dB scale
    assert feature(v, "trailing_silence") == pytest.approx(0.8)
    assert feature(v, "log_trailing_silence") == pytest.approx(np.log1p(4.0))
    assert feature(v, "pitch_voiced_frac") == 0.0
    assert feature(v, "has_text") == 0.0
    assert not v[len(ACOUSTIC_FEATURES) :].any()  # no text: the embedding is zeros


def test_overlap_features_energy_pitch_and_text() -> None:
    obs = overlapping(user_text="wait", transcript="stop now")
    v = FloorFeatures(None).vector(obs)
    assert feature(v, "assistant_speaking") == 1.0
    assert feature(v, "forced_turn") == 1.0
    assert feature(v, "speech_frac") == pytest.approx(1.0)
    assert feature(v, "overlap_frac") == pytest.approx(1.0)
    assert feature(v, "vad_max") == pytest.approx(0.95)
    assert feature(v, "speech_db") == pytest.approx((-25.0 + 60.0) / 30.0)
    assert feature(v, "assistant_remaining") == pytest.approx(0.4)
    assert feature(v, "pitch_mean") == pytest.approx(150.0 / 300.0)
    assert feature(v, "pitch_std") == pytest.approx(0.0)
    assert feature(v, "pitch_voiced_frac") == pytest.approx(20 / 31)
    assert feature(v, "text_words") == pytest.approx(3 / 20)  # finals + partial
    assert observation_text(obs, partials=False) == "wait"
    v2 = FloorFeatures(None, partials=False).vector(obs)
    assert feature(v2, "text_words") == pytest.approx(1 / 20)


def test_history_utterance_and_after_yield_state() -> None:
    features = FloorFeatures(None)
    first = overlapping()
    features.advance(first, FloorAction.KEEP_SPEAKING)
    second = overlapping(unit_index=4, t=5.0, user_speech_s=0.5, overlap_s=0.5)
    v = features.vector(second)
    # the utterance runs on over both units; the previous unit's statistics are kept
    assert feature(v, "utterance_speech") == pytest.approx((0.992 + 0.5) / 5.0)
    assert feature(v, "utterance_overlap") == pytest.approx((0.992 + 0.5) / 5.0)
    assert feature(v, "prev1_speech_frac") == pytest.approx(1.0)
    assert feature(v, "prev2_speech_frac") == 0.0
    assert feature(v, "after_yield") == 0.0
    features.advance(second, FloorAction.YIELD)
    # next boundary: the turn is over (our yield): after_yield is on while listening
    listening = make_obs(unit_index=5, t=6.0, trailing_silence_s=0.4, user_turn_speech_s=1.5)
    assert feature(features.vector(listening), "after_yield") == 1.0
    features.advance(listening, FloorAction.KEEP_LISTENING)
    assert feature(features.vector(listening), "after_yield") == 1.0
    # silence resets the utterance; speaking again clears after_yield
    assert feature(features.vector(listening), "utterance_speech") == 0.0
    speaking = make_obs(unit_index=6, t=7.0, assistant_speaking=True)
    features.advance(speaking, FloorAction.KEEP_SPEAKING)
    assert features.state.after_yield is False
    features.reset()
    assert features.state.utterance_s == 0.0 and not features.state.prev[0].any()


def test_unanswered_overlap_share_restarts_when_the_assistant_takes_the_floor() -> None:
    features = FloorFeatures(None)
    talk_over = overlapping(user_speech_s=0.5, overlap_s=0.5, user_turn_speech_s=0.5)
    assert feature(features.vector(talk_over), "unanswered_overlap") == pytest.approx(1.0)
    features.advance(talk_over, FloorAction.KEEP_SPEAKING)
    # after the turn: 0.5 s more, not overlapped: half of the unanswered speech overlapped
    alone = make_obs(
        unit_index=4, t=5.0, user_speech_s=0.5, user_turn_speech_s=1.0, trailing_silence_s=0.0
    )
    assert feature(features.vector(alone), "unanswered_overlap") == pytest.approx(0.5)
    features.advance(alone, FloorAction.START_SPEAKING)
    # the assistant answered (the count started over): new speech alone is not overlapped
    fresh = replace(alone, unit_index=6, t=7.0, user_turn_speech_s=0.5)
    assert feature(features.vector(fresh), "unanswered_overlap") == pytest.approx(0.0)


def test_finished_turn_is_not_after_yield() -> None:
    features = FloorFeatures(None)
    features.advance(overlapping(), FloorAction.KEEP_SPEAKING)  # the turn ends by itself
    listening = make_obs(unit_index=5, t=6.0, user_turn_speech_s=1.0)
    assert feature(features.vector(listening), "after_yield") == 0.0


def test_text_embedding_is_cached() -> None:
    embedder = CountingEmbedder()
    features = FloorFeatures(embedder)  # type: ignore[arg-type]
    obs = overlapping(user_text="wait, stop")
    a = features.vector(obs)
    b = features.vector(obs)
    assert embedder.calls == 1
    np.testing.assert_array_equal(a, b)
    assert np.linalg.norm(a[len(ACOUSTIC_FEATURES) :]) == pytest.approx(1.0)
    assert acoustic_features(obs, features.state, "").shape == (len(ACOUSTIC_FEATURES),)


# --- the model --------------------------------------------------------------------------------


def random_model(rng: np.random.Generator, hidden: int = 16, **settings: object) -> FloorModel:
    values: dict[str, object] = {"yield_threshold": 0.5, "yield_count": 1, "start_threshold": 0.5}
    values.update(settings)
    return FloorModel(
        w1=rng.normal(0, 0.1, (N_FEATURES, hidden)).astype(np.float32),
        b1=rng.normal(0, 0.1, hidden).astype(np.float32),
        w2=rng.normal(0, 0.5, (hidden, 2)).astype(np.float32),
        b2=rng.normal(0, 0.5, 2).astype(np.float32),
        **values,  # type: ignore[arg-type]
    )


def test_onnx_matches_numpy_forward(tmp_path: Path) -> None:
    import onnxruntime as ort

    rng = np.random.default_rng(5)
    model = random_model(rng, yield_threshold=0.7, yield_count=2, start_threshold=0.3)
    path = tmp_path / "m.onnx"
    path.write_bytes(build_onnx(model).SerializeToString())
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = rng.normal(0, 1, (64, N_FEATURES)).astype(np.float32)
    (got,) = session.run(["probs"], {"features": x})
    np.testing.assert_allclose(got, numpy_forward(model, x), atol=1e-5)
    meta = session.get_modelmeta().custom_metadata_map
    assert float(meta["yield_threshold"]) == 0.7
    assert int(meta["yield_count"]) == 2
    assert int(meta["n_features"]) == N_FEATURES


def hand_model(tmp_path: Path, **settings: object) -> Path:
    """A model whose p_yield follows the overlap fraction and p_start the trailing silence."""
    w1 = np.zeros((N_FEATURES, 2), np.float32)
    w1[ACOUSTIC_FEATURES.index("overlap_frac"), 0] = 1.0
    w1[ACOUSTIC_FEATURES.index("trailing_silence"), 1] = 1.0
    values: dict[str, object] = {"yield_threshold": 0.5, "yield_count": 1, "start_threshold": 0.5}
    values.update(settings)
    model = FloorModel(
        w1=w1,
        b1=np.zeros(2, np.float32),
        w2=np.array([[10.0, 0.0], [0.0, 10.0]], np.float32),
        b2=np.array([-5.0, -1.0], np.float32),  # yield above overlap 0.5, start above 0.5 s
        **values,  # type: ignore[arg-type]
    )
    path = tmp_path / "hand.onnx"
    path.write_bytes(build_onnx(model).SerializeToString())
    return path


def test_policy_decisions_and_rules(tmp_path: Path) -> None:
    policy = TrainedFloorPolicy(
        hand_model(tmp_path, yield_count=2), text=False, confident_yield=1.5
    )
    policy.reset()
    # two consecutive overlapping boundaries are needed to yield
    assert policy.decide(overlapping()) is FloorAction.KEEP_SPEAKING
    assert policy.last_probs[0] > 0.99
    assert policy.decide(overlapping(unit_index=4, t=5.0)) is FloorAction.YIELD
    # a sub-step observation is answered without the model and changes nothing
    sub = overlapping(substep=0, substeps=4)
    assert policy.decide(sub) is FloorAction.KEEP_SPEAKING
    # listening: starts after silence, but only with something to answer
    quiet = make_obs(trailing_silence_s=2.0, user_turn_speech_s=1.0)
    assert policy.decide(quiet) is FloorAction.START_SPEAKING
    assert policy.decide(replace(quiet, user_turn_speech_s=0.0)) is FloorAction.KEEP_LISTENING
    assert policy.decide(replace(quiet, trailing_silence_s=0.1)) is FloorAction.KEEP_LISTENING
    # never over the user's words: a model that would start needs some silence first
    eager = TrainedFloorPolicy(hand_model(tmp_path, start_threshold=0.0), text=False)
    speaking_user = replace(quiet, trailing_silence_s=0.0, user_speaking=True)
    assert eager.decide(speaking_user) is FloorAction.KEEP_LISTENING
    assert eager.decide(replace(quiet, trailing_silence_s=0.25)) is FloorAction.START_SPEAKING
    # a waiting backend reply is spoken after the rule's silence, whatever the model says
    backend = make_obs(trailing_silence_s=0.7, backend_pending=1)
    strict = TrainedFloorPolicy(hand_model(tmp_path, start_threshold=1.0), text=False)
    assert strict.decide(backend) is FloorAction.START_SPEAKING
    assert strict.decide(replace(backend, trailing_silence_s=0.3)) is FloorAction.KEEP_LISTENING
    # speech it yielded to is answered after a second of silence, even where the model won't
    yielding = TrainedFloorPolicy(hand_model(tmp_path, start_threshold=1.0), text=False)
    assert yielding.decide(overlapping()) is FloorAction.YIELD
    after = make_obs(unit_index=4, t=5.0, trailing_silence_s=0.5, user_turn_speech_s=1.5)
    assert yielding.decide(after) is FloorAction.KEEP_LISTENING
    later = replace(after, unit_index=5, t=6.0, trailing_silence_s=1.5)
    assert yielding.decide(later) is FloorAction.START_SPEAKING
    assert strict.decide(replace(later, backend_pending=0)) is FloorAction.KEEP_LISTENING
    # speech the model never answers is answered after 2.5 s of silence: nobody is left waiting
    waiting = make_obs(trailing_silence_s=2.4, user_turn_speech_s=1.0)
    assert strict.decide(waiting) is FloorAction.KEEP_LISTENING
    assert strict.decide(replace(waiting, trailing_silence_s=2.5)) is FloorAction.START_SPEAKING


def test_one_confident_boundary_yields_without_the_streak(tmp_path: Path) -> None:
    policy = TrainedFloorPolicy(hand_model(tmp_path, yield_count=2), text=False)
    assert policy.confident_yield == CONFIDENT_YIELD
    policy.reset()
    assert policy.decide(overlapping()) is FloorAction.YIELD  # p_yield 0.993
    assert policy.last_probs[0] >= CONFIDENT_YIELD
    # less sure (overlap fraction 0.9: p_yield 0.982): the streak of two decides
    policy.reset()
    part = overlapping(overlap_s=0.9 * FRAMES * 0.032)
    assert policy.decide(part) is FloorAction.KEEP_SPEAKING
    assert 0.5 < policy.last_probs[0] < CONFIDENT_YIELD
    assert policy.decide(replace(part, unit_index=4, t=5.0)) is FloorAction.YIELD
    with pytest.raises(ValueError, match="confident_yield"):
        TrainedFloorPolicy(hand_model(tmp_path), text=False, confident_yield=0.0)


def test_policy_rejects_a_model_for_other_features(tmp_path: Path) -> None:
    from onnx import helper

    proto = build_onnx(random_model(np.random.default_rng(1)))
    helper.set_model_props(proto, {"feature_version": "0", "n_features": str(N_FEATURES)})
    path = tmp_path / "old.onnx"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ValueError, match="feature version 0"):
        TrainedFloorPolicy(path, text=False)
    with pytest.raises(FileNotFoundError, match="venus-ros train floor"):
        TrainedFloorPolicy(tmp_path / "missing.onnx", text=False)


def test_committed_model_is_small_and_consistent() -> None:
    assert MODEL_PATH.stat().st_size < 5 * 1024 * 1024
    policy = TrainedFloorPolicy(text=False)
    assert 0.0 < policy.yield_threshold < 1.0
    assert 0.0 < policy.start_threshold < 1.0
    assert policy.yield_count >= 1
    assert MODEL_PATH.with_name("floor_report.md").is_file()
    # the sidecar repeats the thresholds the model file carries
    from venus_ros.frontends.cascade.floor import read_sidecar

    sidecar = read_sidecar()["thresholds"]
    assert sidecar["yield_threshold"] == pytest.approx(policy.yield_threshold)
    assert sidecar["start_threshold"] == pytest.approx(policy.start_threshold)
    assert sidecar["yield_count"] == policy.yield_count


# --- on real speech ---------------------------------------------------------------------------


def test_keeps_speaking_through_backchannel_and_yields_to_interruption(tmp_path: Path) -> None:
    from venus_ros.core.clock import FakeClock
    from venus_ros.core.session import SessionConfig, run_offline
    from venus_ros.eval.synth import synthesize
    from venus_ros.frontends.cascade.floor import make_floor_frontend

    suite = synthesize(
        tmp_path / "suite",
        1,
        1_900_001,
        ["backchannel", "interruption"],
        purpose="train",
        voices="espeak",
        compact=True,
    )
    yields = {}
    for sample in suite.samples:
        frontend = make_floor_frontend()
        try:
            frontend.schedule_turns([(t.start, t.text) for t in sample.assistant_turns])
            audio, rate = sample.load_audio()
            audio = np.concatenate([audio, np.zeros(3 * rate, np.float32)])
            run_offline(
                audio, rate, frontend, clock=FakeClock(), config=SessionConfig(timeline_window_s=60)
            )
            yields[sample.category] = [
                (step.unit_index, step.started) for step in frontend.steps if step.yielded
            ]
            starts = [s.unit_index for s in frontend.steps if s.started in ("ack", "delegate")]
        finally:
            frontend.close()
        if sample.category == "interruption":
            start, end = sample.overlap
            assert len(yields["interruption"]) == 1, frontend.steps
            unit = yields["interruption"][0][0]
            boundary = 1.035 + unit  # unit 0 is 1.035 s long, later ones 1 s
            assert start < boundary <= end + 2.0
            assert starts and starts[0] > unit  # and it answers after the user finished
    assert yields["backchannel"] == []


# --- training ---------------------------------------------------------------------------------


def test_training_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    from venus_ros.training.floor import TrainConfig, train_floor, train_seed

    config = TrainConfig(hidden=8, epochs=3)
    categories = ("interruption", "backchannel", "turn_taking")
    runs = [
        train_floor(
            7,
            tmp_path / name,
            n_per_category=2,
            categories=categories,
            config=config,
            embedder=CountingEmbedder(),
        )
        for name in ("a", "b")
    ]
    a, b = ((tmp_path / name / "floor.onnx").read_bytes() for name in ("a", "b"))
    assert a == b
    assert runs[0]["onnx"]["sha256"] == runs[1]["onnx"]["sha256"]
    assert runs[0]["thresholds"] == runs[1]["thresholds"]
    sizes = runs[0]["sizes"]
    assert sizes["suite_seed"] == train_seed(7) == 1_000_007
    assert sizes["samples"] == 6
    assert sizes["yield_positives"] > 0 and sizes["start_positives"] > 0
    assert len(runs[0]["fit"]["folds"]) == 2  # two samples per category: two non-empty folds
    assert runs[0]["onnx"]["max_abs_diff_vs_numpy"] < 1e-5
    report = (tmp_path / "a" / "floor_report.md").read_text()
    assert "## Validation" in report and "interruption" in report
    TrainedFloorPolicy(tmp_path / "a" / "floor.onnx", text=False)  # loads


def test_training_rejects_bad_arguments(tmp_path: Path) -> None:
    from venus_ros.training.floor import train_floor, train_seed

    with pytest.raises(ValueError, match="seed"):
        train_seed(-1)
    with pytest.raises(ValueError, match="n_per_category"):
        train_floor(0, tmp_path, n_per_category=1)
    with pytest.raises(ValueError, match="categories"):
        train_floor(0, tmp_path, categories=("tool_use",))


def test_training_observes_through_the_echo_path_with_echo_cancellation(tmp_path: Path) -> None:
    from venus_ros.eval.synth import synthesize
    from venus_ros.training.floor import _run_teacher, _truth

    suite = synthesize(
        tmp_path / "suite", 1, 1_900_002, ["backchannel"], purpose="train", voices="espeak",
        compact=True,
    )  # fmt: skip
    (sample,) = suite.samples
    truth = _truth(sample, np.random.default_rng(0), False)
    dry = _run_teacher(sample, truth, echo=True, echo_gain_db=-300.0)  # AEC, no echo heard
    wet = _run_teacher(sample, truth, echo=True)
    assert [r.t for r in dry] == [r.t for r in wet]  # the same boundaries and labels
    assert [r.y_yield for r in dry] == [r.y_yield for r in wet]
    speaking = [i for i, r in enumerate(dry) if r.speaking]
    assert speaking
    # the microphone heard the speaker: what the features saw while it played differs
    assert any(not np.allclose(dry[i].acoustic, wet[i].acoustic) for i in speaking)


def test_speech_that_did_not_overlap_the_turn_is_not_yielded_to(tmp_path: Path) -> None:
    # A turn taken between boundaries: the boundary after it sees the user's words that came
    # before the turn in the same unit, the assistant speaking, and nothing said over it.
    policy = TrainedFloorPolicy(hand_model(tmp_path, yield_count=1), text=False)
    policy.reset()
    before = overlapping(turn_overlap_s=0.0)
    assert policy.decide(before) is FloorAction.KEEP_SPEAKING
    assert policy.last_probs[0] >= CONFIDENT_YIELD  # the model alone would have yielded
    assert policy.decide(replace(before, unit_index=4, t=5.0, turn_overlap_s=0.3)) is (
        FloorAction.YIELD
    )
