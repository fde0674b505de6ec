"""Training phrases as the frontend's recogniser reads them (``venus_ros.training.heard``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from venus_ros.audio.asr import PhraseProbe, Transcript, WhisperAsr
from venus_ros.frontends.cascade.floor import TrainedFloorPolicy
from venus_ros.frontends.policy import FINAL_BEAM_SIZE
from venus_ros.training.heard import form_key, frontend_reader, recognised_forms


def test_the_readers_are_the_frontends_idle_and_over_its_turn() -> None:
    """Both readers use the frontend's recogniser (its final beam, the committed command
    probe); only the one over the assistant's turn weighs readings against what the floor
    policy expects."""
    assert TrainedFloorPolicy.expected_probe is not None
    committed = PhraseProbe.load(TrainedFloorPolicy.expected_probe).phrases
    idle, over_turn = frontend_reader(), frontend_reader(over_turn=True)
    assert idle.expect == ()
    assert over_turn.expect == TrainedFloorPolicy.expected_over_turn and over_turn.expect
    for reader in (idle, over_turn):
        assert reader.asr.beam_size == FINAL_BEAM_SIZE > 1
        assert [p.phrases for p in reader.asr._probes] == [committed]


def test_spoken_phrases_are_read_as_the_idle_frontend_reads_its_finals() -> None:
    """Every spoken phrase is read as a final of the idle frontend (re-run where it must be,
    no expected phrases, the beam for long speech, greedily for a word); the cache keys say
    so, forms read another way are recognised again (from the same spoken samples), and cached
    ones are not. The router's committed forms were read greedily, by the same recogniser."""
    asr = WhisperAsr(beam_size=FINAL_BEAM_SIZE, word_timestamps=False)
    calls: list[dict[str, Any]] = []
    transcribe = asr.transcribe
    heard: list[np.ndarray] = []

    def spy(audio: np.ndarray, **kwargs: Any) -> Transcript:
        calls.append(kwargs)
        heard.append(audio)
        return transcribe(audio, **kwargs)

    asr.transcribe = spy  # type: ignore[method-assign]
    long_text = "Could you close the kitchen window before it starts to rain, please?"
    phrases = [(long_text, 2), ("Stop.", 1)]
    cache = {form_key(long_text, 2, seed=4, reading="greedy"): ["read greedily"]}
    forms = recognised_forms(phrases, seed=4, asr=asr, cache=cache)
    assert [len(forms[long_text]), len(forms["Stop."])] == [2, 1]
    assert "read greedily" not in forms[long_text]
    assert all(f and "window" in f.lower() for f in forms[long_text]), forms
    assert form_key(long_text, 2, seed=4) in cache and form_key("Stop.", 1, seed=4) in cache
    assert len(calls) == 3
    for call in calls:
        assert (call["retry"], call["expect"], call["probe"]) == (True, (), True)
    assert [c["beam_size"] for c in calls] == [None, None, 1]
    again = recognised_forms(phrases, seed=4, asr=asr, cache=cache)
    assert again == forms and len(calls) == 3  # from the cache: nothing spoken again
    assert cache.pop(form_key(long_text, 2, seed=4, reading="greedy")) == ["read greedily"]
    greedy = recognised_forms([(long_text, 2)], seed=4, reading="greedy", asr=asr, cache=cache)
    assert len(calls) == 5 and calls[-1] == calls[-2] == {"beam_size": 1}  # the defaults
    assert greedy[long_text] == cache[form_key(long_text, 2, seed=4, reading="greedy")]
    # the same spoken samples, read another way
    assert all(np.array_equal(a, b) for a, b in zip(heard[:2], heard[3:], strict=True))
    with pytest.raises(ValueError, match="reading"):
        recognised_forms(phrases, reading="beam", asr=asr)
