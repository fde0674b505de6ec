"""Training the floor policy's interruption head (``python -m venus_ros.training.interruption``).

The head (a :class:`~venus_ros.frontends.cascade.texthead.TextHead`, written to
``frontends/cascade/models/interruption.npz``) reads the partial transcript of user speech that
began while the assistant was speaking and scores whether it is a genuine interruption ("wait",
"stop, how long does that take?") rather than a backchannel ("mm-hmm, right"), a remark to
someone else, background talk, or the assistant's own voice coming back through the echo
canceller. The floor policy stops the assistant on a confident score between unit boundaries,
within about half a second of the onset (:class:`~venus_ros.frontends.cascade.floor.
TrainedFloorPolicy`); below the threshold the boundary model decides as before.

Deterministic for a seed, from training material only:

1. **Phrases**: the training part of the synthesizer's families
   (:data:`venus_ros.eval.synth.FAMILIES` ``["train"]``), :data:`EXTRA_INTERRUPTIONS` and the
   hand-written corpus ``frontends/cascade/data/interruption_corpus.yaml``
   (:func:`load_corpus`: some 380 cut-ins by family -- stop and wait commands, corrections,
   clarification and new questions, topic changes, complaints, polite and multi-sentence
   ones -- some 160 backchannels, and more remarks and background lines): interruptions and
   questions are positive; backchannels, remarks to other people (vocatives with every
   training name, side comments, phone talk, the addressee trainer's
   :data:`~venus_ros.training.addressee.EXTRA_NOT_ADDRESSED` except those that open like a
   cut-in, :func:`_cut_in_opening`), background talk and TV lines, and the assistant's own
   answers are negative. A phrase that is also an evaluation phrase
   (:func:`venus_ros.training.addressee.evaluation_phrases`) or comes near one
   (:class:`~venus_ros.training.heldout.HeldOut`) is left out, and so are words already
   taken under another kind.
2. **What the recogniser makes of them**: each phrase is spoken by seeded training voices
   (espeak-ng, :data:`~venus_ros.eval.synth.FAMILIES` voices and rates), optionally under
   generated room noise, and Whisper tiny.en reads its first :data:`PREFIXES_S` seconds, as
   the frontend's partial transcripts do while the user talks over the assistant (every
   0.2 s from 0.3 s on), and the whole utterance, as its final transcript (:data:`FINAL_S`;
   the policy reads the finals where there is no partial), each the way the frontend reads
   speech over its turn (:func:`~venus_ros.training.heard.frontend_reader`: greedy partials
   never re-run, weighed against the commands it expects, and finals with its beam and
   command probe). Every word prefix of the written phrase in recogniser form is added as
   well (fitting only).
3. **Features and fit**: the frozen MiniLM embedding next to hashed words and word pairs
   (:func:`~venus_ros.frontends.cascade.texthead.head_features`),
   :func:`~venus_ros.training.router.fit_logistic`, in :data:`FOLDS` folds split by
   phrase for held-out scores.
4. **Thresholds**: one for partials and one for final transcripts, chosen together on the
   held-out scores by simulating each spoken sample: it "fires" when any of its partials
   scores at or above the partial threshold, or its final at or above the final one. Of the
   pairs whose firing rate stays within :data:`MAX_FIRE` for every negative kind, the one that
   catches the most interruption samples is taken, a catch on the final counting
   :data:`FINAL_CREDIT` of one on a partial (:func:`choose_threshold`); the report gives the
   interruption samples caught and when.
5. The head is refitted on everything and written with ``interruption_report.md``.

The recognised transcripts are cached per phrase under the user cache directory
(``$XDG_CACHE_HOME`` or ``~/.cache``, then ``venus_ros/interruption_partials.json``; ``--fresh``
redoes them); they depend on the phrase, the seed and the recogniser only (about 45 minutes on
two cores without them).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from venus_ros.frontends.cascade.floor import INTERRUPTION_PATH, calls_someone_else
from venus_ros.frontends.cascade.texthead import TextHead, head_features
from venus_ros.training.addressee import EXTRA_NOT_ADDRESSED, asr_form, evaluation_phrases
from venus_ros.training.heard import frontend_reader
from venus_ros.training.heldout import HeldOut
from venus_ros.training.router import TextEmbedder, fit_logistic, grouped_folds, held_out_scores

if TYPE_CHECKING:
    from venus_ros.audio.asr import SegmentTranscriber

__all__ = [
    "CORPUS_PATH",
    "CUT_IN_WORDS",
    "EXTRA_INTERRUPTIONS",
    "FINAL_CREDIT",
    "FINAL_S",
    "KINDS",
    "MAX_FIRE",
    "PREFIXES_S",
    "Phrase",
    "Row",
    "choose_threshold",
    "load_corpus",
    "main",
    "recognised_rows",
    "train_interruption",
    "training_phrases",
]

#: Seconds of speech the recognised partials cover (the frontend's overlap partials).
PREFIXES_S: tuple[float, ...] = (0.3, 0.5, 0.7, 0.9, 1.1)
#: ``Row.prefix_s`` of a sample's final transcript, later than any partial: what the recogniser
#: makes of the whole utterance once it has ended (the floor policy reads the finals where
#: there is no partial).
FINAL_S = 10.0
#: Kinds of speech over the assistant; only ``interruption`` is positive.
KINDS: tuple[str, ...] = ("interruption", "backchannel", "other_directed", "background", "echo")
#: Largest share of spoken samples of each negative kind the head may fire on (held out). The
#: floor goals are >= 97 % of backchannels and >= 90 % of remarks to others and background
#: talk talked through; background talk is mostly quieter than the user as well, which the
#: policy checks on its own (``INTERRUPT_QUIET_DB``), and the assistant's own echo only reaches
#: the head where the echo canceller leaves words behind.
MAX_FIRE: Mapping[str, float] = {
    "backchannel": 0.02,
    "other_directed": 0.09,
    "background": 0.12,
    "echo": 0.04,
}
#: Voices per phrase (vocatives: per phrase and name, one voice each); backchannels are few
#: and short, so they get more.
VOICES_PER_PHRASE: Mapping[str, int] = {"backchannel": 8}
DEFAULT_VOICES = 3
#: Voices per phrase of the hand-written corpus (:func:`load_corpus`): it is large, so fewer
#: voices each keep the recognition within reach of two CPU cores.
CORPUS_VOICES: Mapping[str, int] = dict(
    interruption=2, backchannel=3, other_directed=1, background=1
)
REMARK_VOICES = 1
"""Voices per remark of the addressee trainer's (many) :data:`EXTRA_NOT_ADDRESSED`."""
FOLDS = 5
L2 = 1e-4
LEXICAL_DIMS = 2048
LEXICAL_SCALE = 0.5
LEAD_S = 0.1
"""Silence before the speech, as the VAD's pre-roll keeps it."""
TAIL_S = 0.3
"""Silence after the speech in the final transcript's audio, as the VAD's hangover keeps it."""
NOISE_SHARE = 0.5
"""Share of samples mixed with generated room noise."""
NOISE_SNR_DB: tuple[float, float] = (10.0, 25.0)
SAMPLE_RATE = 16000
CORPUS_PATH = INTERRUPTION_PATH.parent.parent / "data" / "interruption_corpus.yaml"
"""The hand-written corpus of cut-ins, backchannels and remarks (:func:`load_corpus`)."""
#: First words (recogniser form) with which people cut in on a speaker (:func:`_cut_in_opening`).
CUT_IN_WORDS: frozenset[str] = frozenset(
    {"no", "nope", "wait", "stop", "sorry", "pardon", "what", "hold on", "hang on", "excuse me"}
)


