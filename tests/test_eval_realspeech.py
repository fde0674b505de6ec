"""The real-speech suite: built from recordings that ship inside packages (set up by
./dev.sh setup), never committed; every overlap category gets real voices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from venus_ros.eval.realspeech import build_real_suite, clips, sources
from venus_ros.eval.scenario import OVERLAP_CATEGORIES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def real() -> list:
    found = clips()
    if not found:
        pytest.skip(f"no packaged real speech here ({sources()}); ./dev.sh setup installs it")
    return found


def test_every_overlap_category_gets_real_voices(real: list) -> None:
    categories = {c.category for c in real}
    state = sources()
    if all(not v.startswith("missing") for v in state.values()):
        assert categories == set(OVERLAP_CATEGORIES)
    for clip in real:
        assert clip.text and clip.licence in ("MIT", "CC-BY-SA-3.0")
        assert 0.3 <= clip.audio.size / 16000 <= 8.0
        assert np.abs(clip.audio).max() > 0.01


def test_the_suite_places_each_recording_over_the_assistant(real: list, tmp_path: Path) -> None:
    suite = build_real_suite(tmp_path / "real", n=2, seed=1)
    assert suite.samples
    by_text = {c.text: c for c in real}
    for sample in suite.samples:
        assert sample.category in OVERLAP_CATEGORIES
        assert sample.extra["real_speech"]["licence"] in ("MIT", "CC-BY-SA-3.0")
        (assistant,) = sample.assistant_turns
        assert assistant.start < sample.overlap[0]
        audio, rate = sample.load_audio()
        a, b = (round(t * rate) for t in sample.overlap)
        text = sample.turns[0].text if sample.turns else sample.extra["background"]["text"]
        clip = by_text[text].audio
        placed = audio[a:b]
        assert placed.size == clip.size
        # the recording itself, only scaled: correlation ~1
        assert np.corrcoef(placed, clip)[0, 1] > 0.999
        assert not audio[:a].any() and not audio[b:].any()
    again = build_real_suite(tmp_path / "again", n=2, seed=1)
    assert [s.id for s in again.samples] == [s.id for s in suite.samples]
    noisy = build_real_suite(tmp_path / "noisy", n=1, seed=1, noise=True).samples[0]
    audio, _ = noisy.load_audio()
    clean, _ = noisy.clean_audio()
    assert noisy.clean_path.is_file() and audio[: rate // 2].any()  # noise before the speech
    a, b = (round(t * rate) for t in noisy.overlap)
    assert np.array_equal(audio[:a], clean[:a]) and np.abs(audio[a:b] - clean[a:b]).max() > 0.01


def test_no_real_recording_is_committed() -> None:
    tracked = [p for p in (ROOT / "tests" / "data").rglob("*.wav")]
    for path in tracked:
        assert "asterisk" not in path.as_posix() and "pyannote" not in path.as_posix()


def test_installed_prompts_are_found_with_their_transcripts() -> None:
    """Where the wav package put its prompts, the suite finds them: the set-up also installs
    ``asterisk-core-sounds-en`` (the ``sounds/en`` link and the transcripts), without which the
    interruptions of the real-speech suite were silently left out."""
    prompts = Path("/usr/share/asterisk/sounds/en_US_f_Allison/goodbye.wav")
    if not prompts.is_file():
        pytest.skip("asterisk-core-sounds-en-wav is not installed here (./dev.sh setup does it)")
    state = sources()["asterisk"]
    assert not state.startswith("missing"), state
    assert {c.category for c in clips() if c.licence == "CC-BY-SA-3.0"} >= {"interruption"}
