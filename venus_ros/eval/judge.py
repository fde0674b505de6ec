"""Behaviour labels by content, as Full-Duplex-Bench v1.5 gives them: respond, resume, uncertain,
unknown.

After the user's overlapping speech begins, what did the assistant say next? This module reads
word-timed transcripts of the assistant's PLAYED audio and labels the first post-overlap stretch
(the rubric below is ours, written after reading FDB's ``instruction/behavior.txt``):

* ``respond``: the new speech addresses what the overlap said (answers, clarifies, or acts on
  it, naming what the user asked about or paraphrasing it);
* ``resume``: the speech ignores the overlap and carries on with the answer that was in
  progress (the same answer continues, or the speaker picks it up again);
* ``uncertain``: the speech says the assistant did not hear or understand and asks for a
  repeat or a rephrase, with nothing content-specific;
* ``unknown``: nothing was said after the overlap, or only generic, low-information speech:
  acknowledgements ("Okay.", "Sure."), deferrals not followed by content ("Let me check."),
  apologies that nothing can answer ("No tool can answer this yet."), or speech off the topic
  of both the overlap and the answer.

Which stretch is judged (:func:`judge_window`), given the assistant's voice segments (merged
across 0.5 s, :mod:`venus_ros.eval.timing`) and the overlap ``[s, e]``: when the segment running
at ``s`` stopped by ``e + stop_window`` and a new segment starts by ``e + response_window``, the
new segment's words (FDB's "first new post-overlap segment"), unless the timeline shows no yield
then (the answer simply ended: it was completed, not interrupted); else the running segment's
words from ``s`` on (the answer continued or was completed); else, when nothing was running,
the first segment starting after ``s`` within the response window. No words: ``unknown``.

Two judges implement :class:`Judge`:

* :class:`OfflineJudge` (the default; deterministic, no network): content words (lower case,
  crude stems, our stop list, number words read as numbers) of the judged stretch, with the
  generic phrases removed, are compared with the overlap's text and with the answer in progress
  (the reference: what the assistant would have said without the overlap when known, else its
  own words before ``s``); an optional sentence embedder (the packaged all-MiniLM-L6-v2, injected
  by the caller) adds a semantic comparison for paraphrases.
* :class:`OpenAIJudge` (``--judge openai:MODEL``): the same rubric sent to any
  OpenAI-compatible chat-completions endpoint, with FDB's input layout (word lists with
  timestamps); the API key is read from an environment variable and never logged.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any, Protocol

import numpy as np

from venus_ros.eval.numbers import parse_number

__all__ = [
    "CARRY_ON_MATCHED",
    "CARRY_ON_WORDS",
    "FDB_LABELS",
    "LABELS",
    "Embedder",
    "Judge",
    "JudgeCase",
    "JudgeError",
    "OfflineJudge",
    "OpenAIJudge",
    "TimedWord",
    "Transcriber",
    "Verdict",
    "WhisperTranscriber",
    "carries_on",
    "fdb_transcript",
    "halt_only",
    "judge_window",
    "make_judge",
    "parse_behaviour",
]

#: The four behaviour labels.
LABELS: tuple[str, ...] = ("respond", "resume", "uncertain", "unknown")
#: Full-Duplex-Bench's names for them.
FDB_LABELS: dict[str, str] = {
    "respond": "C_RESPOND",
    "resume": "C_RESUME",
    "uncertain": "C_UNCERTAIN_HANDLING",
    "unknown": "C_UNKNOWN",
}

#: ``embed(texts) -> (len(texts), dim)`` L2-normalised float array.
Embedder = Callable[[Sequence[str]], np.ndarray]


class JudgeError(RuntimeError):
    """A judge could not give a label (bad endpoint reply, missing key...)."""


@dataclass(frozen=True)
class TimedWord:
    """One transcribed word on the session time axis (seconds)."""

    text: str
    start: float
    end: float


@dataclass(frozen=True)
class JudgeCase:
    """What a judge reads about one overlap.

    Attributes:
        overlap_text: what the overlapping speech said (the user, someone else, a TV).
        before: the assistant's words before the overlap's onset.
        after: the judged post-overlap stretch (see :func:`judge_window`).
        reference: the answer in progress as it would have gone on without the overlap (the
            scripted turn, or the transcript of the run on the clean input); empty if unknown.
        category: the scenario category (only passed on to an LLM judge; never used offline).
        words: the whole word-timed output transcript, for an LLM judge (may be empty).
        overlap: ``(start, end)`` of the overlap, seconds.
    """

    overlap_text: str
    before: str
    after: str
    reference: str = ""
    category: str = ""
    words: tuple[TimedWord, ...] = ()
    overlap: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class Verdict:
    """A label and why."""

    label: str
    reason: str
    scores: dict[str, float] = field(default_factory=dict)


class Judge(Protocol):
    """Labels one :class:`JudgeCase`."""

    name: str

    def label(self, case: JudgeCase) -> Verdict:
        """One of :data:`LABELS`, with the reason."""
        ...


# --- which words are judged ------------------------------------------------------------------


def judge_window(
    words: Sequence[TimedWord],
    segments: Sequence[tuple[float, float]],
    overlap: tuple[float, float],
    *,
    stop_window_s: float = 2.0,
    response_window_s: float = 5.0,
    pause_s: float = 0.8,
    flushes: Sequence[float] | None = None,
    flush_slack_s: float = 1.0,
) -> tuple[str, str]:
    """``(before, after)`` texts for one overlap (rule in the module docstring).

    A word belongs to the segment its midpoint falls in; the onset counts as "inside" a segment
    also when it falls in a pause of up to ``pause_s`` after one (the assistant was mid-turn).
    With ``flushes`` (the loop's yield times, from the timeline), a running segment that ended
    with no flush in ``[onset, its end + flush_slack_s]`` finished its answer by itself: its
    words from the onset on are judged (the answer was completed), not the speech after it.
    """
    start, end = overlap

    def mid(w: TimedWord) -> float:
        return 0.5 * (w.start + w.end)

    before = " ".join(w.text for w in words if mid(w) < start)
    running = next((i for i, (a, b) in enumerate(segments) if a <= start + 0.1 and b > start), None)
    if running is None:
        running = next(
            (i for i, (a, b) in enumerate(segments) if b <= start and start - b <= pause_s), None
        )
    window_end = end + response_window_s

    def in_segment(index: int, lo: float) -> str:
        a, b = segments[index]
        return " ".join(w.text for w in words if max(a, lo) - 0.05 <= mid(w) <= b + 0.05)

    if running is not None:
        b = segments[running][1]
        nxt = running + 1
        new = nxt < len(segments) and segments[nxt][0] <= window_end
        finished_alone = flushes is not None and not any(
            start - 1e-9 <= t <= b + flush_slack_s for t in flushes
        )
        if b <= end + stop_window_s and new and not finished_alone:
            return before, in_segment(nxt, segments[nxt][0])
        continued = in_segment(running, start) if b > start else ""
        if continued:
            return before, continued
        if new:
            return before, in_segment(nxt, segments[nxt][0])
        return before, ""
    following = next((i for i, (a, _) in enumerate(segments) if start < a <= window_end), None)
    return before, "" if following is None else in_segment(following, start)


# --- the offline judge -----------------------------------------------------------------------

_STOP = frozenset(
    """a an the and or but so if then than that this these those there here it its it's i i'm
    i'll i've i'd me my mine you you're you'll your yours we we're our us he she him her his they
    them their is are was were be been being am do does did doing have has had having will would
    shall should can could may might must of to in on at by for with from about as into over
    under up down out off just also very really quite too not no yes yeah yep ok okay oh ah uh um
    er hmm mm well now what which who whom whose when where why how all any some each every both
    more most other such only own same again still even because while until after before through
    let let's me get got go going gonna want like know think see say said tell told thing things
    one ones something anything everything nothing way lot bit much many please thanks thank
    sorry right sure alright actually maybe that's there's it's what's""".split()
)
_FILLERS = frozenset("uh um er erm hmm mm mhm uh-huh mm-hmm ah oh".split())
#: Speech that carries no content: acknowledgements, deferrals, inability, politeness.
_GENERIC = tuple(
    re.compile(rf"\b(?:{p})\b")
    for p in (
        r"(?:ok(?:ay)?|sure|alright|all right|right|got it|i see|of course|no problem|"
        r"sounds good|fine|understood|certainly|absolutely|yes|yeah|yep|no|uh-huh|mm-hmm)",
        r"let me (?:check|see|think|look(?: into it| that up)?|find out)(?: (?:on )?(?:that|it|"
        r"for you))?",
        r"(?:one|just a|give me a) (?:moment|second|sec|minute)",
        r"hold on|bear with me|working on it|i'?ll (?:check|look into it|find out)(?: for you)?",
        r"(?:i'?m )?(?:sorry,? )?(?:i )?(?:can(?:'| ?no)t|cannot|could ?n[o']t|am not able to|"
        r"don'?t know how to) (?:help with|answer|do) (?:that|this)(?: (?:yet|right now))?",
        r"no tool can (?:answer|do|help with) (?:this|that)(?: yet)?",
        r"i don'?t (?:know|have (?:that|this|an answer|the answer)(?: information)?)",
        r"i'?m not sure",
        r"thanks?(?: you)?",
        r"(?:good|great|nice) question",
    )
)
_UNCERTAIN = re.compile(
    r"\b(?:pardon|come again|say (?:that|it) again|repeat (?:that|it|yourself|the question|what "
    r"you said)|could you repeat|can you repeat|didn'?t (?:quite )?(?:catch|hear|get|understand) "
    r"(?:that|you|what you said|it)|i missed (?:that|what you said)|what was that|what did you "
    r"say|(?:could|can) you (?:rephrase|say it differently)|not sure what you (?:mean|meant|said)|"
    r"i didn'?t understand|sorry,? what\??$|you cut out|hard to hear)\b"
)
#: An overlap that asks the speaker to stop, pause or be quiet (a "no" said again and again
#: over it, "No, no, no.", is one: it has no other content a reply could take up) ...
_HALT_ASKED = re.compile(
    r"\b(?:stop|wait|pause|hold (?:on|up|it)|hang on|enough|quiet|shh+|hush|not now|"
    r"no(?:[,.!]? no)+|(?:one|a|just a|give me a) (?:second|sec|moment|minute))\b"
)
#: ... and a reply that says the assistant does so (it acts on the overlap).
_HALT_DONE = re.compile(
    r"^(?:(?:ok(?:ay)?|sure|alright|all right|of course|no problem|sorry),? )?(?:i(?:'ll| will"
    r"|'m going to)? (?:stop|wait|pause|be quiet|hold on|hang on)|(?:stopping|pausing)\b|"
    r"take (?:your time|a (?:second|sec|moment|minute)))\b"
)
_RESUME_OPENER = re.compile(
    r"^(?:anyway|anyhow|as i was saying|to continue|where was i|back to|so,? as i said|going on)"
)
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
#: Words at the start of the judged stretch compared with the answer's words not yet said at
#: the overlap's onset (:func:`carries_on`) ...
CARRY_ON_WORDS = 8
#: ... and how many of them must be those words, in their order (some may be misheard, and the
#: stretch may open by repeating words said just before the onset).
CARRY_ON_MATCHED = 4


def _fold(text: str) -> str:
    """``text`` case-folded, typographic apostrophes made plain."""
    return text.casefold().replace("’", "'")


def _stem(word: str) -> str:
    for suffix in ("ing", "edly", "ed", "ies", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            return base + "y" if suffix == "ies" else base
    return word


def _content(text: str) -> list[str]:
    """Content words of ``text``: lower case, stems, numbers as digits, stop words dropped."""
    out = []
    for token in _WORD.findall(_fold(text)):
        number = parse_number(token)
        if number is not None and token not in ("a", "an", "one"):
            out.append(f"#{number:g}")
            continue
        if token in _STOP or token in _FILLERS or len(token) < 2:
            continue
        out.append(_stem(token))
    return out


def halt_only(text: str) -> bool:
    """Whether ``text`` only asks the speaker to stop, pause or be quiet ("Hang on.", "Okay,
    that's enough, thanks."): it holds such a request and no content word besides."""
    said = _fold(text)
    return bool(_HALT_ASKED.search(said)) and not _content(_HALT_ASKED.sub(" ", said))


def _same_stem(a: str, b: str) -> bool:
    """Whether two crude stems (:func:`_content`) are one word's ("tak" of "takes", "take")."""
    return a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))