#: More ways of cutting in on a speaker (written for this trainer; general English, training
#: data only): commands to stop or wait, asking to repeat or slow down, corrections, a question
#: of one's own, and cancelling.
EXTRA_INTERRUPTIONS: tuple[str, ...] = (
    "Hang on a sec.",
    "Wait a minute.",
    "Hold it.",
    "Hold up, hold up.",
    "Stop talking for a moment.",
    "Okay, okay, that's enough.",
    "Enough, thanks.",
    "Shh, quiet.",
    "Be quiet for a second.",
    "Pause.",
    "Stop right there.",
    "Wait, wait, wait.",
    "No, stop, that's wrong.",
    "Just a moment, please.",
    "Sorry, quick question.",
    "Can I just ask something?",
    "Let me ask you something.",
    "Excuse me, sorry.",
    "Pardon? I missed that.",
    "What? Say that again.",
    "I didn't catch that.",
    "Could you say that again, slowly?",
    "Slow down, please.",
    "Go back a bit.",
    "What do you mean by that?",
    "Repeat the last bit.",
    "Sorry, what was the number?",
    "Hmm? What was that?",
    "No, that's not right.",
    "That's wrong, it's the other one.",
    "Not that one, the big one.",
    "No, I said the bedroom.",
    "Actually, I meant tomorrow.",
    "Wrong, try again.",
    "That's not what I said.",
    "Nope, not that.",
    "Cancel that.",
    "Forget it, never mind.",
    "Skip that part.",
    "Never mind, just stop.",
    "Okay, I get it, next.",
    "Fine, fine, move on.",
    "Yes, yes, but how much is it?",
    "Right, but when does it open?",
    "Okay, but where is it?",
    "Sorry, where did you say?",
    "Hold on, how far is that?",
    "Wait, which one?",
    "Stop, how much?",
    "Hey, stop for a second.",
)


