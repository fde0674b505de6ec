"""Disfluencies and self-corrections: the one place that knows what a filler is.

Two strengths of cleaning, for two readers:

- :func:`clean_disfluencies` (the frontend's query for the harness, and the router's input):
  minimal; fillers with their commas, ``like`` / ``you know`` / ``I mean`` set off by commas,
  cut-off word fragments and immediate repetitions go; repairs that change words stay.
- :func:`clean` and :func:`segments` (the planner's reading): fillers and discourse words go,
  stutters collapse, and the request is cut at self-correction markers ("no", "no wait",
  "sorry", "I mean", "actually", "make it", "rather") so that the last segment that gives a
  value wins. :func:`split_requests` cuts chained requests ("..., and then ...").

:func:`is_filler_only` says whether an utterance is nothing but fillers ("uh... hmm").
:func:`opens_with_correction` says whether a clause starts such a self-correction.
:func:`is_cancel_request` says whether a request only takes work back ("stop", "never mind").
:data:`REMINDER_WORDS` finds the words of timers and reminders ("remind me", "alarm").
"""

from __future__ import annotations

import re

#: One filler word, as a regex (um, uh, uhm, er, erm, hmm, mm, mhm, ah).
FILLER_WORDS = r"(?:u+h+m*|u+m+|e+r+m*|h+m+|m+h*m+|a+h+)"

_FILLER = re.compile(
    rf"(?i)(?:\s*[,—–]|\s+-)?\s*(?<![\w'’-]){FILLER_WORDS}(?![\w'’-])(?:\s*[,.—–]|\s+-(?=\s))?"
)
_HESITATION = r"let(?: me|'s) (?:see|think)"
_SOFT_FILLER = re.compile(
    rf"(?i)\s*,\s*(?:like|you know|I mean|{_HESITATION})\s*,|\s*,\s*{_HESITATION}\s*(?=[.?!]*$)"
)
_WORD = r"[\w'’]+"
_REPEAT = re.compile(
    rf"(?i)(?<![\w'’])({_WORD}(?:\s+{_WORD}){{0,2}})(?:\s*[,—–-]\s*|\s+)\1(?![\w'’])"
)
_FRAGMENT = re.compile(r"(?i)(?<![\w'’])(\w{1,4})[—–-]\s*(?=\1)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.!?;:])")
_REPEATED_COMMA = re.compile(r"(?:\s*,){2,}")
_ONLY_FILLERS = re.compile(rf"(?i)\b(?:{FILLER_WORDS}|o+h+)\b")
_DISCOURSE = re.compile(
    rf"(?i)\b(?:{FILLER_WORDS}|you know|like(?=,)|well(?=,)|so(?=,)"
    rf"|{_HESITATION}(?=\s*(?:[,.?!]|$)))\b[,.]?\s*"
)
#: Fillers and discourse words inside spoken arithmetic ("50 minus, so, 12").
ARITHMETIC_NOISE = re.compile(rf"(?i)\b(?:so|well|like|okay|{FILLER_WORDS})\b|[,;]")
_MARKERS = (
    r"no,?\s*wait|no|sorry|i mean|actually|make (?:it|that)|rather|or rather|wait|scratch that|"
    r"strike that|correction|let me rephrase"
)
_CORRECTION = re.compile(rf"(?:,|\s-+|\s—|\.)?\s*\b(?:{_MARKERS})\b[,.]?\s*", re.IGNORECASE)
_OPENS_CORRECTION = re.compile(rf"\s*(?:{_MARKERS})\b", re.IGNORECASE)
_SPLIT = re.compile(
    r"\s*(?:,?\s*\band then\b|,?\s*\bafter that\b|,?\s*\band also\b|;\s*then\b"
    r"|,\s*then\b)\s*",
    re.IGNORECASE,
)


def _filler_gap(match: re.Match[str]) -> str:
    # A filler between dashes marks a repair ("sweep — um — mop"): keep one dash. Otherwise
    # the filler goes with the commas around it ("some, uh, water" -> "some water").
    return " — " if re.search(r"[—–-]", match.group()) else " "


