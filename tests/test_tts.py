"""Text to speech: cleaning, sentence streaming, block sizes, stop within one block, engines.

Runs the real espeak-ng (Debian package) and, when the optional extra is installed, the real
piper voice; the round trip transcribes the speech with the packaged Whisper tiny.en.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
import soxr

from venus_ros.audio.tts import (
    EspeakTts,
    PiperTts,
    Tts,
    clean_for_speech,
    make_tts,
    piper_available,
    read_wav_stream,
    split_sentences,
)
from venus_ros.core.errors import DeviceError
from venus_ros.core.protocol import escape_tags

needs_piper = pytest.mark.skipif(
    not piper_available(), reason="optional extra missing: pip install 'venus_ros[piper]'"
)

LONG_TEXT = " ".join(
    f"This is sentence number {n} of a long reply that keeps the speaker busy." for n in range(12)
)
FIVE_SENTENCES = (
    "Hello there. The robot is ready. Please open the door. The coffee is hot. Thank you very much."
)


# ------------------------------------------------------------------------------ cleaning


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Sure! <delegate>open the door</delegate>I will ask.<|turn_eos|>", "Sure! I will ask."),
        ("Hi <delegate>open the door", "Hi"),  # unclosed span: never spoken either
        ("<backend>weather: sunny</backend>It is sunny.", "It is sunny."),
        ("left </backend> right </delegate> end", "left right end"),
        ("<|speak|>Yes.<|chunk_eos|> <|listen|>", "Yes."),
        (
            "tool says " + escape_tags("<delegate>open the door</delegate> <|turn_eos|>"),
            "tool says",
        ),
        (escape_tags("<backend>private</backend>") + " fine", "fine"),
        ("# Plan\n\nThis is **bold**, *italic*, __strong__ and ~~gone~~.", "Plan. This is bold,"),
        ("Run `make test` now.", "Run make test now."),
        ("```python\nprint('secret code')\n```\nDone.", "Done."),
        ("- first\n- second\n1. third", "first. second. third."),
        ("See [the docs](https://example.com/docs) now.", "See the docs now."),
        ("Go to https://example.com/a?b=1. Thanks.", "Go to a link. Thanks."),
        ("Or <https://example.com> and www.example.org!", "Or a link and a link!"),
        ("<p>Hello <b>you</b></p><br/>&amp; more", "Hello you & more"),
        ("  many\n\n   spaces\there  ", "many spaces here"),
        ("snake_case and 2 * 3 * 4 stay", "snake_case and 2 * 3 * 4 stay"),
    ],
)
def test_clean_for_speech(text: str, spoken: str) -> None:
    cleaned = clean_for_speech(text)
    assert cleaned.startswith(spoken), cleaned
    for never in ("<", ">", "‹", "|", "**", "`", "http", "delegate", "backend", "door"):
        if never not in spoken:
            assert never not in cleaned


@pytest.mark.parametrize(
    "text", ["", "   ", "<|turn_eos|>", "<delegate>open the door</delegate>", "***", "```x```"]
)
def test_nothing_to_say_cleans_to_empty(text: str) -> None:
    assert clean_for_speech(text) == ""


def test_a_bare_url_is_a_link() -> None:
    assert clean_for_speech("https://example.com/some/page") == "a link"


def test_split_sentences_keeps_abbreviations_and_cuts_long_first_sentence() -> None:
    assert split_sentences("Dr. Smith met J. Doe at 3.5 p.m. today. Wow! Fine") == [
        "Dr. Smith met J. Doe at 3.5 p.m. today.",
        "Wow!",
        "Fine",
    ]
    long_first = "The weather is sunny, with a light breeze from the west, and warm later. Bye."
    pieces = split_sentences(long_first, first_chars=30)
    assert pieces == [
        "The weather is sunny,",
        "with a light breeze from the west, and warm later.",
        "Bye.",
    ]
    words = "word " * 100
    pieces = split_sentences(words, max_chars=50)
    assert max(map(len, pieces)) <= 50 and " ".join(pieces).split() == words.split()


def test_read_wav_stream_accepts_placeholder_sizes_and_averages_channels() -> None:
    stereo = np.array([[1000, 3000], [-2000, -4000]], dtype="<i2")
    fmt = struct.pack("<HHIIHH", 1, 2, 22050, 22050 * 4, 4, 16)
    header = b"RIFF\xff\xff\xff\x7fWAVE" + b"fmt " + struct.pack("<I", 16) + fmt
    junk = b"LIST" + struct.pack("<I", 3) + b"abc\x00"  # odd size: padded
    data = b"data" + struct.pack("<I", 0x7FFFF000) + stereo.tobytes() + b"\x01"  # torn frame
    audio, rate = read_wav_stream(io.BytesIO(header + junk + data))
    assert rate == 22050 and audio.dtype == np.float32
    np.testing.assert_allclose(audio, [2000 / 32768, -3000 / 32768])
    with pytest.raises(ValueError):
        read_wav_stream(io.BytesIO(b"RIFF\x00\x00\x00\x00WAVX"))


# ------------------------------------------------------------------------------ streaming


class CountingRenders:
    """Wraps an engine's render to count pieces rendered so far."""

    def __init__(self, tts: Tts) -> None:
        self.pieces: list[str] = []
        inner = tts.render

        def render(piece: str) -> tuple[np.ndarray, int]:
            self.pieces.append(piece)
            return inner(piece)

        tts.render = render  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def espeak() -> EspeakTts:
    return EspeakTts()