@dataclass(frozen=True)
class Phrase:
    """A training phrase: its text, kind and group (variants of a phrase share a group)."""

    text: str
    kind: str
    group: int
    voices: int | None = None
    """Spoken samples of it (None: :data:`VOICES_PER_PHRASE` or :data:`DEFAULT_VOICES`)."""


@dataclass(frozen=True)
class Row:
    """One recognised partial: the transcript of the first ``prefix_s`` of a spoken sample
    (:data:`FINAL_S`: of all of it, its final transcript)."""

    text: str
    kind: str
    group: int
    sample: int
    prefix_s: float


def training_phrases(corpus: Mapping[str, Sequence[str]] | None = None) -> list[Phrase]:
    """The training phrases (see the module docstring), evaluation phrases left out, and
    words already taken by an earlier bank left out of the later one (one phrase, one group:
    a repeat would sit in two folds and flatter the held-out figures).

    Args:
        corpus: Phrases per kind (default: :func:`load_corpus`).
    """
    from venus_ros.eval.synth import FAMILIES

    fam = FAMILIES["train"]
    corpus = load_corpus() if corpus is None else corpus
    remarks = [t for t in EXTRA_NOT_ADDRESSED if not _cut_in_opening(t)]
    mine = {k: corpus.get(k, ()) for k in CORPUS_VOICES}
    banks: list[tuple[str, Sequence[str] | Sequence[Sequence[str]], int | None]] = [
        ("interruption", fam.interruptions, None),
        ("interruption", fam.questions, None),
        ("interruption", EXTRA_INTERRUPTIONS, None),
        ("interruption", mine["interruption"], CORPUS_VOICES["interruption"]),
        ("backchannel", fam.backchannels, None),
        ("backchannel", mine["backchannel"], CORPUS_VOICES["backchannel"]),
        (
            "other_directed",
            [[v.format(name=n) for n in fam.other_names] for v in fam.vocatives],
            None,
        ),
        ("other_directed", (*fam.side_comments, *fam.phone_talk), None),
        ("other_directed", remarks, REMARK_VOICES),
        ("other_directed", mine["other_directed"], CORPUS_VOICES["other_directed"]),
        ("background", (*fam.background_talk, *fam.background_tv), None),
        ("background", mine["background"], CORPUS_VOICES["background"]),
        ("echo", fam.assistant_texts, None),
    ]
    held_out = HeldOut(evaluation_phrases())
    phrases: list[Phrase] = []
    seen: dict[str, str] = {}
    group = 0
    for kind, bank, voices in banks:
        for item in bank:
            variants = [item] if isinstance(item, str) else list(item)
            for text in variants:
                form = asr_form(text)
                if form in held_out or form in seen:
                    continue  # an evaluation phrase, or words already taken (by any kind)
                seen[form] = kind
                phrases.append(Phrase(text, kind, group, voices))
            group += 1
    return phrases


def _cut_in_opening(text: str) -> bool:
    """Whether a remark opens the way a cut-in does ("No, ...", "Sorry, ...", "Hang on, ...").
    Over the assistant its words alone cannot tell it from an interruption, so the addressee
    trainer's remarks that do are not the head's negatives (the name rule and the boundary
    model still judge them)."""
    words = asr_form(text).split()
    return bool(words) and (words[0] in CUT_IN_WORDS or " ".join(words[:2]) in CUT_IN_WORDS)