def carries_on(after: str, before: str, reference: str, overlap_text: str) -> bool:
    """Whether the judged stretch ``after`` opens by saying the answer in progress on from where
    it stood at the overlap's onset, without a word of the overlap's: at least
    :data:`CARRY_ON_MATCHED` of its first :data:`CARRY_ON_WORDS` words are the words of
    ``reference`` that follow the ``before`` part, in their order, and none of those first words
    is a content word of ``overlap_text``. Such a stretch ignored the overlap, whatever words of
    the overlap's the answer itself goes on to say ("... rub in a drop of oil" over "the soup is
    boiling!"); a reply that takes up the overlap's words first ("It takes about ten seconds"
    for "how long does that take?") does not."""
    answer = _WORD.findall(_fold(reference))
    opening = _WORD.findall(_fold(after))[:CARRY_ON_WORDS]
    if len(opening) < CARRY_ON_MATCHED or not answer:
        return False
    said_over = set(_content(overlap_text))
    if any(_same_stem(a, b) for a in _content(" ".join(opening)) for b in said_over):
        return False
    unsaid = answer[len(_WORD.findall(_fold(before))) :]
    matcher = SequenceMatcher(None, opening, unsaid, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) >= CARRY_ON_MATCHED


def _strip_generic(text: str) -> str:
    cleaned = _fold(text)
    for pattern in _GENERIC:
        cleaned = pattern.sub(" ", cleaned)
    return " ".join(cleaned.split())