@pytest.mark.parametrize("output_rate", [24000, 16000, 48000, 22050])
def test_blocks_are_float32_at_output_rate_with_exact_sizes(output_rate: int) -> None:
    tts = EspeakTts(output_rate=output_rate, block_ms=20)
    counter = CountingRenders(tts)
    native: list[int] = []
    inner = tts.render

    def render(piece: str) -> tuple[np.ndarray, int]:
        audio, rate = inner(piece)
        native.append(audio.size)
        assert rate == 22050
        return audio, rate

    tts.render = render  # type: ignore[method-assign]
    blocks = list(tts.synthesize(FIVE_SENTENCES))
    block = round(output_rate * 0.02)
    assert tts.block_samples == block
    assert all(b.dtype == np.float32 and b.ndim == 1 for b in blocks)
    assert all(b.size == block for b in blocks[:-1]) and 0 < blocks[-1].size <= block
    total = sum(b.size for b in blocks)
    assert total == pytest.approx(sum(native) * output_rate / 22050, abs=2)
    assert max(float(np.abs(b).max()) for b in blocks) <= 1.0
    assert len(counter.pieces) == 5
    reading = tts.meter.reading()
    assert reading.name == "tts" and reading.calls == 5
    assert reading.audio_s == pytest.approx(total / output_rate, abs=1e-3)
    assert 0 < reading.rtf < 1


def test_first_block_comes_after_only_the_first_sentence(espeak: EspeakTts) -> None:
    tts = EspeakTts()
    counter = CountingRenders(tts)
    stream = tts.synthesize(FIVE_SENTENCES)
    assert counter.pieces == []  # lazy: nothing rendered before it is asked for
    first = next(stream)
    assert first.size == tts.block_samples
    assert counter.pieces == ["Hello there."]
    rest = list(stream)
    assert len(counter.pieces) == 5 and len(rest) > 100


def test_stop_between_blocks_ends_the_stream_at_once(espeak: EspeakTts) -> None:
    stream = espeak.synthesize(LONG_TEXT)
    for _ in range(3):
        next(stream)
    espeak.stop()
    assert list(stream) == []
    # A stop before the first block counts too; a later stream is unaffected.
    early = espeak.synthesize("Never said.")
    espeak.stop()
    assert list(early) == []
    assert len(list(espeak.synthesize("Said."))) > 0


