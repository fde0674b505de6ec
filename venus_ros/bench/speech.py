"""``venus-ros bench speech``: the embedded speech stack on this machine's CPU.

Prints the real-time factor of echo cancellation, VAD, ASR and TTS; the time from the end of
the user's speech to the final transcript (VAD hangover + recognition, simulated real time:
100 ms mic chunks processed by one thread as they arrive); the time from reply text to the first
audio block; and the resident memory of the whole stack loaded at once. User speech is made by
espeak-ng with several voices and rates.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import psutil

from venus_ros.audio.asr import SegmentTranscriber, Transcript, WhisperAsr
from venus_ros.audio.vad import SileroVad
from venus_ros.core.units import resample

RATE = 16000
SENTENCES = (
    "Could you bring me the red cup from the kitchen?",
    "What time does the museum open tomorrow?",
    "Please stop for a moment.",
    "Turn left at the next door and wait there.",
    "How many people are in the meeting room?",
)
REPLIES = (
    "Sure, I will bring it right away.",
    "Let me check that for you.",
    "Okay, I stopped.",
    "The museum opens at nine in the morning.",
    "I can see three people in the meeting room.",
)
LATENCY_GOAL_MS = 300
FIRST_AUDIO_GOAL_MS = 250
MEMORY_GOAL_MB = 1200


def stream_transcripts(
    vad: SileroVad,
    transcriber: SegmentTranscriber,
    signal: np.ndarray,
    chunk: int = 1600,
    speculate: bool = True,
) -> list[tuple[Transcript, float]]:
    """Feed ``signal`` through VAD and transcriber in mic-sized chunks, as if live.

    Returns each transcript with the time (seconds from the signal's start) at which it would be
    ready if chunks arrived in real time and one thread ran VAD + transcriber on each chunk as
    it came (a chunk waits while the thread is busy).
    """
    vad.reset()
    transcriber.reset()
    out: list[tuple[Transcript, float]] = []
    busy_until = 0.0
    for i in range(0, signal.size, chunk):
        part = signal[i : i + chunk]
        start = time.perf_counter()
        events = vad.process(part)
        got = transcriber.feed(part, events, vad.pending_end if speculate else None)
        busy_until = max(busy_until, (i + part.size) / RATE) + time.perf_counter() - start
        out.extend((t, busy_until) for t in got)
    got = transcriber.feed(np.zeros(0, np.float32), vad.flush()) + transcriber.flush()
    out.extend((t, busy_until) for t in got)
    return out


def _utterances(tts_voices: Sequence[str] = ("en-us", "en-gb+f3")) -> list[tuple[np.ndarray, int]]:
    """(signal with 0.5 s lead and 1.5 s tail, sample where speech ends) per utterance."""
    from venus_ros.audio.tts import EspeakTts

    scenes = []
    for voice in tts_voices:
        tts = EspeakTts(voice=voice, output_rate=RATE)
        for sentence in SENTENCES:
            speech = np.concatenate(list(tts.synthesize(sentence)))
            active = np.nonzero(np.abs(speech) > 0.01 * np.abs(speech).max())[0]
            speech = speech[: active[-1] + 1]
            lead, tail = np.zeros(RATE // 2, np.float32), np.zeros(RATE * 3 // 2, np.float32)
            scenes.append((np.concatenate([lead, speech, tail]), lead.size + speech.size))
    return scenes


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


def _latencies(
    vad: SileroVad, transcriber: SegmentTranscriber, scenes: list[tuple[np.ndarray, int]]
) -> list[float]:
    latencies = []
    for signal, end in scenes:
        finals = [
            ready for t, ready in stream_transcripts(vad, transcriber, signal) if t.kind == "final"
        ]
        if finals:
            latencies.append(finals[0] - end / RATE)
    return latencies


def bench_speech() -> int:
    """Load the whole stack, run it, print the figures; returns a process exit code."""
    from venus_ros.audio.aec import EchoCanceller
    from venus_ros.audio.erle import build_echo_scenario
    from venus_ros.audio.tts import EspeakTts, make_tts, piper_available

    base = _rss_mb()
    started = time.perf_counter()
    aec = EchoCanceller()
    vad = SileroVad()
    asr = WhisperAsr("tiny.en")
    engines = [EspeakTts()] + ([make_tts("piper")] if piper_available() else [])
    loaded = _rss_mb()
    print(f"bench speech: stack loaded in {time.perf_counter() - started:.1f} s")

    scenes = _utterances()
    # Echo cancellation over a double-talk scene built from two of the utterances.
    scene = build_echo_scenario(
        resample(scenes[0][0], RATE, RATE), scenes[6][0], sample_rate=RATE, delay_ms=100
    )
    for i in range(0, scene.mic.size, 320):
        aec.push_reference(scene.reference[i : i + 320], RATE)
        aec.process(scene.mic[i : i + 320])

    transcriber = SegmentTranscriber(asr)
    with_speculation = _latencies(vad, transcriber, scenes)
    short_vad = SileroVad(min_silence_ms=200)
    short = _latencies(short_vad, SegmentTranscriber(asr), scenes)

    first_audio: dict[str, list[float]] = {}
    for engine in engines:
        for reply in REPLIES * 2:
            start = time.perf_counter()
            stream = engine.synthesize(reply)
            next(stream)
            first_audio.setdefault(type(engine).__name__, []).append(time.perf_counter() - start)
            for _ in stream:
                pass
    peak = _rss_mb()

    readings = [(m.name, m.reading().rtf) for m in (aec.meter, vad.meter, asr.meter)]
    readings += [(type(e).__name__, e.meter.reading().rtf) for e in engines]
    print(
        "real-time factors (compute s per audio s): "
        + ", ".join(f"{name} {rtf:.3f}" for name, rtf in readings)
    )
    for label, values in (("300 ms VAD silence", with_speculation), ("200 ms", short)):
        median = np.median(values) * 1000
        print(
            f"end of user speech -> final transcript ({label}): median {median:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms over {len(values)} utterances "
            f"(goal median <= {LATENCY_GOAL_MS} ms: "
            f"{'met' if median <= LATENCY_GOAL_MS else 'NOT met'})"
        )
    for name, values in first_audio.items():
        median = np.median(values) * 1000
        print(
            f"reply text -> first audio ({name}): median {median:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms (goal median <= {FIRST_AUDIO_GOAL_MS} ms: "
            f"{'met' if median <= FIRST_AUDIO_GOAL_MS else 'NOT met'})"
        )
    print(
        f"resident memory: {peak:.0f} MB for the process with the whole stack "
        f"(interpreter and libraries {base:.0f} MB, models +{loaded - base:.0f} MB) "
        f"(goal <= {MEMORY_GOAL_MB} MB: {'met' if peak <= MEMORY_GOAL_MB else 'NOT met'})"
    )
    return 0
