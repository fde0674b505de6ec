"""Train the command probe: does a short segment over the assistant sound like a command to stop?

The recogniser weighs a short reading of speech over the assistant against the commands the
floor policy stops for (:attr:`~venus_ros.frontends.policy.FloorPolicy.expected_over_turn`,
:meth:`~venus_ros.audio.asr.WhisperAsr.transcribe`'s ``expect``). Its decoder can read a
command in a voice it never heard as other words ("Enough." as "It was...", "Hang on." as "Can
you all be?"), and scores the command itself too low to replace the reading. The encoder's
frames still carry how the segment sounded: a logistic probe on their mean, spread and maximum
(:func:`~venus_ros.audio.asr.encoder_features`) tells the commands from short things said to
the assistant that are not commands (back-channels, thanks, reactions), and where it is sure
the recogniser takes the likeliest command.

Data, all from the training side: each command of
:data:`~venus_ros.text.commands.COMMAND_PHRASES` and a few general forms of them ("Stop,
stop.", "Okay, wait.", "Hold on, please."), against the training family of back-channels
(:data:`venus_ros.eval.synth.BACKCHANNELS`) and :data:`OTHER_SHORT` (general short replies and
reactions); spoken by the training espeak-ng voices at 140-190 words a minute and -30 to -16
dBFS, a third clean, a third in room noise, a third in room noise with a trace of the
assistant's own voice (what echo cancellation leaves). Nothing of the evaluation families.

Fit: :func:`~venus_ros.training.router.fit_logistic` on standardised features. The bar is
chosen on scores held out by voice (:data:`FOLDS` folds, each a fifth of the voices): the least
bar at which at most :data:`MAX_FIRE` of held-out non-commands reach it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from venus_ros.audio.asr import PhraseProbe, WhisperAsr
from venus_ros.text.commands import COMMAND_PHRASES, command_of
from venus_ros.training.floor import _auc
from venus_ros.training.router import fit_logistic

__all__ = [
    "FOLDS",
    "MAX_FIRE",
    "OTHER_SHORT",
    "PROBE_NAME",
    "command_forms",
    "train_command_probe",
]

PROBE_NAME = "command_probe.npz"
"""The probe's file name in the cascade's models folder."""
FOLDS = 5
"""Folds of the voice-held-out scores the bar is chosen on."""
MAX_FIRE = 0.005
"""Most held-out non-commands the bar may let through."""
L2 = 1e-2
"""The logistic fit's L2 penalty (on standardised features)."""
REPEATS = 10
"""Renderings of each phrase (voice, rate, level and condition drawn for each)."""
#: General short replies and reactions that are not commands (negatives next to the training
#: back-channels).
OTHER_SHORT: tuple[str, ...] = (
    "go on", "carry on", "thank you", "thanks", "nice", "wow", "really?", "oh no", "no way",
    "great", "I know", "of course", "fine", "all right", "exactly", "true", "perfect", "oh dear",
    "hmm", "ha ha", "good", "lovely", "sounds good", "okay then", "hello", "oops", "yes please",
    "no thanks", "me too", "not bad", "absolutely", "I guess", "mm", "oh wow", "uh", "nope",
    "sure thing", "OK", "definitely", "right, okay", "no",
)  # fmt: skip


def command_forms() -> list[str]:
    """:data:`COMMAND_PHRASES` and general forms of them: a one-word command said twice, after
    "Okay," and before ", please"."""
    forms = list(COMMAND_PHRASES)
    for phrase in COMMAND_PHRASES:
        bare = phrase.rstrip(".")
        forms.append(f"Okay, {bare.lower()}.")
        forms.append(f"{bare}, please.")
        if " " not in bare:
            forms.append(f"{bare}, {bare.lower()}.")
    return forms


def _render(
    rng: np.random.Generator, voices: Any, text: str, echo: Sequence[npt.NDArray[np.float32]]
) -> tuple[npt.NDArray[np.float32], str]:
    """One spoken segment as the recogniser gets it (lead-in, the phrase, tail) and its voice."""
    from venus_ros.eval.synth import ESPEAK_VOICES, INPUT_RATE, at_level, room_noise

    voice = ESPEAK_VOICES[int(rng.integers(len(ESPEAK_VOICES)))]
    speech = at_level(
        voices.render(text, voice, int(rng.integers(140, 191))), rng.uniform(-30, -16)
    )
    lead = np.zeros(round(rng.uniform(0.03, 0.15) * INPUT_RATE), np.float32)
    x = np.concatenate([lead, speech, np.zeros(round(0.15 * INPUT_RATE), np.float32)])
    condition = int(rng.integers(3))
    if condition >= 1:
        x = x + room_noise(rng, x.size, float(rng.uniform(-55, -38)))
    if condition == 2:
        trace = echo[int(rng.integers(len(echo)))]
        start = int(rng.integers(0, max(1, trace.size - x.size)))
        piece = at_level(trace[start : start + x.size], float(rng.uniform(-45, -30)))
        x[: piece.size] += piece
    return x.astype(np.float32), voice


