"""Spoken numbers and durations: "twenty five minutes", "a minute and a half", "the 2nd".

Number words become digits through `text2num <https://github.com/allo-media/text2num>`_
(``text_to_num.alpha2digit``, MIT, maintained, a compiled core): compound numbers ("one
hundred and five", "twenty-five", "two thousand twenty six"), decimals ("three point five")
and ordinals ("twenty-first" -> ``21st``). On top of that, one small grammar reads quantities
and durations, with the fractions people say: "half an hour", "a minute and a half", "an hour
and a quarter", "quarter of an hour", "three quarters of an hour", "one and a half hours",
"an hour and 20 minutes". "second" stays the unit ("a ten second timer"), except after
"the" ("the second timer" is the ordinal). Clock times after "at" ("at 5 pm", "at half past
six", "at quarter to eight", "at noon") are read by :func:`time_of_day`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from text_to_num import alpha2digit

from venus_ros.text.speech import and_list

#: Unit words -> seconds.
UNITS: dict[str, int] = {
    "second": 1, "seconds": 1, "sec": 1, "secs": 1,
    "minute": 60, "minutes": 60, "min": 60, "mins": 60,
    "hour": 3600, "hours": 3600, "hr": 3600, "hrs": 3600,
}  # fmt: skip
_FRACTIONS = {"half": 0.5, "quarter": 0.25, "quarters": 0.25}
_ARTICLES = ("a", "an")
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SECOND_WORD = re.compile(r"(?i)(?<!\bthe )\bseconds?\b")
_MASK = "secondsunitmask"
_MASKED = re.compile(_MASK + r"(s?)")


def to_digits(text: str) -> str:
    """Number words as digits: "twenty five minutes" -> "25 minutes", "one" -> "1",
    "twenty-first" -> "21st"; "a" and "an" stay words, and so does the unit "second"."""
    masked = _SECOND_WORD.sub(lambda m: _MASK + ("s" if m.group()[-1] in "sS" else ""), text)
    converted = alpha2digit(masked, "en", threshold=0)
    return _MASKED.sub(lambda m: "second" + m.group(1), converted)


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` with numbers as digits, punctuation dropped (a decimal
    point and a leading minus kept)."""
    out = []
    for raw in to_digits(text).lower().replace(",", " ").split():
        word = raw.strip(".!?;:\"'()")
        if word:
            out.append(word)
    return out


@dataclass(frozen=True)
class Quantity:
    """A number found in text, with its unit word when one follows.

    Attributes:
        value: the number (a duration's count in its unit: 1.5 for "an hour and a half").
        unit: the canonical unit ("second", "minute", "hour") or None.
        ordinal: it was an ordinal ("2nd").
        start: index of its first word in :func:`words`.
        end: index after its last word.
    """

    value: float
    unit: str | None = None
    ordinal: bool = False
    start: int = 0
    end: int = 0

    @property
    def seconds(self) -> float | None:
        """The duration in seconds, or None without a unit."""
        return None if self.unit is None else self.value * UNITS[self.unit]


def _unit(word: str) -> str | None:
    scale = UNITS.get(word)
    if scale is None:
        return None
    return {1: "second", 60: "minute", 3600: "hour"}[scale]


def _number(word: str) -> tuple[float, bool] | None:
    if _NUMBER.fullmatch(word):
        return float(word), False
    match = _ORDINAL.fullmatch(word)
    if match:
        return float(match.group(1)), True
    return None


def _and_fraction(ws: Sequence[str], i: int) -> tuple[float, int]:
    """ "and a half" / "and a quarter" at ``i``: the fraction and the words used."""
    if ws[i : i + 1] == ["and"] and len(ws) > i + 2 and ws[i + 1] in _ARTICLES:
        fraction = _FRACTIONS.get(ws[i + 2])
        if fraction is not None and ws[i + 2] != "quarters":
            return fraction, 3
    return 0.0, 0