def test_stop_from_another_thread_during_playback_ends_within_one_block() -> None:
    tts = EspeakTts()
    received = 0
    at_stop = -1
    done = threading.Event()
    block_s = tts.block_ms / 1000

    def play() -> None:
        nonlocal received
        for _ in tts.synthesize(LONG_TEXT):
            received += 1
            time.sleep(block_s / 4)  # paced "playback" (4x real time keeps the test short)
        done.set()

    player = threading.Thread(target=play, daemon=True)
    player.start()
    deadline = time.monotonic() + 10
    while received < 25 and time.monotonic() < deadline:
        time.sleep(0.001)
    tts.stop()
    at_stop = received
    assert done.wait(timeout=2), "the stream did not end after stop()"
    player.join(timeout=2)
    assert at_stop >= 25
    assert received - at_stop <= 1, f"{received - at_stop} blocks after stop()"
    full = sum(1 for _ in EspeakTts().synthesize(LONG_TEXT))
    assert received < full / 2


@pytest.mark.parametrize(
    "text", ["", "  \n ", "<delegate>open the door</delegate>", "<|turn_eos|>"]
)
def test_nothing_to_say_yields_no_blocks_and_renders_nothing(text: str) -> None:
    tts = EspeakTts()
    counter = CountingRenders(tts)
    assert list(tts.synthesize(text)) == []
    assert counter.pieces == [] and tts.meter.reading().calls == 0


def test_protocol_tags_and_markup_are_never_rendered() -> None:
    tts = EspeakTts()
    counter = CountingRenders(tts)
    text = (
        "**Sure**, I can do that. <delegate>open the door</delegate>"
        "<backend>door opened</backend>Check https://example.com/x for `details`.<|turn_eos|>"
    )
    blocks = list(tts.synthesize(text))
    assert blocks
    spoken = " ".join(counter.pieces)
    assert spoken == "Sure, I can do that. Check a link for details."
    assert not re.search(r"door|delegate|backend|turn_eos|[<>*`|]|http", spoken)


def test_a_sentence_with_only_a_url_speaks_a_link() -> None:
    tts = EspeakTts()
    counter = CountingRenders(tts)
    blocks = list(tts.synthesize("https://example.com/some/page?x=1"))
    assert counter.pieces == ["a link"]
    assert sum(b.size for b in blocks) > 0.3 * tts.output_rate  # ~0.5 s of speech
    assert max(float(np.abs(b).max()) for b in blocks) > 0.1


# ------------------------------------------------------------------------------ errors / factory


def test_missing_espeak_names_the_apt_package() -> None:
    with pytest.raises(DeviceError, match="apt-get install espeak-ng"):
        EspeakTts(executable="no-such-espeak-ng-binary")


def test_unknown_espeak_voice_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="qqq-none"):  # ("no-…" would be Norwegian)
        EspeakTts(voice="qqq-none")


def test_missing_piper_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "piper", None)  # import piper -> ImportError
    with pytest.raises(DeviceError, match=re.escape("pip install 'venus_ros[piper]'")):
        PiperTts()


def test_make_tts_auto_falls_back_to_espeak(monkeypatch: pytest.MonkeyPatch) -> None:
    import venus_ros.audio.tts as tts_module

    monkeypatch.setattr(tts_module, "piper_available", lambda: False)
    tts = make_tts("auto", output_rate=16000)
    assert isinstance(tts, EspeakTts) and tts.output_rate == 16000
    assert isinstance(make_tts("espeak"), EspeakTts)
    with pytest.raises(ValueError, match="unknown TTS"):
        make_tts("festival")


# ------------------------------------------------------------------------------ piper


@pytest.fixture(scope="module")
def piper() -> PiperTts:
    if not piper_available():
        pytest.skip("optional extra missing: pip install 'venus_ros[piper]'")
    return PiperTts()


