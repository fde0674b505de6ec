#!/usr/bin/env python3
"""Regenerates the demo session (venus_ros/samples/demo/input.wav + events.json) with espeak-ng.

    .venv/bin/python scripts/make_demo.py

Every line is spoken by espeak-ng, converted to 16 kHz by sox and placed at its start time in
one mono 16-bit WAV. The user speaks with one voice; the TV with another, quieter. The times
are chosen so that the overlaps (back-channel, remark to someone else, TV, interruption) fall
inside the assistant's long local answers (see the README next to the WAV). events.json lists
every line: start and end in seconds, who speaks, what is said and what it is for.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "venus_ros" / "samples" / "demo"
RATE = 16000
LENGTH_S = 57.0
USER = ("en-us+m3", 160, 0.5)  # voice, words per minute, peak level
TV = ("en-gb-x-rp", 175, 0.1)

#: (start s, speaker, kind, text)
LINES = [
    (0.6, "user", "greeting", "Hi there, robot!"),
    (5.8, "user", "local_question", "What can you do?"),
    (10.5, "user", "backchannel", "Yeah, okay."),
    (13.0, "user", "other_directed", "Sam, can you grab the mail?"),
    (16.0, "tv", "background", "And in other news tonight, the city council approved the bridge."),
    (22.0, "user", "robot_action", "Could you go to the kitchen, please?"),
    (35.0, "user", "local_question", "How do you work?"),
    (42.0, "user", "interruption", "Sorry, wait. What time is it?"),
    (52.5, "user", "thanks", "Thank you!"),
]


def speak(text: str, voice: str, wpm: int, tmp: Path) -> np.ndarray:
    """``text`` spoken by espeak-ng, at 16 kHz, float32."""
    raw, wav = tmp / "raw.wav", tmp / "16k.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(wpm), "-w", str(raw), text], check=True)
    subprocess.run(["sox", str(raw), "-r", str(RATE), "-b", "16", str(wav)], check=True)
    audio, rate = sf.read(str(wav), dtype="float32")
    assert rate == RATE
    loud = np.flatnonzero(np.abs(audio) > 1e-3)
    return audio[loud[0] : loud[-1] + 1] if loud.size else audio


def main() -> None:
    track = np.zeros(round(LENGTH_S * RATE), dtype=np.float32)
    events = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for start, speaker, kind, text in LINES:
            voice, wpm, peak = USER if speaker == "user" else TV
            clip = speak(text, voice, wpm, tmp)
            clip = clip * (peak / max(float(np.abs(clip).max()), 1e-6))
            first = round(start * RATE)
            if first + clip.size > track.size:
                raise SystemExit(f"{text!r} ends after {LENGTH_S} s")
            track[first : first + clip.size] += clip
            end = start + clip.size / RATE
            event = {"start": start, "end": round(end, 3), "speaker": speaker, "kind": kind}
            events.append({**event, "text": text})
    OUT.mkdir(parents=True, exist_ok=True)
    sf.write(str(OUT / "input.wav"), np.clip(track, -1, 1), RATE, subtype="PCM_16")
    (OUT / "events.json").write_text(json.dumps(events, indent=1) + "\n", encoding="utf-8")
    for e in events:
        print(f"{e['start']:6.2f}-{e['end']:6.2f} s  {e['speaker']:4}  {e['kind']:15} {e['text']}")
    print(f"wrote {OUT / 'input.wav'} ({LENGTH_S} s, {(OUT / 'input.wav').stat().st_size} bytes)")


if __name__ == "__main__":
    main()