def quantities(text: str) -> list[Quantity]:
    """Every number in ``text``, with its unit when one follows (fractions folded in)."""
    ws = words(text)
    found: list[Quantity] = []
    i = 0
    while i < len(ws):
        start = i
        value: float | None = None
        ordinal = False
        word = ws[i]
        # "half an hour", "a quarter of an hour", "3 quarters of an hour", "quarter hour"
        j = i + 1 if word in _ARTICLES else i
        count = 1.0
        parsed = _number(ws[j]) if j < len(ws) else None
        if parsed is not None and j + 1 < len(ws) and ws[j + 1] == "quarters":
            count, j = parsed[0], j + 1
        if j < len(ws) and ws[j] in _FRACTIONS:
            k = j + 1
            if ws[k : k + 1] == ["of"]:
                k += 1
            if k < len(ws) and ws[k] in _ARTICLES:
                k += 1
            unit = _unit(ws[k]) if k < len(ws) else None
            if unit is not None:
                found.append(Quantity(count * _FRACTIONS[ws[j]], unit, False, start, k + 1))
                i = k + 1
                continue
            if ws[j] != "quarters" and (j > i or count == 1.0):  # "a half", "half" alone
                found.append(Quantity(count * _FRACTIONS[ws[j]], None, False, start, j + 1))
                i = j + 1
                continue
        parsed = _number(word)
        if parsed is not None:
            value, ordinal = parsed
            i += 1
        elif word in _ARTICLES and i + 1 < len(ws) and _unit(ws[i + 1]) is not None:
            value = 1.0  # "a minute"
            i += 1
        else:
            i += 1
            continue
        fraction, used = _and_fraction(ws, i)  # "1 and a half hours", "1 and a half"
        unit = _unit(ws[i + used]) if i + used < len(ws) and not ordinal else None
        if unit is not None:
            value += fraction
            i += used + 1
            fraction, used = _and_fraction(ws, i)  # "a minute and a half"
            value += fraction
            i += used
        elif not ordinal and used:
            value += fraction
            i += used
        found.append(Quantity(value, unit, ordinal, start, i))
    return found


def numbers(text: str) -> list[float]:
    """The numbers in ``text``, in order (with or without units)."""
    return [q.value for q in quantities(text)]


def duration_s(segments: str | Sequence[str]) -> float | None:
    """Seconds spoken in ``segments`` (a text, or the segments of a self-corrected request).

    Durations in one segment add up ("an hour and 20 minutes"); a later segment corrects an
    earlier one, and a bare number in a correction ("5 minutes, no, 10") takes the unit it
    corrects.
    """
    segs = [segments] if isinstance(segments, str) else list(segments)
    seconds: float | None = None
    unit_s: int | None = None
    for seg in segs:
        found = quantities(seg)
        timed = [q for q in found if q.unit is not None]
        bare = [q.value for q in found if q.unit is None and not q.ordinal]
        if timed:
            seconds = sum(q.seconds or 0.0 for q in timed)
            unit_s = UNITS[timed[-1].unit or "second"]
        elif bare and unit_s is not None:
            seconds = bare[-1] * unit_s
    return seconds


def spoken_duration(seconds: float) -> str:
    """``90`` -> ``"1 minute 30 second"``, ``600`` -> ``"10 minute"``: a duration as the words
    of a label ("a 10 minute timer")."""
    return " ".join(f"{count} {unit}" for count, unit in _hms(round(seconds))) or (
        f"{seconds:g} second"
    )


def say_duration(seconds: float) -> str:
    """``90`` -> ``"1 minute and 30 seconds"``, ``600`` -> ``"10 minutes"``: a duration as
    spoken in a sentence ("it rings in 10 minutes")."""
    parts = _hms(max(1, round(seconds)))
    return and_list([f"{count} {unit}" + ("s" if count != 1 else "") for count, unit in parts])