@dataclass(frozen=True)
class OfflineJudge:
    """The deterministic content judge (rules in the module docstring).

    Decision, on the judged stretch ``after``:

    1. no words, or fillers only: ``unknown``;
    2. a repeat / did-not-hear request and no content word shared with the overlap:
       ``uncertain``; an overlap asking the assistant to stop or wait answered by saying it
       does ("I'll wait.", "Take your time.", :data:`_HALT_DONE`): ``respond`` (it acts on it);
    3. content words left once generic phrases are removed (:data:`_GENERIC`); none: ``unknown``;
       with a reference, a stretch that opens by saying the answer on from where it stood, with
       none of the overlap's words (:func:`carries_on`): ``resume``;
    4. ``user``: share of those words found in the overlap's text; ``ref``: share found in the
       answer in progress (reference, else ``before``); with an embedder, also the cosine of the
       stretch with the overlap text (``sim_user``) and with the reference (``sim_ref``);
    5. a word shared with the overlap and not with the answer, or ``user > ref``, or (with
       embeddings) ``sim_user >= respond_sim`` and ``sim_user > sim_ref + margin``: ``respond``;
    6. ``ref >= resume_share``, a resume opener ("anyway", "as I was saying"), or (with
       embeddings) ``sim_ref >= resume_sim`` and ``sim_ref >= sim_user``: ``resume``;
    7. otherwise ``unknown`` (off-target).

    Attributes:
        embed: optional sentence embedder (L2-normalised rows).
        respond_sim: least cosine with the overlap's text for a semantic ``respond``.
        resume_sim: least cosine with the answer for a semantic ``resume``.
        resume_share: least share of content words found in the answer for ``resume``.
        margin: how much closer to the overlap than to the answer a semantic respond must be.
    """

    embed: Embedder | None = None
    respond_sim: float = 0.40
    resume_sim: float = 0.35
    resume_share: float = 0.4
    margin: float = 0.05
    name: str = "offline"

    def label(self, case: JudgeCase) -> Verdict:
        """Label one case (see the class docstring)."""
        after = case.after.strip()
        tokens = [t for t in _WORD.findall(after.casefold()) if t not in _FILLERS]
        if not tokens:
            return Verdict("unknown", "no speech after the overlap")
        user_words = set(_content(case.overlap_text))
        answer_text = case.reference or case.before
        answer_words = set(_content(answer_text)) | set(_content(case.before))
        all_words = _content(after)
        if _UNCERTAIN.search(after.casefold()) and not (set(all_words) & user_words):
            return Verdict("uncertain", "asks for a repeat and names nothing the user said")
        if halt_only(case.overlap_text) and _HALT_DONE.match(_fold(after)):
            return Verdict("respond", "does what the overlap asked: stops or waits")
        residue = _strip_generic(after)
        words = _content(residue)
        if not words:
            return Verdict("unknown", "only generic speech (acknowledgement, deferral, apology)")
        n = len(words)
        user = sum(w in user_words for w in words) / n
        ref = sum(w in answer_words for w in words) / n
        only_user = [w for w in words if w in user_words and w not in answer_words]
        scores = {"user": round(user, 3), "ref": round(ref, 3)}
        if case.reference and carries_on(after, case.before, case.reference, case.overlap_text):
            return Verdict("resume", "says the answer on from where it was", scores)
        sim_user = sim_ref = None
        if self.embed is not None and answer_text.strip() and case.overlap_text.strip():
            vectors = np.asarray(self.embed([residue, case.overlap_text, answer_text]))
            sim_user = float(vectors[0] @ vectors[1])
            sim_ref = float(vectors[0] @ vectors[2])
            scores.update(sim_user=round(sim_user, 3), sim_ref=round(sim_ref, 3))
        if only_user or user > ref:
            named = ", ".join(only_user)
            return Verdict("respond", f"names what the overlap said ({named})", scores)
        if (
            sim_user is not None
            and sim_ref is not None
            and sim_user >= self.respond_sim
            and sim_user > sim_ref + self.margin
        ):
            return Verdict("respond", "closer in meaning to the overlap than to the answer", scores)
        if ref >= self.resume_share or _RESUME_OPENER.match(after.casefold()):
            return Verdict("resume", "carries on with the answer in progress", scores)
        if sim_ref is not None and sim_ref >= self.resume_sim and sim_ref >= (sim_user or 0.0):
            return Verdict("resume", "close in meaning to the answer in progress", scores)
        return Verdict("unknown", "about neither the overlap nor the answer", scores)