def train_command_probe(
    out: Path, *, seed: int = 0, repeats: int = REPEATS, asr: WhisperAsr | None = None
) -> dict[str, Any]:
    """Render the data, fit the probe, choose its bar, and write ``out/PROBE_NAME`` and
    ``out/command_probe_report.md``; returns the report's figures."""
    from venus_ros.eval.synth import ASSISTANT_TEXTS, BACKCHANNELS, Voices

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    asr = asr if asr is not None else WhisperAsr("tiny.en", word_timestamps=False)
    voices = Voices()
    echo = [voices.render(text, "en-us", 170) for text in ASSISTANT_TEXTS[:6]]
    positives = command_forms()
    negatives = [*BACKCHANNELS, *OTHER_SHORT]
    if any(command_of(p) is None for p in positives) or any(command_of(n) for n in negatives):
        raise ValueError("a positive that is not a command, or a negative that is one")
    rows, labels, groups, texts = [], [], [], []
    for label, bank in ((True, positives), (False, negatives)):
        for text in bank:
            for _ in range(repeats):
                x, voice = _render(rng, voices, text, echo)
                features = asr.segment_features(x)
                if features is None:
                    continue
                rows.append(features)
                labels.append(label)
                groups.append(voice)
                texts.append(text)
    x = np.stack(rows).astype(np.float64)
    y = np.asarray(labels)
    names = sorted(set(groups))
    fold = np.asarray([names.index(g) % FOLDS for g in groups])
    held = np.zeros(len(y))  # (router.held_out_scores, but standardised within each fold)
    for k in range(FOLDS):
        test = fold == k
        mean, scale, coef, intercept = _fit(x[~test], y[~test])
        held[test] = 1.0 / (1.0 + np.exp(-(((x[test] - mean) / scale) @ coef + intercept)))
    grid = np.round(np.arange(0.50, 0.995, 0.01), 2)
    # (none: a probe that never replaces a reading)
    bar = float(next((b for b in grid if np.mean(held[~y] >= b) <= MAX_FIRE), 1.0))
    mean, scale, coef, intercept = _fit(x, y)
    probe = PhraseProbe(
        asr.model_name,
        tuple(COMMAND_PHRASES),
        mean.astype(np.float32),
        scale.astype(np.float32),
        coef.astype(np.float32),
        float(intercept),
        bar,
    )
    out.mkdir(parents=True, exist_ok=True)
    probe.save(out / PROBE_NAME)
    report = {
        "seed": seed,
        "fit_auc": _auc(y, ((x - mean) / scale) @ coef + intercept),
        "samples": len(y),
        "commands": int(y.sum()),
        "voices": len(names),
        "bar": bar,
        "held_out_recall": float(np.mean(held[y] >= bar)),
        "held_out_fire": float(np.mean(held[~y] >= bar)),
        "fired": sorted(
            ((float(held[i]), texts[i], groups[i]) for i in np.flatnonzero(~y & (held >= bar))),
            reverse=True,
        ),
        "missed": sorted(
            {texts[i] for i in np.flatnonzero(y & (held < bar))},
        ),
        "train_s": round(time.perf_counter() - t0, 1),
    }
    (out / "command_probe_report.md").write_text(_report(report))
    return report


def _fit(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    """``(mean, scale, coef, intercept)``: :func:`~venus_ros.training.router.fit_logistic` on
    ``x`` standardised by its own mean and spread."""
    mean, scale = x.mean(0), x.std(0) + 1e-6
    coef, intercept = fit_logistic((x - mean) / scale, y, L2)
    return mean, scale, coef, intercept


def _report(r: dict[str, Any]) -> str:
    lines = [
        "# Command probe (`command_probe.npz`)",
        "",
        "Written by `python -m venus_ros.training.command_probe`; do not edit.",
        "",
        f"- seed {r['seed']}; {r['samples']} spoken segments ({r['commands']} commands) in"
        f" {r['voices']} training voices; {r['train_s']} s",
        f"- bar {r['bar']:.2f}: the least at which at most {100 * MAX_FIRE:.1f}% of non-commands"
        f" held out by voice ({FOLDS} folds) reach it",
        f"- held out at the bar: commands caught {100 * r['held_out_recall']:.1f}%,"
        f" non-commands fired on {100 * r['held_out_fire']:.2f}%",
        "",
        "Non-commands fired on (held out): "
        + (", ".join(f"{t!r} ({v}, {s:.2f})" for s, t, v in r["fired"]) or "none"),
        "",
        "Commands missed at least once (held out): " + ", ".join(repr(t) for t in r["missed"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m venus_ros.training.command_probe [--out DIR] [--seed N]``."""
    from venus_ros.frontends.cascade.floor import MODEL_PATH

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=MODEL_PATH.parent, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="voices, levels and noise")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="renderings per phrase")
    args = parser.parse_args(argv)
    r = train_command_probe(args.out, seed=args.seed, repeats=args.repeats)
    print(
        f"command probe: bar {r['bar']:.2f}, held out: commands {100 * r['held_out_recall']:.1f}%,"
        f" non-commands {100 * r['held_out_fire']:.2f}% ({r['samples']} segments)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