def load_corpus(path: str | Path | None = None) -> dict[str, tuple[str, ...]]:
    """The hand-written corpus (:data:`CORPUS_PATH`): phrases per kind (``interruption``,
    ``backchannel``, ``other_directed``, ``background``).

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not such a corpus.
    """
    import yaml

    path = Path(path) if path is not None else CORPUS_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError(f"{path}: not an interruption corpus (version 1)")
    sections = {
        "interruption": "interruptions",
        "backchannel": "backchannels",
        "other_directed": "not_addressed",
        "background": "background",
    }
    out: dict[str, tuple[str, ...]] = {}
    for kind, key in sections.items():
        value = data.get(key) or []
        families = value.values() if isinstance(value, dict) else [value]
        texts: list[str] = []
        for family in families:
            if not isinstance(family, list) or not all(isinstance(t, str) for t in family):
                raise ValueError(f"{path}: {key} must hold lists of strings")
            texts += [t.strip() for t in family if t.strip()]
        out[kind] = tuple(texts)
    return out


def _room_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    """Pink noise (1/f power, shaped in the frequency domain), unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(spectrum.size), 1.0))
    out = np.fft.irfft(spectrum, n)
    out -= out.mean()
    return out / max(float(np.sqrt(np.mean(out**2))), 1e-9)


def recognised_rows(
    phrases: Sequence[Phrase],
    *,
    seed: int = 0,
    asr: Any = None,
    cache: dict[str, list[list[list[Any]]]] | None = None,
    progress: bool = False,
) -> list[Row]:
    """Speak every phrase with seeded training voices and transcribe its prefixes.

    Each phrase draws its voices, rates and noise from its own generator (``seed`` and the
    phrase), so adding a phrase changes nothing about the others.

    Args:
        phrases: From :func:`training_phrases`.
        seed: Fixes voices, rates and noise.
        asr: A :class:`~venus_ros.audio.asr.WhisperAsr` (default: as
            :func:`~venus_ros.training.heard.frontend_reader` builds it).
        cache: Recognised partials per phrase, read and filled in (JSON-serialisable).
        progress: Print a line every 50 phrases.
    """
    cache = {} if cache is None else cache
    sizes: dict[int, int] = {}
    for phrase in phrases:
        sizes[phrase.group] = sizes.get(phrase.group, 0) + 1
    speaker = _Speaker(asr)
    rows: list[Row] = []
    sample = 0
    for i, phrase in enumerate(phrases):
        count = phrase.voices or (
            1 if sizes[phrase.group] > 1 else VOICES_PER_PHRASE.get(phrase.kind, DEFAULT_VOICES)
        )
        key = f"{seed}|{phrase.kind}|{count}|{PREFIXES_S}|over-turn|{phrase.text}"
        samples = cache.get(key)
        if samples is None:
            rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
            samples = cache[key] = speaker.partials(phrase.text, count, rng)
        for partials in samples:
            rows += [
                Row(text, phrase.kind, phrase.group, sample, FINAL_S if prefix is None else prefix)
                for prefix, text in partials
            ]
            sample += 1
        if progress and i % 50 == 49:
            print(f"  {i + 1}/{len(phrases)} phrases, {len(rows)} partials", flush=True)
    return rows


class _Speaker:
    """Training voices (espeak-ng) and the recogniser, built on first use."""

    def __init__(self, asr: Any = None) -> None:
        self._asr = asr
        self._reader: SegmentTranscriber | None = None
        self._engines: dict[str, Any] = {}

    def partials(self, text: str, count: int, rng: np.random.Generator) -> list[list[list[Any]]]:
        """``count`` spoken samples of ``text``: each a list of distinct ``[prefix_s, text]``
        partials and, last, ``[None, text]``: the transcript of the whole utterance (with
        :data:`TAIL_S` of silence after it, as the VAD's hangover keeps)."""
        import soxr

        from venus_ros.audio.tts import EspeakTts
        from venus_ros.eval.synth import FAMILIES, RATE_WPM, trim

        if self._reader is None:
            self._reader = frontend_reader(over_turn=True, asr=self._asr)
        voices = FAMILIES["train"].espeak_voices
        lead = np.zeros(round(LEAD_S * SAMPLE_RATE), np.float32)
        tail = round(TAIL_S * SAMPLE_RATE)
        out: list[list[list[Any]]] = []
        for voice in rng.choice(voices, size=min(count, len(voices)), replace=False):
            engine = self._engines.get(voice)
            if engine is None:
                engine = EspeakTts(voice=str(voice), output_rate=SAMPLE_RATE)
                self._engines[voice] = engine
            engine.rate_wpm = int(rng.integers(RATE_WPM[0], RATE_WPM[1] + 1))
            audio, rate = engine.render(text.replace("-", " "))
            audio = np.asarray(audio, np.float32)
            if rate != SAMPLE_RATE:
                audio = soxr.resample(audio, rate, SAMPLE_RATE).astype(np.float32)
            audio = np.concatenate([lead, trim(audio), np.zeros(tail, np.float32)])
            if rng.random() < NOISE_SHARE:
                snr = rng.uniform(*NOISE_SNR_DB)
                speech_rms = float(np.sqrt(np.mean(audio**2))) or 1e-4
                noise = _room_noise(rng, audio.size) * speech_rms * 10 ** (-snr / 20)
                audio = (audio + noise).astype(np.float32)
            partials: list[list[Any]] = []
            seen: str | None = None
            speech = audio.size - tail
            for prefix in PREFIXES_S:
                end = round((prefix + LEAD_S) * SAMPLE_RATE)
                if end > speech + SAMPLE_RATE // 10:
                    break
                heard = " ".join(self._reader.read(audio[:end], "partial").text.split())
                if heard != seen:
                    partials.append([prefix, heard])
                    seen = heard
            partials.append([None, " ".join(self._reader.read(audio, "final").text.split())])
            out.append(partials)
        return out


def _word_prefix_rows(phrases: Sequence[Phrase]) -> list[Row]:
    """Every word prefix of every phrase in recogniser form (sample -1: fitting only)."""
    rows: list[Row] = []
    for phrase in phrases:
        words = asr_form(phrase.text).split()
        for k in range(1, min(len(words), 6) + 1):
            rows.append(Row(" ".join(words[:k]), phrase.kind, phrase.group, -1, 0.0))
    return rows


def _threshold_of(row: Row, threshold: float, final_threshold: float) -> float:
    """The threshold ``row`` is read at: ``final_threshold`` for a final transcript."""
    return final_threshold if row.prefix_s == FINAL_S else threshold


def _sample_fires(
    scores: np.ndarray, rows: Sequence[Row], threshold: float, final_threshold: float | None = None
) -> dict[int, float]:
    """First prefix (seconds) at which each spoken sample fires (:data:`FINAL_S` for its
    final transcript, read at ``final_threshold``, default ``threshold``); inf where it never
    does.

    A transcript that calls someone else by name never fires: the policy never yields to it
    (:func:`~venus_ros.frontends.cascade.floor.calls_someone_else`)."""
    final_threshold = threshold if final_threshold is None else final_threshold
    first: dict[int, float] = {}
    for s, row in zip(scores, rows, strict=True):
        if row.sample < 0 or not row.text:
            continue
        fires = s >= _threshold_of(row, threshold, final_threshold) and not _elsewhere(row.text)
        hit = row.prefix_s if fires else float("inf")
        first[row.sample] = min(first.get(row.sample, float("inf")), hit)
    return first


@functools.lru_cache(maxsize=65536)
def _elsewhere(text: str) -> bool:
    return calls_someone_else(text)


#: How much a stop on the final transcript (after the user's speech ended) counts against one
#: on a partial (while they still speak) when the two thresholds are chosen.
FINAL_CREDIT = 0.5


def choose_threshold(
    scores: np.ndarray, rows: Sequence[Row], max_fire: Mapping[str, float] = MAX_FIRE
) -> tuple[float, float, dict[str, float]]:
    """The thresholds for partial and for final transcripts whose held-out firing rate per
    negative kind is within ``max_fire`` and that catch the most interruption samples, a
    catch on the final counting :data:`FINAL_CREDIT` of one on a partial (ties: the smallest
    partial threshold, then the largest final one); with the firing rate of every kind.
    A final threshold of ``inf`` means finals never fire on their own."""
    kind_of = {r.sample: r.kind for r in rows if r.sample >= 0}
    samples = sorted(kind_of)
    index = {s: i for i, s in enumerate(samples)}
    # Per sample, its highest partial and final score (a transcript calling someone else by
    # name never fires, so it does not count); a sample fires when either reaches its threshold.
    partial = np.full(len(samples), -np.inf)
    final = np.full(len(samples), -np.inf)
    partial_scores: list[float] = []
    for score, row in zip(scores, rows, strict=True):
        if row.sample < 0 or not row.text or _elsewhere(row.text):
            continue
        k = index[row.sample]
        if row.prefix_s == FINAL_S:
            final[k] = max(final[k], float(score))
        else:
            partial[k] = max(partial[k], float(score))
            partial_scores.append(float(score))
    kinds = [k for k in KINDS if k in kind_of.values()]
    onehot = np.array([[kind_of[s] == k for k in kinds] for s in samples], dtype=np.float64)
    counts = onehot.sum(axis=0)
    negative = np.array([k != "interruption" for k in kinds])
    limits = np.array([max_fire.get(k, 1.0) for k in kinds]) + 1e-12

    def grid(values: np.ndarray) -> np.ndarray:
        finite = np.unique(np.round(values[np.isfinite(values)], 4))
        return np.concatenate([finite[finite >= 0.5], [np.inf]])

    finals = grid(final)[::-1]  # largest first: ties keep the larger final threshold
    final_fires = final[None, :] >= finals[:, None]
    best = (-1.0, 1.0, np.inf)  # (value, partial threshold, final threshold): none passes
    if "interruption" in kinds:
        positive = kinds.index("interruption")
        for threshold in grid(np.asarray(partial_scores)):
            partial_fires = partial >= threshold
            rates = (partial_fires[None, :] | final_fires) @ onehot / counts
            ok = np.all(rates[:, negative] <= limits[negative], axis=1)
            caught_partial = float(partial_fires @ onehot[:, positive] / counts[positive])
            value = caught_partial + FINAL_CREDIT * (rates[:, positive] - caught_partial)
            k = int(np.argmax(np.where(ok, value, -1.0)))
            if ok[k] and value[k] > best[0] + 1e-12:
                best = (float(value[k]), float(threshold), float(finals[k]))
    _, threshold, final_threshold = best
    fired = (partial >= threshold) | (final >= final_threshold)
    rates = fired @ onehot / counts
    return threshold, final_threshold, {k: float(r) for k, r in zip(kinds, rates, strict=True)}


def train_interruption(
    out: str | Path | None = None,
    *,
    seed: int = 0,
    embedder: TextEmbedder | None = None,
    asr: Any = None,
    phrases: Sequence[Phrase] | None = None,
    cache: str | Path | None = None,
    fresh: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Train the head, write ``interruption.npz`` and its report, return the report.

    Args:
        out: Output folder (default: the package's ``frontends/cascade/models``).
        seed: Fixes voices, noise and folds.
        embedder: Sentence embedder (default: fp32 all-MiniLM-L6-v2).
        asr: Recogniser for the partials (default: Whisper tiny.en).
        phrases: The phrases (default: :func:`training_phrases`).
        cache: The row cache file (default: under the user cache directory).
        fresh: Recognise again even where the row cache exists.
        progress: Print progress lines.
    """
    started = time.perf_counter()
    out_dir = Path(out) if out is not None else INTERRUPTION_PATH.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    phrases = list(training_phrases() if phrases is None else phrases)
    if cache is None:
        root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache = Path(root) / "venus_ros" / "interruption_partials.json"
    cache = Path(cache)
    known: dict[str, list[list[list[Any]]]] = {}
    if cache.is_file() and not fresh:
        try:
            known = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
    before = len(known)
    rows = recognised_rows(phrases, seed=seed, asr=asr, cache=known, progress=progress)
    if len(known) != before:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(known), encoding="utf-8")
    recognise_s = time.perf_counter() - started
    spoken = [r for r in rows if r.text]
    fit_rows = spoken + _word_prefix_rows(phrases)
    if embedder is None:
        from venus_ros.frontends.cascade.embed import Embedder

        embedder = Embedder()
    texts = [r.text for r in fit_rows]
    x = head_features(embedder.embed(texts), texts, LEXICAL_DIMS, LEXICAL_SCALE)
    y = np.array([r.kind == "interruption" for r in fit_rows])
    groups = np.array([r.group for r in fit_rows])
    held_out = held_out_scores(x, y, grouped_folds(y, groups, seed, FOLDS), L2)
    threshold, final_threshold, rates = choose_threshold(held_out, fit_rows)
    first = _sample_fires(held_out, fit_rows, threshold, final_threshold)
    caught = [
        first.get(s, float("inf")) for s in {r.sample for r in rows if r.kind == "interruption"}
    ]
    coef, intercept = fit_logistic(x, y, L2)
    head = TextHead(
        coef,
        intercept,
        threshold,
        embedder.name,
        LEXICAL_DIMS,
        LEXICAL_SCALE,
        final_threshold=final_threshold,
    )
    head.save(out_dir / INTERRUPTION_PATH.name)
    errors = sorted(
        (
            (float(held_out[i]), r.text, r.kind)
            for i, r in enumerate(fit_rows)
            if r.sample >= 0
            and (held_out[i] >= _threshold_of(r, threshold, final_threshold))
            != (r.kind == "interruption")
        ),
        key=lambda e: -e[0],
    )
    finite = [c for c in caught if np.isfinite(c)]
    report = {
        "seed": seed,
        "embedder": embedder.name,
        "phrases": len(phrases),
        "samples": len({r.sample for r in rows}),
        "partials": len(spoken),
        "fit_rows": len(fit_rows),
        "threshold": threshold,
        "final_threshold": final_threshold,
        "fire_rates": rates,
        "caught_by_s": {
            f"{p:.1f}": sum(c <= p for c in finite) / max(len(caught), 1)
            for p in (*PREFIXES_S, FINAL_S)
        },
        "errors": errors,
        "recognise_s": round(recognise_s, 1),
        "train_s": round(time.perf_counter() - started, 1),
    }
    (out_dir / "interruption_report.md").write_text(_markdown(report), encoding="utf-8")
    return report


def _markdown(r: Mapping[str, Any]) -> str:
    lines = [
        "# Interruption head",
        "",
        "Trained by `python -m venus_ros.training.interruption` (venus_ros/training/"
        "interruption.py) on training material only (the synthesizer's training part, the"
        " addressee trainer's extra remarks). Held-out figures: 5 folds split by phrase.",
        "",
        f"- embedder: `{r['embedder']}`; seed {r['seed']}; recognition {r['recognise_s']} s,"
        f" total {r['train_s']} s",
        f"- {r['phrases']} phrases, {r['samples']} spoken samples, {r['partials']} distinct"
        f" partial transcripts ({', '.join(f'{p:.1f}' for p in PREFIXES_S)} s), "
        f"{r['fit_rows']} rows with the written word prefixes",
        f"- thresholds {r['threshold']:.4f} on partials, {r['final_threshold']:.4f} on final"
        " transcripts (inf: finals never stop the assistant), chosen for the most held-out"
        f" interruptions caught (a catch on the final counting {FINAL_CREDIT:g}) with held-out"
        " firing within " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in MAX_FIRE.items()),
        "",
        "| kind | held-out samples fired on |",
        "|---|---|",
    ]
    lines += [f"| {k} | {100 * v:.1f}% |" for k, v in r["fire_rates"].items()]
    lines += ["", "Interruption samples caught by the partial of (seconds of speech):", ""]
    lines += [
        f"- {'final' if float(p) == FINAL_S else p + ' s'}: {100 * v:.1f}%"
        for p, v in r["caught_by_s"].items()
    ]
    lines += ["", f"Held-out errors ({len(r['errors'])}; score, kind, partial), first 40:", ""]
    lines += [f"- {s:.3f} {k} {t!r}" for s, t, k in r["errors"][:40]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m venus_ros.training.interruption [--out DIR] [--seed N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="voices, noise and folds")
    parser.add_argument("--fresh", action="store_true", help="recognise the partials again")
    args = parser.parse_args(argv)
    report = train_interruption(args.out, seed=args.seed, fresh=args.fresh, progress=True)
    rates = ", ".join(f"{k} {100 * v:.1f}%" for k, v in report["fire_rates"].items())
    print(
        f"interruption head: thresholds {report['threshold']:.4f} (partials),"
        f" {report['final_threshold']:.4f} (finals); held-out fired on: {rates}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