# --- an LLM judge ----------------------------------------------------------------------------

#: Our rubric for an LLM judge (written for this project after reading FDB's behaviour rubric).
RUBRIC = """You grade a voice assistant in a full-duplex conversation. While the assistant was
speaking, someone spoke over it (the "overlap": the user interrupting, a backchannel such as
"uh-huh", the user talking to another person, or background speech such as a TV).
You get JSON with: "category", "overlap" ([start, end] seconds), "overlap_text" (what was said
over the assistant), "assistant_before" (the assistant's words before the overlap began),
"reference" (how its answer would have continued without the overlap; may be empty),
"assistant_words" (every word the assistant said, with timestamps), and "judged" (the first new
stretch of assistant speech after the overlap began, or the continuing speech when nothing new
started).
Label the judged speech with exactly one of:
- C_RESPOND: it meaningfully addresses what the overlap said: answers it, clarifies it, acts on
  it, or clearly reacts to its content.
- C_RESUME: it ignores the overlap and continues or completes the answer that was in progress.
- C_UNCERTAIN_HANDLING: it says it did not hear or understand and asks for a repeat or
  rephrase, without a content-specific answer.
- C_UNKNOWN: there is no speech after the overlap, or the speech is generic or low-information
  ("Okay.", "Sure.", "Let me check." with nothing after it, "No tool can answer this yet."),
  or off-topic.
Answer with one line of JSON and nothing else: {"behaviour": ["C_..."]}"""


