"""English numbers and durations for the evaluation: spoken forms written and read back.

The evaluation owns this small toolkit so that it never grades with the tables of the code it
grades (the harness planner has its own). Two directions:

* :func:`number_words` / :func:`ordinal_words` write integers the way people say them
  ("three hundred and forty-two", "twenty-first"); :func:`spoken_duration` writes an amount of
  seconds in one of several natural forms ("a minute and a half", "a quarter of an hour",
  "90 seconds", "two and a half hours"), drawn with a numpy generator.
* :func:`parse_number` reads digits or number words (up to the millions, with "a hundred",
  "and", hyphens, ordinals and "a half") back into a float; :func:`parse_duration` reads the
  duration forms above into seconds.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = [
    "number_words",
    "ordinal_words",
    "parse_duration",
    "parse_number",
    "spoken_duration",
]

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_DECADES = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((1_000_000, "million"), (1_000, "thousand"))
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}

_WORD_VALUE: dict[str, int] = {w: i for i, w in enumerate(_ONES)}
_WORD_VALUE.update({w: 20 + 10 * i for i, w in enumerate(_DECADES)})
_ORDINAL_VALUE: dict[str, int] = {}
for _word, _value in list(_WORD_VALUE.items()):
    if _word in _ORDINAL_IRREGULAR:
        _ORDINAL_VALUE[_ORDINAL_IRREGULAR[_word]] = _value
    elif _word.endswith("y"):
        _ORDINAL_VALUE[_word[:-1] + "ieth"] = _value
    else:
        _ORDINAL_VALUE[_word + "th"] = _value
_MULTIPLIERS = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}
_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ORDINAL_DIGITS = re.compile(r"^(\d+)(st|nd|rd|th)$")


def _below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    parts = []
    if hundreds:
        parts.append(f"{_ONES[hundreds]} hundred")
    if rest:
        if rest < 20:
            tail = _ONES[rest]
        else:
            tens, ones = divmod(rest, 10)
            tail = _DECADES[tens - 2] + (f"-{_ONES[ones]}" if ones else "")
        parts.append(("and " if hundreds else "") + tail)
    return " ".join(parts)


def number_words(n: int) -> str:
    """An integer from 0 to 999,999,999 in words (British "and": "one hundred and five").

    Raises:
        ValueError: ``n`` is not an int in that range.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 1_000_000_000:
        raise ValueError(f"number_words: need an int in [0, 999999999], got {n!r}")
    if n == 0:
        return "zero"
    parts = []
    rest = n
    for scale, name in _SCALES:
        count, rest = divmod(rest, scale)
        if count:
            parts.append(f"{_below_thousand(count)} {name}")
    if rest:
        words = _below_thousand(rest)
        if parts and rest < 100:
            words = "and " + words
        parts.append(words)
    return " ".join(parts)


def ordinal_words(n: int) -> str:
    """An ordinal in words ("first", "twenty-second", "one hundredth")."""
    words = number_words(n)
    head, sep, last = words.rpartition("-") if "-" in words.split()[-1] else ("", "", words)
    if not sep:
        head, _, last = words.rpartition(" ")
        sep = " " if head else ""
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head}{sep}{last}"


def parse_number(text: str) -> float | None:
    """Digits ("600", "2.5", "21st") or English number words ("twenty-five", "a hundred and
    five", "two thousand", "third", "one and a half") as a float; None when it is not a number.
    """
    text = " ".join(text.casefold().replace(",", " ").split())
    if not text:
        return None
    if _NUMERIC.match(text):
        return float(text)
    ordinal = _ORDINAL_DIGITS.match(text)
    if ordinal:
        return float(ordinal[1])
    words = text.replace("-", " ").split()
    half = 0.0
    if words[-3:] == ["and", "a", "half"]:
        words, half = words[:-3], 0.5
    elif words in (["a", "half"], ["half"]):
        return 0.5
    if words and words[0] in ("a", "an") and len(words) > 1 and words[1] in _MULTIPLIERS:
        words = ["one", *words[1:]]
    total = current = 0
    seen = False
    for i, word in enumerate(words):
        if word == "and" and seen:
            continue
        if word in _WORD_VALUE:
            current += _WORD_VALUE[word]
        elif word in _ORDINAL_VALUE and i == len(words) - 1:
            current += _ORDINAL_VALUE[word]
        elif word == "hundred" and seen and 0 < current % 1000 < 10:
            current = current - current % 1000 + (current % 1000) * 100
        elif word in ("thousand", "million") and seen and current:
            total += current * _MULTIPLIERS[word]
            current = 0
        else:
            return None
        seen = True
    return float(total + current) + half if seen else None