def _hms(whole: int) -> list[tuple[int, str]]:
    """The non-zero hours, minutes and seconds of ``whole`` seconds, largest first."""
    parts = []
    for unit, size in (("hour", 3600), ("minute", 60), ("second", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append((count, unit))
    return parts


_CLOCK_TIME = re.compile(
    r"\b(?P<prep>at|for)\s+(?:"
    r"(?P<word>noon|midday|midnight)"
    r"|(?P<rel>half|(?:a\s+)?quarter|\d{1,2})\s+(?:minutes?\s+)?(?P<dir>past|after|to|before)\s+"
    r"(?P<rh>\d{1,2})"
    r"|(?P<h>\d{1,2})(?:[:.\s](?P<m>\d{2}))?(?:\s*(?:o'?clock))?"
    r")(?:\s*(?P<ampm>a\.?m\.?|p\.?m\.?)|\s+(?:in\s+the\s+)?(?P<part>morning|afternoon|evening|"
    r"tonight|night))?\b",
    re.IGNORECASE,
)


def time_of_day(text: str) -> tuple[int, int] | None:
    """The clock time said after "at" ("at 5 pm", "at half past six", "at quarter to eight",
    "at 7:30", "at seven thirty in the evening", "at noon"), or after "for" when it cannot be
    a duration ("for quarter to eight", "for 6 pm"), as (hour 0-23, minute), or None.

    Without am/pm or a part of the day, an hour 1-12 is read as given (the caller picks the
    next occurrence, see :func:`seconds_until`)."""
    found = [m for m in _CLOCK_TIME.finditer(to_digits(text)) if _is_clock_time(m)]
    if not found:
        return None
    groups = found[-1].groupdict()  # the last time said wins ("at 5, no, at 6")
    if groups["word"]:
        return (0, 0) if groups["word"].lower() == "midnight" else (12, 0)
    if groups["rel"]:
        rel = groups["rel"].lower()
        minutes = 30 if rel == "half" else 15 if "quarter" in rel else int(rel)
        hour = int(groups["rh"])
        if groups["dir"].lower() in ("to", "before"):
            hour, minute = hour - 1, 60 - minutes
        else:
            minute = minutes
    else:
        hour, minute = int(groups["h"]), int(groups["m"] or 0)
    ampm = (groups["ampm"] or "").lower().replace(".", "")
    part = (groups["part"] or "").lower()
    if (ampm == "pm" or part in ("afternoon", "evening", "tonight", "night")) and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    hour %= 24
    if not (0 <= hour < 24 and 0 <= minute < 60):
        return None
    return hour, minute


def _is_clock_time(match: re.Match[str]) -> bool:
    """After "for", only an unmistakable clock time counts ("for 7:30", "for quarter to
    eight", "for 6 pm"): "a timer for 5" is a duration with its unit left out, and "a table
    for two tonight" is no time at all."""
    if match.group("prep").lower() == "at":
        return True
    g = match.groupdict()
    return bool(g["word"] or g["rel"] or (g["m"] and ":" in match.group()) or g["ampm"])


def seconds_until(hour: int, minute: int, now: datetime) -> float:
    """Seconds from ``now`` to the next ``hour:minute`` (a 12-hour reading of an hour 1-12
    without am/pm takes whichever of the two comes first)."""
    candidates = [(hour, minute)]
    if 1 <= hour <= 12:
        candidates.append(((hour + 12) % 24, minute))
    best = None
    for h, m in candidates:
        target = now.replace(hour=h, minute=m, second=0, microsecond=0)
        if target <= now:
            target += timedelta(days=1)
        wait = (target - now).total_seconds()
        best = wait if best is None else min(best, wait)
    assert best is not None
    return best


def seconds_to_time_said(text: str) -> float | None:
    """Whole seconds (at least 1) from now until the clock time said in ``text``
    (:func:`time_of_day`, :func:`seconds_until`), or None when no time is said: when "remind me
    at 5 pm" rings."""
    at = time_of_day(text)
    return None if at is None else float(max(1, round(seconds_until(*at, datetime.now()))))