def clean_disfluencies(text: str) -> str:
    """Removes fillers and false starts, minimally; the words of the request are kept.

    Removed: fillers (``um``, ``uh``, ``er``, ``erm``, ``hmm``, ``mm``, ``ah``) with the commas
    around them (a filler between dashes leaves one dash), ``like`` / ``you know`` /
    ``I mean`` / ``let me see`` / ``let me think`` set off by commas (the last two also after
    a comma at the end), a word fragment cut off by a dash before the
    word it starts (``g— good``), and immediate repetitions of one to three words separated by
    spaces, a comma or a dash (``the — the red cup``, ``can you, can you``). Repairs that
    change words (``can you — would you``) are kept: the harness reads the whole request.

    Args:
        text: A transcribed request.

    Returns:
        The cleaned text with spaces normalised; the stripped input if cleaning left nothing
        (a request that is only ``"hmm"`` stays ``"hmm"``).
    """
    cleaned = _FILLER.sub(_filler_gap, text)
    cleaned = _SOFT_FILLER.sub(" ", cleaned)
    cleaned = _FRAGMENT.sub("", cleaned)
    previous = None
    while previous != cleaned:
        previous = cleaned
        cleaned = _REPEAT.sub(r"\1", cleaned)
    cleaned = _REPEATED_COMMA.sub(",", cleaned)
    cleaned = _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(cleaned.split()))
    cleaned = cleaned.strip(" ,;:—–-")
    return cleaned or text.strip()


def is_filler_only(text: str) -> bool:
    """True when ``text`` holds nothing but fillers ("uh", "hmm, oh") and punctuation."""
    return not re.sub(r"[^\w]+", "", _ONLY_FILLERS.sub("", text))


def split_requests(text: str) -> list[str]:
    """Cut a request into the sub-requests it chains ("..., and then ...")."""
    return [part.strip(" ,.") for part in _SPLIT.split(text) if part.strip(" ,.")]


def bare(word: str) -> str:
    """A word without the punctuation around it, lower case."""
    return word.strip(",.!?;:").lower()


def clean(text: str) -> str:
    """Without fillers and discourse words, and with stuttered words / repeated phrases
    collapsed ("could you, could you go" -> "could you go")."""
    text = _DISCOURSE.sub("", text)
    words = text.replace("—", ", ").split()
    out: list[str] = []
    i = 0
    while i < len(words):
        repeated = False
        for n in (4, 3, 2, 1):
            here = [bare(w) for w in words[i : i + n]]
            before = [bare(w) for w in out[-n:]] if len(out) >= n else None
            if before is not None and here == before and all(here):
                i += n
                out[-1] = out[-1].rstrip(",")  # "the, the hall" -> "the hall"
                repeated = True
                break
        if not repeated:
            out.append(words[i])
            i += 1
    return " ".join(out).strip(" ,")


def opens_with_correction(text: str) -> bool:
    """Whether ``text`` begins with a self-correction marker ("no, wait, the garage", "sorry, I
    mean the apple"): the words before it are what the speaker corrects."""
    return _OPENS_CORRECTION.match(text) is not None


def segments(text: str) -> list[str]:
    """The request cut at self-correction markers, oldest first (the last one wins)."""
    return [s.strip(" ,.") for s in _CORRECTION.split(clean(text)) if s.strip(" ,.")]


#: The words of timers and reminders: a clock time means "when to ring" only next to them.
REMINDER_WORDS = re.compile(
    r"(?i)\b(?:timers?|remind(?:ers?)?|alarms?|countdown|wake\s+(?:me|us)(?:\s+up)?)\b"
)

_CANCEL_PHRASE = (
    r"(?:stop|cancel|abort|never\s*mind|forget\s+(?:it|that|about\s+it)|scratch\s+that"
    r"|don'?t\s+bother|leave\s+it)"
)
_CANCEL_REQUEST = re.compile(
    rf"^\W*(?:(?:oh|{FILLER_WORDS}|no|okay|ok|wait|actually|please|hey|sorry|so)\W+)*"
    + _CANCEL_PHRASE
    + r"(?:\W+(?:"
    + _CANCEL_PHRASE
    + r"|it|that|this|everything|all|please|now|then|for\s+now"
    # "cancel the timer" is for the cancel_timer tool: timers are scheduled jobs, not tasks
    + r"|the\s+(?!(?:timers?|alarms?|reminders?)\b)\w+"
    r"|what\s+you'?re\s+doing|doing\s+that))*\W*$",
    re.IGNORECASE,
)


def is_cancel_request(query: str) -> bool:
    """True for a request that only takes work back ("stop", "never mind, forget it").

    A request with other content ("stop at the kitchen door", "cancel my 3 pm meeting",
    "cancel the timer") is not one: it goes to a tool like any other.
    """
    return bool(_CANCEL_REQUEST.match(query.strip()))