_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600}
_UNIT_RE = re.compile(r"^(?P<amount>.+?)\s+(?P<unit>second|minute|hour)s?$")


def parse_duration(text: str) -> float | None:
    """A spoken duration in seconds: "ten minutes", "90 seconds", "a minute and a half",
    "half an hour", "a quarter of an hour", "three quarters of an hour", "an hour and a half",
    "two and a half hours", "an hour and twenty minutes"; None when it is not one."""
    text = " ".join(text.casefold().replace("-", " ").split())
    fractions = {"half an": 0.5, "half a": 0.5, "a quarter of an": 0.25, "quarter of an": 0.25}
    fractions["three quarters of an"] = 0.75
    for prefix, part in fractions.items():
        for unit, seconds in _UNIT_SECONDS.items():
            if text == f"{prefix} {unit}":
                return part * seconds
    compound = re.match(r"^(?P<a>.+?) (?P<u>second|minute|hour)s? and (?P<b>.+)$", text)
    if compound and compound["b"] not in ("a half",):
        first = parse_duration(f"{compound['a']} {compound['u']}")
        second = parse_duration(compound["b"])
        if first is not None and second is not None:
            return first + second
    match = _UNIT_RE.match(text)
    if match:
        unit = _UNIT_SECONDS[match["unit"]]
        amount_text = match["amount"]
        if amount_text in ("a", "an", "one"):
            return float(unit)
        amount = parse_number(amount_text)
        return None if amount is None else amount * unit
    half = re.match(r"^(?P<a>an?|one) (?P<u>second|minute|hour) and a half$", text)
    if half:
        return 1.5 * _UNIT_SECONDS[half["u"]]
    return None


def _amount(rng: np.random.Generator, value: int) -> str:
    return str(value) if rng.random() < 0.25 else number_words(value)


def spoken_duration(rng: np.random.Generator) -> tuple[str, int]:
    """A duration as people say it, drawn at random: ``(words, seconds)``.

    Forms: a count of seconds, minutes or hours in words or digits (1-59 s, 1-90 min, 1-5 h),
    halves and quarters ("a minute and a half", "half an hour", "a quarter of an hour",
    "three quarters of an hour", "two and a half hours") and compounds ("an hour and twenty
    minutes", "two minutes and thirty seconds").
    """
    form = int(rng.integers(6))
    if form == 0:
        value = int(rng.integers(5, 60))
        return f"{_amount(rng, value)} seconds", value
    if form == 1:
        value = int(rng.integers(2, 91))
        return f"{_amount(rng, value)} minutes", value * 60
    if form == 2:
        value = int(rng.integers(2, 6))
        return f"{_amount(rng, value)} hours", value * 3600
    if form == 3:
        choices = (
            ("a minute and a half", 90),
            ("half an hour", 1800),
            ("a quarter of an hour", 900),
            ("three quarters of an hour", 2700),
            ("an hour and a half", 5400),
            ("half a minute", 30),
        )
        return choices[int(rng.integers(len(choices)))]
    if form == 4:
        value = int(rng.integers(2, 5))
        unit, seconds = (("minutes", 60), ("hours", 3600))[int(rng.integers(2))]
        return f"{number_words(value)} and a half {unit}", int(value * seconds + seconds // 2)
    minutes = int(rng.integers(5, 56))
    if rng.random() < 0.5:
        return f"an hour and {_amount(rng, minutes)} minutes", 3600 + minutes * 60
    secs = int(rng.integers(10, 56))
    whole = minutes % 9 + 2
    return f"{number_words(whole)} minutes and {secs} seconds", whole * 60 + secs