@needs_piper
def test_make_tts_auto_prefers_piper(piper: PiperTts) -> None:
    assert isinstance(make_tts("auto", warmup=False), PiperTts)
    assert piper.voice_path.name.endswith(".onnx") and piper.native_rate == 22050


@needs_piper
def test_piper_streams_exact_blocks_first_piece_first_and_stops(piper: PiperTts) -> None:
    counter = CountingRenders(piper)
    try:
        stream = piper.synthesize(FIVE_SENTENCES)
        first = next(stream)
        assert counter.pieces == ["Hello there."]
        assert first.dtype == np.float32 and first.size == piper.block_samples == 480
        blocks = [first, *stream]
        assert all(b.size == 480 for b in blocks[:-1]) and 0 < blocks[-1].size <= 480
        assert len(counter.pieces) == 5
        stream = piper.synthesize(LONG_TEXT)
        next(stream)
        piper.stop()
        assert list(stream) == []
        assert len(counter.pieces) == 6
    finally:
        del piper.render  # back to the class's method


# ------------------------------------------------------------------------------ ASR round trip

ROUND_TRIP = [
    "The robot is ready to help you. Please open the kitchen door. "
    "I will bring your coffee in a minute.",
    "Good morning, how can I help you today? The weather is sunny and warm. "
    "Let me know if you need anything else.",
    "I found your keys on the table. The battery is almost full. "
    "Would you like me to turn on the lights?",
]
# Each reply also carries private text that must not be heard ("plumber" is in no reply).
HIDDEN = "<delegate>call the plumber</delegate>"
# Measured word error rates (tiny.en, int8, greedy): espeak-ng 2/63 = 0.032 ("key", "matter"),
# piper joe 0/63 (5 runs each).  Bounds leave margin for other CPUs and library versions.
MAX_WER = {"espeak": 0.15, "piper": 0.10}


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """Word-level edit distance and reference length."""
    ref, hyp = _words(reference), _words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, heard in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (word != heard))
    return row[len(hyp)], len(ref)


def test_word_errors() -> None:
    assert word_errors("the cat sat", "The cat, sat.") == (0, 3)
    assert word_errors("the cat sat", "a cat sat down") == (2, 3)


@pytest.fixture(scope="module")
def whisper() -> Callable[[np.ndarray], str]:
    """The packaged Whisper tiny.en, as the speech stack uses it."""
    from venus_ros.audio.asr import WhisperAsr

    asr = WhisperAsr("tiny.en")
    return lambda audio_16k: asr.transcribe(audio_16k).text


def _round_trip(tts: Tts, transcribe: Callable[[np.ndarray], str]) -> tuple[float, list[str]]:
    errors = words = 0
    heard_all = []
    for reply in ROUND_TRIP:
        first, rest = reply.split(". ", 1)
        marked = f"**{first}.** {HIDDEN}{rest}<|turn_eos|>"
        audio = np.concatenate(list(tts.synthesize(marked)))
        heard = transcribe(soxr.resample(audio, tts.output_rate, 16000).astype(np.float32))
        assert "plumber" not in heard.lower(), heard
        e, n = word_errors(reply, heard)
        errors, words = errors + e, words + n
        heard_all.append(heard)
    return errors / words, heard_all


@pytest.mark.parametrize("engine", ["espeak", "piper"])
def test_tts_asr_round_trip(engine: str, whisper: Callable[[np.ndarray], str]) -> None:
    if engine == "espeak" and shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng missing: apt-get install espeak-ng")
    if engine == "piper" and not piper_available():
        pytest.skip("optional extra missing: pip install 'venus_ros[piper]'")
    tts = make_tts(engine, output_rate=24000)
    wer, heard = _round_trip(tts, whisper)
    print(f"\n{engine} round trip WER {wer:.3f}: {heard}")
    assert wer <= MAX_WER[engine], f"{engine} WER {wer:.3f}: {heard}"