def _key_from_env(name: str) -> str:
    key = os.environ.get(name, "")
    if not key:
        raise JudgeError(f"the judge's API key is read from ${name}, which is not set")
    return key


@dataclass
class OpenAIJudge:
    """The rubric above sent to an OpenAI-compatible ``/chat/completions`` endpoint.

    Attributes:
        model: the model name.
        base_url: the API base (``.../v1``).
        api_key_env: the environment variable holding the key (never logged or echoed).
        timeout_s: per request.
        retries: extra attempts after a failed request or an unreadable answer.
    """

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    retries: int = 2
    name: str = ""

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("OpenAIJudge: a model name is needed (--judge openai:MODEL)")
        self.name = self.name or f"openai:{self.model}"

    def label(self, case: JudgeCase) -> Verdict:
        """Ask the endpoint; retries a failed request or an unreadable answer.

        Raises:
            JudgeError: no key, or no valid answer after the retries.
        """
        import httpx

        key = _key_from_env(self.api_key_env)
        payload = {
            "category": case.category,
            "overlap": list(case.overlap),
            "overlap_text": case.overlap_text,
            "assistant_before": case.before,
            "reference": case.reference,
            "assistant_words": [
                {"text": w.text, "timestamp": [round(w.start, 3), round(w.end, 3)]}
                for w in case.words
            ],
            "judged": case.after,
        }
        body = {
            "model": self.model,
            "temperature": 0,
            "seed": 1,
            "messages": [
                {"role": "system", "content": RUBRIC},
                {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
            ],
        }
        url = self.base_url.rstrip("/") + "/chat/completions"
        problem = ""
        for _ in range(self.retries + 1):
            try:
                response = httpx.post(
                    url,
                    json=body,
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=self.timeout_s,
                )
            except httpx.HTTPError as exc:
                problem = f"request failed: {type(exc).__name__}"
                continue
            if response.status_code != 200:
                problem = f"HTTP {response.status_code}"
                continue
            try:
                content = response.json()["choices"][0]["message"]["content"]
                label = parse_behaviour(content)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                problem = f"unreadable answer: {exc}"
                continue
            return Verdict(label, f"{self.name}: {content.strip()[:200]}")
        raise JudgeError(f"judge {self.name} at {self.base_url}: {problem}")


def parse_behaviour(content: str) -> str:
    """Our label from an answer holding ``{"behaviour": ["C_..."]}`` (the first such object).

    Raises:
        ValueError: no such object, or an unknown tag.
    """
    decoder = json.JSONDecoder()
    tags = {v: k for k, v in FDB_LABELS.items()}
    pos = content.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(content, pos)
        except json.JSONDecodeError:
            pos = content.find("{", pos + 1)
            continue
        if isinstance(obj, dict) and "behaviour" in obj:
            value = obj["behaviour"]
            tag = value[0] if isinstance(value, list) and value else value
            if tag not in tags:
                raise ValueError(f"unknown behaviour tag {tag!r}")
            return tags[tag]
        pos = content.find("{", end)
    raise ValueError("no {'behaviour': [...]} object in the answer")


def make_judge(spec: str, embed: Embedder | None = None, **options: Any) -> Judge:
    """A judge from a CLI spec: ``offline`` or ``openai:MODEL``.

    For ``openai:MODEL`` the endpoint is ``$VENUS_EVAL_JUDGE_BASE_URL`` (else
    ``$OPENAI_BASE_URL``, else OpenAI's) and the key ``$OPENAI_API_KEY`` unless ``api_key_env``
    names another variable.

    Raises:
        ValueError: an unknown spec.
    """
    if spec == "offline":
        return OfflineJudge(embed=embed)
    kind, _, model = spec.partition(":")
    if kind == "openai":
        base = os.environ.get("VENUS_EVAL_JUDGE_BASE_URL") or os.environ.get(
            "OPENAI_BASE_URL", "https://api.openai.com/v1"
        )
        return OpenAIJudge(model=model, base_url=options.pop("base_url", base), **options)
    raise ValueError(f"unknown judge {spec!r}: use offline or openai:MODEL")


# --- transcripts -----------------------------------------------------------------------------


class Transcriber(Protocol):
    """Word-timed transcripts of a channel's speech segments."""

    def words(
        self, audio: np.ndarray, rate: int, segments: Sequence[tuple[float, float]]
    ) -> tuple[TimedWord, ...]:
        """The words of ``audio`` inside ``segments``, on the audio's time axis."""
        ...


class WhisperTranscriber:
    """faster-whisper (:class:`venus_ros.audio.asr.WhisperAsr`, word timestamps) over each
    speech segment, padded by ``pad_s``; the model is loaded at the first call.

    Args:
        model: ``"tiny.en"`` (packaged, fast) or ``"base"``.
        threads: CTranslate2 threads.
        pad_s: audio kept either side of a segment.
    """

    def __init__(self, model: str = "tiny.en", threads: int = 1, pad_s: float = 0.15) -> None:
        self.model = model
        self.threads = threads
        self.pad_s = pad_s
        self._asr: Any = None

    def words(
        self, audio: np.ndarray, rate: int, segments: Sequence[tuple[float, float]]
    ) -> tuple[TimedWord, ...]:
        """Transcribe each segment; words carry times on the audio's axis."""
        from venus_ros.eval.timing import to_16k

        if self._asr is None:
            from venus_ros.audio.asr import WhisperAsr

            self._asr = WhisperAsr(self.model, threads=self.threads, word_timestamps=True)
        x = to_16k(np.asarray(audio, dtype=np.float32), int(rate))
        out: list[TimedWord] = []
        for a, b in segments:
            lo = max(0, round((a - self.pad_s) * 16000))
            hi = min(len(x), round((b + self.pad_s) * 16000))
            if hi <= lo:
                continue
            transcript = self._asr.transcribe(x[lo:hi])
            offset = lo / 16000
            out.extend(
                TimedWord(w.text, round(offset + w.start, 3), round(offset + w.end, 3))
                for w in transcript.words
                if w.text
            )
        return tuple(out)


def fdb_transcript(words: Sequence[TimedWord]) -> dict[str, Any]:
    """FDB's transcript layout: ``{"text", "chunks": [{"text", "timestamp": [s, e]}]}``."""
    return {
        "text": " ".join(w.text for w in words),
        "chunks": [{"text": w.text, "timestamp": [w.start, w.end]} for w in words],
    }
