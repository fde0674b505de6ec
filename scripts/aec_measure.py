#!/usr/bin/env python3
"""Measure the echo canceller's user channel against the clean one, on a synthesized suite.

For every sample of a suite (``venus-ros eval synth``), the assistant's scripted turns are
spoken with the cascade frontend's voice (espeak-ng), placed at their start times, and mixed
into the sample's user channel (``input.wav``) as the microphone would hear them: either the
evaluation's echo path (``--condition eval``: 60 ms, -12 dB, like ``venus-ros eval run --echo``)
or a robot-like room (``--condition room``: a 0.25 s synthetic room, 30 ms, -6 dB, and a softly
saturating speaker). Interruptions stop the playback 0.3 s after the user's turn ends, while
the reference runs 0.25 s past the stop (the frontend pushes a whole unit's audio). The mix goes
through :class:`venus_ros.audio.aec.EchoCanceller` with the played audio as reference, and the
output (aligned for its latency) is compared with the clean user channel:

* ``erle_db``: echo return loss enhancement over echo-only stretches after the first second of
  echo (the user silent);
* ``residue_db_p50``/``p90``: level of 10 ms output frames over those stretches (-120 = silent);
* ``vad_false``: fraction of Silero frames on echo-only stretches with p >= 0.5 (speech heard in
  the residue; the clean channel has none there); ``vad_false_first_s`` the same over the first
  second of echo (the canceller still converging), which the other figures leave out;
* ``vad_miss``: fraction of Silero frames where the clean user channel has p >= 0.5 and echo is
  audible, whose output has p < 0.5 (the user lost under double talk);
* ``vad_mae_dt``: mean |p_out - p_clean| over double-talk frames;
* ``sdr_dt_db``: user-to-distortion ratio over double talk, ``10 log10(sum u^2/sum (out-u)^2)``;
* ``wer``/``wer_clean``: Whisper tiny.en word error rate of the user's turns through the
  canceller and on the clean channel (``--asr``).

Usage::

    python scripts/aec_measure.py --scenarios /tmp/tr --condition eval --asr --json out.json

Needs the ``test`` extra (jiwer), which ``./dev.sh`` installs.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import jiwer
import numpy as np
import soxr

from venus_ros.audio.aec import EchoCanceller
from venus_ros.audio.erle import synthetic_rir
from venus_ros.audio.tts import EspeakTts
from venus_ros.audio.vad import FRAME_SAMPLES as VAD_FRAME, SileroVad
from venus_ros.eval.scenario import load_sample

RATE = 16000
TTS_RATE = 24000
FRAME = 160
STOP_AFTER_S = 0.3
STALE_S = 0.25


def _frame_db(x: np.ndarray, frame: int) -> np.ndarray:
    n = x.size // frame
    power = np.mean(np.square(x[: n * frame].reshape(n, frame), dtype=np.float64), axis=1)
    return np.maximum(10.0 * np.log10(power + 1e-12), -120.0)


def _vad_probs(vad: SileroVad, x: np.ndarray) -> np.ndarray:
    vad.reset()
    vad.process(x)
    return np.array([p for _, p in vad.probabilities], dtype=np.float64)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower().replace("-", " "))


def _edits(ref: list[str], hyp: list[str]) -> int:
    """Word edits (substitutions + deletions + insertions) from ``ref`` to ``hyp`` (jiwer)."""
    if not ref:
        return len(hyp)
    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    return out.substitutions + out.deletions + out.insertions


def _room(seed: int) -> np.ndarray:
    return synthetic_rir(RATE, 0.25, seed=seed, direct_to_reverb_db=6.0)


def build(sample_dir: Path, tts: EspeakTts, condition: str, seed: int) -> dict:
    """Mic, reference pieces and truth signals of one sample."""
    sample = load_sample(sample_dir)
    audio, rate = sample.load_audio()
    user = np.asarray(audio, np.float64)
    if rate != RATE:
        user = soxr.resample(user, rate, RATE)
    meta = json.loads((sample_dir / "metadata.json").read_text())
    total = user.size
    played = np.zeros(total)  # what the speaker played, at 16 kHz on the mic timeline
    refs: list[tuple[int, np.ndarray]] = []  # (position, 24 kHz samples) as pushed
    stop_at = None
    if meta["category"] == "interruption" and meta.get("turns"):
        stop_at = round((meta["turns"][0]["end"] + STOP_AFTER_S) * RATE)
    for turn in meta.get("assistant_turns", []):
        speech, speech_rate = tts.render(turn["text"])
        speech = soxr.resample(np.asarray(speech, np.float32), speech_rate, TTS_RATE)
        loud = np.flatnonzero(np.abs(speech) > 10 ** (-50 / 20))
        speech = speech[loud[0] : loud[-1] + 1] if loud.size else speech[:0]
        start = round(turn["start"] * RATE)
        as16 = soxr.resample(speech, TTS_RATE, RATE).astype(np.float64)
        end16 = min(start + as16.size, total)
        ref_end16 = end16
        if stop_at is not None and start < stop_at < end16:
            end16 = stop_at
            ref_end16 = min(stop_at + round(STALE_S * RATE), ref_end16)
        played[start:end16] += as16[: end16 - start]
        refs.append((start, speech[: round((ref_end16 - start) * TTS_RATE / RATE)]))
    if condition == "eval":
        delay, gain = round(0.06 * RATE), 10 ** (-12 / 20)
        echo = np.zeros(total)
        echo[delay:] = gain * played[: total - delay]
    elif condition == "room":
        delay, gain = round(0.03 * RATE), 10 ** (-6 / 20)
        speaker = np.tanh(2.0 * played) / 2.0  # a small speaker saturating on peaks
        wet = np.convolve(speaker, _room(seed))[: total - delay]
        echo = np.zeros(total)
        echo[delay:] = gain * wet
    else:
        raise SystemExit(f"unknown condition {condition!r}")
    mic = np.clip(user + echo, -1.0, 1.0)
    return {
        "name": sample_dir.name,
        "meta": meta,
        "user": user,
        "echo": echo,
        "mic": mic,
        "refs": refs,
    }


def cancel(aec: EchoCanceller, case: dict, chunk: int = 320) -> tuple[np.ndarray, float]:
    """Run the mic through the canceller in 20 ms chunks, pushing each reference piece when its
    first sample is within a unit (100 ms) of the mic; returns the aligned output and CPU s."""
    aec.reset()
    mic = case["mic"].astype(np.float32)
    pending = list(case["refs"])
    out = []
    cpu = 0.0
    for begin in range(0, mic.size, chunk):
        while pending and pending[0][0] <= begin + 1600:
            position, samples = pending.pop(0)
            t0 = time.process_time()
            block = 480
            for k in range(0, samples.size, block):  # 20 ms blocks, back to back
                aec.push_reference(samples[k : k + block], TTS_RATE, position if k == 0 else None)
            aec.flush_reference()
            cpu += time.process_time() - t0
        t0 = time.process_time()
        out.append(aec.process(mic[begin : begin + chunk]))
        cpu += time.process_time() - t0
    y = np.concatenate(out).astype(np.float64)
    lat = aec.latency_samples
    aligned = np.zeros_like(y)
    aligned[: y.size - lat] = y[lat:]
    return aligned, cpu


def measure(case: dict, out: np.ndarray, vad: SileroVad) -> dict:
    user, echo, mic = case["user"], case["echo"], case["mic"]
    n = user.size // FRAME
    udb, edb, odb = _frame_db(user, FRAME), _frame_db(echo, FRAME), _frame_db(out, FRAME)
    echo_on = edb > -60.0
    first = int(np.argmax(echo_on)) if echo_on.any() else n
    settled = np.arange(n) >= first + 100
    # echo only: user silent in this frame and its neighbours (+-50 ms)
    quiet = np.convolve((udb > -70.0).astype(float), np.ones(11), "same") == 0
    eo = echo_on & quiet & settled
    early = echo_on & quiet & ~settled
    res: dict = {"frames_echo_only": int(eo.sum())}
    if eo.any():
        m = np.repeat(eo, FRAME)
        p_in = float(np.sum(mic[: n * FRAME][m] ** 2))
        p_out = float(np.sum(out[: n * FRAME][m] ** 2))
        res["erle_num"], res["erle_den"] = p_in, p_out
        res["residue_db"] = odb[eo].tolist()
    pc, po, pm = (_vad_probs(vad, x.astype(np.float32)) for x in (user, out, mic))
    k = min(pc.size, po.size, pm.size)
    pc, po, pm = pc[:k], po[:k], pm[:k]
    # VAD frames (32 ms) -> 10 ms frame flags
    idx = (np.arange(k) * VAD_FRAME + VAD_FRAME // 2) // FRAME
    idx = np.minimum(idx, n - 1)
    v_eo = eo[idx]
    v_early = early[idx]
    v_dt = echo_on[idx] & (pc >= 0.5)
    v_dt_any = echo_on[idx] & (udb[idx] > -60.0)
    res.update(
        vad_eo=int(v_eo.sum()),
        vad_false_out=int(np.sum(po[v_eo] >= 0.5)),
        vad_false_mic=int(np.sum(pm[v_eo] >= 0.5)),
        vad_false_clean=int(np.sum(pc[v_eo] >= 0.5)),
        vad_early=int(v_early.sum()),
        vad_false_early=int(np.sum(po[v_early] >= 0.5)),
        vad_dt=int(v_dt.sum()),
        vad_miss_out=int(np.sum(po[v_dt] < 0.5)),
        vad_miss_mic=int(np.sum(pm[v_dt] < 0.5)),
        vad_abs_dt=float(np.sum(np.abs(po - pc)[v_dt_any])),
        vad_abs_n=int(v_dt_any.sum()),
    )
    dt = np.repeat(echo_on & (udb > -60.0), FRAME)
    u = user[: n * FRAME][dt]
    o = out[: n * FRAME][dt]
    res["sdr_num"], res["sdr_den"] = float(np.sum(u**2)), float(np.sum((o - u) ** 2))
    return res


def transcribe_turns(asr, case: dict, out: np.ndarray) -> tuple[list, list, list]:
    refs, hyps, cleans = [], [], []
    for turn in case["meta"].get("turns", []):
        a = max(0, round((turn["start"] - 0.2) * RATE))
        b = min(out.size, round((turn["end"] + 0.4) * RATE))
        refs.append(_words(turn["text"]))
        hyps.append(_words(asr.transcribe(out[a:b].astype(np.float32)).text))
        cleans.append(_words(asr.transcribe(case["user"][a:b].astype(np.float32)).text))
    return refs, hyps, cleans


def summarise(rows: list[dict]) -> dict:
    def ratio(a: str, b: str) -> float:
        den = sum(r.get(b, 0) for r in rows)
        return sum(r.get(a, 0) for r in rows) / den if den else math.nan

    residue = np.concatenate([r.get("residue_db", []) for r in rows] or [np.zeros(0)])
    erle = [
        10 * math.log10(r["erle_num"] / max(r["erle_den"], 1e-20)) for r in rows if "erle_num" in r
    ]
    summary = {
        "samples": len(rows),
        "erle_db_median": float(np.median(erle)) if erle else math.nan,
        "erle_db_min": float(np.min(erle)) if erle else math.nan,
        "residue_db_p50": float(np.percentile(residue, 50)) if residue.size else math.nan,
        "residue_db_p90": float(np.percentile(residue, 90)) if residue.size else math.nan,
        "vad_false_out": ratio("vad_false_out", "vad_eo"),
        "vad_false_mic": ratio("vad_false_mic", "vad_eo"),
        "vad_false_clean": ratio("vad_false_clean", "vad_eo"),
        "vad_false_first_s": ratio("vad_false_early", "vad_early"),
        "vad_miss_out": ratio("vad_miss_out", "vad_dt"),
        "vad_miss_mic": ratio("vad_miss_mic", "vad_dt"),
        "vad_mae_dt": ratio("vad_abs_dt", "vad_abs_n"),
        "sdr_dt_db": 10
        * math.log10(sum(r["sdr_num"] for r in rows) / max(sum(r["sdr_den"] for r in rows), 1e-20)),
        "cpu_rtf": sum(r["cpu_s"] for r in rows) / sum(r["audio_s"] for r in rows),
    }
    words = sum(r.get("wer_words", 0) for r in rows)
    if words:  # (background lines carry no user words)
        summary["wer"] = sum(r["wer_edits"] for r in rows) / words
        summary["wer_clean"] = sum(r["wer_clean_edits"] for r in rows) / words
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=Path, required=True)
    parser.add_argument("--condition", choices=("eval", "room"), default="eval")
    parser.add_argument("--asr", action="store_true", help="also measure Whisper WER")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--aec", default="", help="EchoCanceller keyword args, k=v,k=v")
    args = parser.parse_args(argv)
    kwargs: dict = {}
    for item in filter(None, args.aec.split(",")):
        key, value = item.split("=", 1)
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    dirs = sorted(p.parent for p in args.scenarios.glob("*/metadata.json"))
    if args.limit:
        dirs = dirs[: args.limit]
    tts = EspeakTts()
    aec = EchoCanceller(**kwargs)
    vad = SileroVad(max_probabilities=100000)
    asr = None
    if args.asr:
        from venus_ros.audio.asr import WhisperAsr

        asr = WhisperAsr("tiny.en", threads=1)
    rows = []
    for i, d in enumerate(dirs):
        case = build(d, tts, args.condition, seed=i)
        out, cpu = cancel(aec, case)
        row = measure(case, out, vad)
        row.update(name=case["name"], cpu_s=cpu, audio_s=case["mic"].size / RATE)
        if asr is not None:
            refs, hyps, cleans = transcribe_turns(asr, case, out)
            row["wer_words"] = sum(len(r) for r in refs)
            row["wer_edits"] = sum(_edits(r, h) for r, h in zip(refs, hyps, strict=True))
            row["wer_clean_edits"] = sum(_edits(r, c) for r, c in zip(refs, cleans, strict=True))
            row["hyp"] = [" ".join(h) for h in hyps]
        rows.append(row)
    summary = summarise(rows)
    by_cat: dict = {}
    for row in rows:
        by_cat.setdefault(row["name"].rsplit("_", 1)[0], []).append(row)
    result = {
        "condition": args.condition,
        "aec": kwargs,
        "summary": summary,
        "by_category": {c: summarise(r) for c, r in by_cat.items()},
    }
    print(json.dumps(result, indent=1))
    if args.json:
        for row in rows:
            row.pop("residue_db", None)
        args.json.write_text(json.dumps({**result, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
