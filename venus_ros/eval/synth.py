"""Synthesize a scenario suite with local text to speech, deterministically for a seed.

:func:`synthesize` writes ``n`` samples per category in the format of
:mod:`venus_ros.eval.scenario`. Speech comes from espeak-ng (several voices and variants,
140-190 words per minute) and, when installed, the neural piper voice (``voices="auto"``).
Everything random is drawn from numpy generators seeded from ``(seed, category, index)``, so
the same arguments give byte-identical files on the same installation, and a category's samples
do not depend on which other categories are asked for. ``voices="espeak"`` keeps a suite
reproducible without the optional piper extra.

Suites the system was not fitted to: every phrase family (templates and lexicons) and the
voices come in two disjoint parts (:data:`FAMILIES`). ``split="train"`` draws from the training
part (the banks in this module, which the floor policy learnt from) with training seeds;
``split="eval"`` (the default) from :mod:`venus_ros.eval.phrases_eval` and voices training never
heard. Numbers and durations come from a general generator (:mod:`venus_ros.eval.numbers`:
compound numbers, "a minute and a half", "a quarter of an hour", digits), never from the words
some component is known to parse; this module imports nothing from the harness, the frontends or
the training code (a layering test enforces it). The evaluation part's assistant answers are
several sentences long; the pauses between them are the frontend's text to speech's (espeak-ng:
about 0.3-0.4 s), as the runner has the frontend itself speak the scripted turn.

With ``noise``, an overlap sample also gets ``clean_input.wav`` in FDB v1.5's meaning: the same
input without the overlap event (room noise kept). Without noise it is not written: the clean
input is then the input with the overlap's span silenced (:meth:`Sample.clean_audio`).

What each category holds (the user channel only: the assistant's speech is never in
``input.wav``; the runner plays ``assistant_turns`` and adds echo itself):

* ``backchannel`` / ``interruption`` / ``other_directed`` / ``background``: the assistant is
  scripted to speak a 6-10 s explanation from 0.5-1.0 s; 2-4 s into it the user says a
  backchannel ("mm-hmm"), interrupts ("wait, stop"), talks to someone else ("Anna, could you
  grab my keys?"), or a second talker / TV-like speech plays 5-20 dB below the normal user
  level. ``expected`` is ``respond`` for interruptions and ``resume`` for the rest.
* ``pause``: a sentence with a 1.0-2.0 s pause in the middle (two turns; ``extra["pause"]``).
* ``turn_taking``: a question, then at least 3 s of silence.
* ``delegation``: requests that need the back end (robot actions, fresh facts, memory,
  multi-step work) or not (greetings, chit-chat, confirmations), half and half.
* ``tool_use``: disfluent requests (fillers, false starts, self-corrections) with the calls
  a correct assistant makes after the correction; the suite's ``tools.json`` holds the tools.
* ``other_directed_idle`` / ``background_idle``: the assistant is silent (no scripted turn);
  the user talks to someone else (a vocative with another name, a side remark, one side of a
  phone call; 0-3 dB softer, turned away), or a second talker / TV-like speech plays 5-20 dB
  below the user level in another voice. Expected: no reply. Half of the samples (seeded) then
  have the user ask the assistant a real request (a question or a delegation request, at the
  normal level, :data:`IDLE_GAP_S` after the remark), so that merging the remark into the
  request is measurable; the rest end with :data:`IDLE_SILENCE_S` of silence.

Times in ``turns`` are measured on the synthesized audio: each utterance is trimmed with an
energy gate before it is placed, so a turn starts and ends where its speech does.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from venus_ros.eval import phrases_eval
from venus_ros.eval.numbers import number_words, spoken_duration
from venus_ros.eval.scenario import (
    CATEGORIES,
    IDLE_CATEGORIES,
    INPUT_RATE,
    METADATA_JSON,
    OVERLAP_CATEGORIES,
    TOOLS_JSON,
    Suite,
    ToolSpec,
    load_suite,
    write_sample,
    write_tools,
)

#: Seeds reserved for evaluation suites and for training data; they never overlap.
SEED_RANGES: Mapping[str, range] = {
    "eval": range(0, 1_000_000),
    "train": range(1_000_000, 2_000_000),
}
#: espeak-ng voices (language + variant). ``en-gb`` ignores variants in espeak-ng 1.51, so the
#: British variants use ``en``; every name here renders differently.
ESPEAK_VOICES: tuple[str, ...] = (
    "en-us",
    "en-us+m3",
    "en-us+m7",
    "en-us+f2",
    "en-us+f4",
    "en-gb",
    "en+m1",
    "en+f3",
    "en+f5",
    "en-gb-x-rp",
    "en-gb-x-rp+f2",
    "en-gb-scotland",
    "en-gb-scotland+m4",
    "en-029",
    "en-029+f1",
)
#: Name recorded for the neural voice.
PIPER_VOICE = "piper:joe"
#: Share of samples spoken by the neural voice when it is available (``voices="auto"``).
PIPER_SHARE = 0.25
#: Speaking rates, words per minute (inclusive).
RATE_WPM: tuple[int, int] = (140, 190)
#: The piper voice's own rate, words per minute (length scale = this / wanted rate).
PIPER_NATIVE_WPM = 165.0
#: Normal user speech level: RMS over the active frames, dBFS (each utterance varies +-3 dB).
USER_RMS_DBFS = -23.0
#: Background speech sits this many dB below :data:`USER_RMS_DBFS` (uniform).
BACKGROUND_DB_BELOW: tuple[float, float] = (5.0, 20.0)
#: RMS of the optional room noise, dBFS.
NOISE_DBFS = -45.0


@dataclass(frozen=True)
class Timing:
    """Where speech goes in a sample; each pair is a uniform range in seconds.

    Attributes:
        lead_in_s: where the user starts speaking in non-overlap samples.
        assistant_start_s: where the scripted assistant turn starts (overlap samples).
        overlap_delay_s: how far into the assistant turn the overlapping speech starts.
        pause_s: the mid-sentence pause of ``pause`` samples.
        trailing_s: silence after the user's last word, where a response can happen.
        overlap_total_s: total length of overlap samples (never less than the overlap's end
            plus the shortest trailing silence); also covers the assistant turn when it fits.
        rate_wpm: speaking rates, words per minute (integers, inclusive).
    """

    lead_in_s: tuple[float, float] = (0.5, 1.0)
    assistant_start_s: tuple[float, float] = (0.5, 1.0)
    overlap_delay_s: tuple[float, float] = (2.0, 4.0)
    pause_s: tuple[float, float] = (1.0, 2.0)
    trailing_s: tuple[float, float] = (3.0, 4.0)
    overlap_total_s: tuple[float, float] = (8.0, 12.0)
    rate_wpm: tuple[int, int] = RATE_WPM


#: The default timing.
TIMING = Timing()
#: The shortest timing within the ranges above, for small committed suites (``compact=True``):
#: every range at its low end, brisk speech, and 2 s of trailing silence (3 s for
#: ``turn_taking``, which always gets at least :data:`TURN_TAKING_SILENCE_S`).
COMPACT_TIMING = Timing(
    lead_in_s=(0.3, 0.3),
    assistant_start_s=(0.5, 0.5),
    overlap_delay_s=(2.0, 2.0),
    pause_s=(1.0, 1.0),
    trailing_s=(2.0, 2.0),
    overlap_total_s=(0.0, 10.0),
    rate_wpm=(165, 190),
)
#: The least silence after a ``turn_taking`` question, whatever the timing.
TURN_TAKING_SILENCE_S = 3.0
#: Silence between idle speech and the real request that follows it (uniform, seconds).
IDLE_GAP_S: tuple[float, float] = (1.5, 3.0)
#: The least silence after idle speech with no request after it (the metric's answer window).
IDLE_SILENCE_S = 5.0
#: Energy gate for trimming TTS output: frames quieter than this below the loudest are silence.
GATE_DB = 40.0
#: Peak ceiling of the written audio.
PEAK_LIMIT = 0.9
#: Choices of ``voices``.
VOICE_SETS = ("auto", "espeak", "piper")

_FRAME = INPUT_RATE // 100  # 10 ms energy-gate frames

# --- phrase banks (written for this project) -------------------------------------------------

#: Explanations the assistant is scripted to be speaking (6-10 s at 170 wpm).
ASSISTANT_TEXTS: tuple[str, ...] = (
    "So the easiest way to repot the plant is to water it the day before, loosen the roots "
    "gently, and move it into a pot about two inches wider.",
    "The train leaves at ten past eight from platform four, and if you miss it, the next one "
    "is forty minutes later, so it is worth leaving a little early.",
    "To reset the router, hold the small button on the back for about ten seconds until the "
    "lights blink, then wait a minute for it to come back online.",
    "Bread dough needs time to rise, so after kneading, cover the bowl with a towel and leave "
    "it somewhere warm for about an hour, until it has doubled in size.",
    "The museum is open until six on weekdays, and on Thursdays it stays open late, with free "
    "entry after five for anyone living in the city.",
    "If you want to save energy at home, start with the heating: lowering the thermostat by "
    "one degree usually cuts the bill by several percent over a winter.",
    "A good warm up before running is five minutes of brisk walking, followed by some leg "
    "swings and a few short strides to get your heart rate up gradually.",
    "The recipe calls for two cups of flour, one cup of sugar and three eggs, but you can use "
    "honey instead of sugar if you reduce the milk a little.",
    "Your package was handed to the courier this morning, and the tracking page says it should "
    "arrive tomorrow between nine in the morning and one in the afternoon.",
    "Tomatoes grow best with at least six hours of sun a day, and they like deep watering twice "
    "a week rather than a little water every single evening.",
    "The meeting has been moved to Wednesday afternoon, because two of the team members are "
    "travelling on Tuesday and could not join the call from the airport.",
    "To clean the coffee machine, run a mix of water and white vinegar through it once, then "
    "run plain water two or three times to rinse out the taste.",
    "The battery lasts longer if you keep it between twenty and eighty percent, and avoid "
    "leaving the phone in a hot car or charging it overnight every night.",
    "Most adults need between seven and nine hours of sleep, and keeping the same bedtime, even "
    "at weekends, makes it much easier to fall asleep quickly.",
    "The hiking trail is about six kilometres long, with a steep climb at the start, and then "
    "it follows the ridge with a great view over the lake.",
    "When you plant the seeds, press them about a centimetre into the soil, keep it moist but "
    "not soaking, and you should see the first shoots within a week.",
    "The library lets you borrow up to ten books for three weeks, and you can renew them online "
    "twice, as long as nobody else has reserved them.",
    "To make the room feel bigger, keep the walls light, put a large mirror opposite the window, "
    "and choose furniture that sits up on legs instead of the floor.",
)

BACKCHANNELS: tuple[str, ...] = (
    "uh-huh",
    "mm-hmm",
    "right",
    "yeah",
    "okay",
    "I see",
    "yes",
    "sure",
    "oh, right",
    "got it",
    "mm, okay",
    "yeah, yeah",
    "oh, interesting",
    "uh-huh, okay",
    "right, right",
    "makes sense",
)

INTERRUPTIONS: tuple[str, ...] = (
    "Wait, stop. I meant the blue one.",
    "Sorry, can you repeat the last part?",
    "Hang on, that's not what I asked.",
    "Actually, never mind, tell me about tomorrow instead.",
    "Stop, stop. How long does that take?",
    "Sorry to cut in, but is that the cheapest option?",
    "Wait, what did you say about the time?",
    "No, no, I already tried that.",
    "Hold on, can you go slower?",
    "Excuse me, which platform was that?",
    "Okay, stop there. Can you just give me the short version?",
    "Sorry, I mean for two people, not four.",
    "Wait, is that safe for kids?",
    "Hmm, hold on, can we skip ahead to the end?",
    "Let me stop you there. What does it cost?",
    "Sorry, did you say Tuesday or Thursday?",
    "Wait a second, I need to write this down. Start again?",
    "No, I meant the other one, the one from yesterday.",
    # short commands are interruptions too
    "Stop.",
    "Wait.",
    "Hold on.",
    "No no no.",
    "Stop, stop.",
    "One second.",
    "Okay, stop.",
    "Quiet, please.",
)

OTHER_NAMES: tuple[str, ...] = ("Anna", "Tom", "Maria", "David", "Sophie", "Leo", "Priya", "Sam")

VOCATIVES: tuple[str, ...] = (
    "{name}, could you grab my keys?",
    "{name}, dinner is ready!",
    "Hey {name}, did you feed the cat?",
    "{name}, can you turn the music down a bit?",
    "{name}, your coat is on the chair.",
    "Hey {name}, are you coming with us later?",
    "{name}, close the door, please.",
    "{name}, have you seen my glasses anywhere?",
    "{name}, the taxi is outside.",
    "Thanks, {name}, just put it on the table.",
)

SIDE_COMMENTS: tuple[str, ...] = (
    "Hold on, my phone is ringing.",
    "Ugh, the kettle is boiling over.",
    "Where did I put that pen?",
    "Oh no, it's starting to rain.",
    "Hmm, I think someone is at the door.",
    "Oops, I spilled my coffee.",
    "Oh, look at the time.",
    "Wow, that dog is really loud today.",
    "Just a second, let me sit down.",
    "Why is the printer beeping again?",
)

#: One side of a phone call in the room (idle samples): the user talks, not to the assistant.
PHONE_TALK: tuple[str, ...] = (
    "Yes, I'm at home now, call me back in ten minutes.",
    "No, Dad, I already paid the gas bill last week.",
    "Okay, see you at the station around six then.",
    "Really? That's great news, congratulations!",
    "Hang on, let me find a pen, what was the address?",
    "I'll ask her tonight and text you tomorrow.",
)

BACKGROUND_TALK: tuple[str, ...] = (
    "Did you see the game last night? It went to extra time.",
    "I told her we'd be there by seven, but the traffic is awful.",
    "Can you pass me the salt? Thanks.",
    "No, the blue folder is in the other drawer.",
    "We should really book the tickets before the weekend.",
    "I think the bus was late again this morning.",
    "My sister is coming over on Saturday with the kids.",
    "Honestly, I preferred the old menu at that place.",
)

BACKGROUND_TV: tuple[str, ...] = (
    "And in tonight's headlines, the city council has approved a new bridge across the river.",
    "Tomorrow will be cloudy in the north, with showers spreading south by the afternoon.",
    "And it's a goal! What a finish in the final minute of the match!",
    "Stay tuned after the break for our interview with the award winning chef.",
    "Prices at the pump fell for the third week in a row, analysts said on Monday.",
    "This weekend only, every sofa in the store is half price. Don't miss out.",
    "Scientists say the new telescope has already sent back its first pictures.",
    "Coming up next, the top ten songs of the summer, counted down live.",
)

#: Sentences split where a speaker pauses to think: (first part, second part).
PAUSED_SENTENCES: tuple[tuple[str, str], ...] = (
    ("I was thinking we could go to the", "park on Sunday, if the weather is nice."),
    ("Could you tell me how to get to the", "nearest pharmacy from here?"),
    ("I'd like to book a table for", "four people tomorrow evening."),
    ("What's the best way to, um,", "clean a cast iron pan?"),
    ("My brother's birthday is next week and I want to get him", "something for his garden."),
    ("Can you remind me what", "we planned for the weekend?"),
    ("I need a recipe that uses", "spinach, chickpeas and some rice."),
    ("So the thing I don't understand is", "why the bill went up this month."),
    ("How far is it from here to", "the train station on foot?"),
    ("I'm looking for a film that is", "funny but not too long."),
    ("Tell me a bit about the history of", "the old lighthouse in town."),
    ("What should I pack for a trip to", "the mountains in October?"),
    ("Is it a good idea to", "water the lawn in the evening?"),
    ("I'd love to learn how to", "play a few songs on the guitar."),
)

QUESTIONS: tuple[str, ...] = (
    "What's a good name for a small grey kitten?",
    "How long should I boil an egg for a runny yolk?",
    "Can you explain what a black hole is?",
    "What's the difference between a crocodile and an alligator?",
    "Why is the sky blue?",
    "Could you suggest something quick for dinner tonight?",
    "How many bones are in the human body?",
    "What's a polite way to decline an invitation?",
    "Do you know any good stretches for a stiff back?",
    "How do I get wax out of a tablecloth?",
    "What does photosynthesis actually do?",
    "Can you tell me a short joke?",
    "Which planet has the most moons?",
    "How do bees make honey?",
    "What's an easy houseplant for a dark room?",
    "How often should I change my toothbrush?",
)

#: Requests that need the back end: robot actions, fresh facts, memory, multi-step work.
DELEGATE_YES: tuple[str, ...] = (
    "Can you go to the kitchen and check if the oven is off?",
    "Please bring me the water bottle from the desk.",
    "What's the weather going to be like tomorrow afternoon?",
    "Who won the football match last night?",
    "What did I tell you about my dentist appointment last week?",
    "Where did I leave my reading glasses yesterday?",
    "Find me three Italian restaurants nearby that are open now and compare their ratings.",
    "Plan a route to the airport that avoids the motorway and tell me how long it takes.",
    "Look up the opening hours of the post office today.",
    "Can you tidy up the toys in the living room?",
    "Check my calendar and move the Friday meeting to next Monday.",
    "What's the current price of a flight to Lisbon next weekend?",
    "Remind me what my sister said she wanted for her birthday.",
    "Go and see who is at the front door.",
    "Send Tom a message saying I'll be ten minutes late.",
    "Compare the last three electricity bills and tell me which month was highest.",
    "Is the pharmacy on Main Street still open?",
    "Drive over to the charging dock and plug yourself in.",
)

#: Requests the local model answers by itself.
DELEGATE_NO: tuple[str, ...] = (
    "Hi there, how are you doing?",
    "Good morning!",
    "Thanks, that's all for now.",
    "Okay, sounds good.",
    "Yes, please.",
    "No, that's fine, thank you.",
    "Tell me something nice.",
    "Haha, that's funny.",
    "Can you say that again a bit slower?",
    "What's your name?",
    "Okay, and what about the second one?",
    "Great, thanks a lot.",
    "I'm feeling a bit tired today.",
    "Goodnight, see you tomorrow.",
    "Sure, go ahead.",
    "That sounds lovely.",
    "Can you say it more briefly?",
    "Nice, I like that idea.",
)

FILLERS: tuple[str, ...] = ("um", "uh", "er", "hmm", "like", "so, um", "uh, well")
LOCATIONS: tuple[str, ...] = (
    "kitchen",
    "living room",
    "bedroom",
    "front door",
    "office",
    "hallway",
    "garage",
    "charging dock",
)
OBJECTS: tuple[str, ...] = (
    "red cup",
    "blue mug",
    "remote control",
    "keys",
    "book",
    "water bottle",
    "apple",
    "phone",
    "newspaper",
)
ROOMS: tuple[str, ...] = ("kitchen", "living room", "bedroom", "bathroom", "office", "hallway")
#: City -> IANA zone for clock requests (expected arguments use the IANA name).
ZONES: tuple[tuple[str, str], ...] = (
    ("Paris", "Europe/Paris"),
    ("Tokyo", "Asia/Tokyo"),
    ("New York", "America/New_York"),
    ("London", "Europe/London"),
    ("Sydney", "Australia/Sydney"),
)
_OPS: tuple[tuple[str, str], ...] = (
    ("plus", "+"),
    ("minus", "-"),
    ("times", "*"),
    ("divided by", "/"),
)


@dataclass(frozen=True)
class Families:
    """One part (``train`` or ``eval``) of every phrase family (templates and lexicons) and of
    the voices. The parts are disjoint (a test proves it); :func:`synthesize` draws from one."""

    assistant_texts: tuple[str, ...]
    backchannels: tuple[str, ...]
    interruptions: tuple[str, ...]
    other_names: tuple[str, ...]
    vocatives: tuple[str, ...]
    side_comments: tuple[str, ...]
    phone_talk: tuple[str, ...]
    background_talk: tuple[str, ...]
    background_tv: tuple[str, ...]
    paused_sentences: tuple[tuple[str, str], ...]
    questions: tuple[str, ...]
    delegate_yes: tuple[str, ...]
    delegate_no: tuple[str, ...]
    fillers: tuple[str, ...]
    locations: tuple[str, ...]
    objects: tuple[str, ...]
    rooms: tuple[str, ...]
    zones: tuple[tuple[str, str], ...]
    ops: tuple[tuple[str, str], ...]
    espeak_voices: tuple[str, ...]
    piper: bool


#: The training part is the banks above (the floor policy was trained on them); the evaluation
#: part is :mod:`venus_ros.eval.phrases_eval`, written later and never trained on.
FAMILIES: Mapping[str, Families] = {
    "train": Families(
        ASSISTANT_TEXTS,
        BACKCHANNELS,
        INTERRUPTIONS,
        OTHER_NAMES,
        VOCATIVES,
        SIDE_COMMENTS,
        PHONE_TALK,
        BACKGROUND_TALK,
        BACKGROUND_TV,
        PAUSED_SENTENCES,
        QUESTIONS,
        DELEGATE_YES,
        DELEGATE_NO,
        FILLERS,
        LOCATIONS,
        OBJECTS,
        ROOMS,
        ZONES,
        _OPS,
        ESPEAK_VOICES,
        piper=False,
    ),
    "eval": Families(
        phrases_eval.ASSISTANT_TEXTS,
        phrases_eval.BACKCHANNELS,
        phrases_eval.INTERRUPTIONS,
        phrases_eval.OTHER_NAMES,
        phrases_eval.VOCATIVES,
        phrases_eval.SIDE_COMMENTS,
        phrases_eval.PHONE_TALK,
        phrases_eval.BACKGROUND_TALK,
        phrases_eval.BACKGROUND_TV,
        phrases_eval.PAUSED_SENTENCES,
        phrases_eval.QUESTIONS,
        phrases_eval.DELEGATE_YES,
        phrases_eval.DELEGATE_NO,
        phrases_eval.FILLERS,
        phrases_eval.LOCATIONS,
        phrases_eval.OBJECTS,
        phrases_eval.ROOMS,
        phrases_eval.ZONES,
        phrases_eval.OPS,
        phrases_eval.ESPEAK_VOICES,
        piper=True,
    ),
}


_TIMER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "seconds": {"type": "number", "exclusiveMinimum": 0, "description": "duration, seconds"},
        "label": {"type": "string", "maxLength": 80, "description": "what the timer is for"},
    },
    "required": ["seconds"],
    "additionalProperties": False,
}
_CALCULATOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "expression": {
            "type": "string",
            "minLength": 1,
            "description": "an arithmetic expression with + - * / and parentheses",
        }
    },
    "required": ["expression"],
    "additionalProperties": False,
}
_CLOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "minLength": 1,
            "description": "IANA time zone such as 'Europe/Paris'; default: local time",
        }
    },
    "additionalProperties": False,
}


def suite_tools() -> tuple[ToolSpec, ...]:
    """The tool set of synthesized ``tool_use`` suites (written to ``tools.json``).

    ``timer``, ``calculator`` and ``clock`` are common assistant tools (the suite defines their
    schemas itself: the evaluation never reads the harness's); the robot tools take lower-case
    names.
    """

    def strings(**props: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
            "required": list(props),
            "additionalProperties": False,
        }

    light = strings(room="room name, lower case")
    light["properties"]["on"] = {"type": "boolean", "description": "true: on, false: off"}
    light["required"] = ["room", "on"]
    return (
        ToolSpec(
            "timer",
            "Sets a timer or reminder that speaks when it is due.",
            _TIMER_SCHEMA,
            "The timer is set.",
        ),
        ToolSpec(
            "calculator",
            "Evaluates an arithmetic expression exactly.",
            _CALCULATOR_SCHEMA,
            "42",
        ),
        ToolSpec(
            "clock",
            "Tells the current time and date, optionally in a given time zone.",
            _CLOCK_SCHEMA,
            "It is 10:30 AM.",
        ),
        ToolSpec(
            "navigate_to",
            "Drives the robot to a named place in the home.",
            strings(location="place name, lower case, e.g. 'kitchen'"),
            "I have arrived.",
        ),
        ToolSpec(
            "pick_up",
            "Picks up an object the robot can see and holds it.",
            strings(object="object name, lower case, e.g. 'red cup'"),
            "I am holding it.",
        ),
        ToolSpec("set_light", "Switches the lights of a room on or off.", light, "Done."),
    )


# --- tool-use requests -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    text: str
    calls: tuple[dict[str, Any], ...]
    disfluencies: tuple[str, ...]


def _filler(rng: np.random.Generator, fam: Families) -> str:
    return str(rng.choice(fam.fillers))


def _pick(rng: np.random.Generator, items: Sequence[Any], avoid: Any = None) -> Any:
    choices = [x for x in items if x != avoid]
    return choices[int(rng.integers(len(choices)))]


def _form(rng: np.random.Generator, forms: Sequence[tuple[str, tuple[str, ...]]]) -> Any:
    return forms[int(rng.integers(len(forms)))]


def _timer_request(rng: np.random.Generator, fam: Families, split: str) -> _Request:
    words, seconds = spoken_duration(rng)
    wrong, wrong_s = spoken_duration(rng)
    while wrong_s == seconds:
        wrong, wrong_s = spoken_duration(rng)
    f = _filler(rng, fam)
    if split == "train":
        forms = (
            (f"Set a timer for {wrong}, no, {words}.", ("self_correction",)),
            (f"{f.capitalize()}, set a timer for {words}.", ("filler",)),
            (
                f"Can you, {f}, start a timer for {wrong}, sorry, {words}?",
                ("filler", "self_correction"),
            ),
            (f"Remind me in, {f}, {words}.", ("filler",)),
            (f"Put a, put a timer on for {words}, please.", ("false_start",)),
        )
    else:
        forms = (
            (f"I need a timer, {f}, {words} should do.", ("filler",)),
            (f"Count down {wrong}, uh, scratch that, {words}.", ("self_correction",)),
            (f"Could you time, time {words} for me?", ("false_start",)),
            (f"Let me know when {words} have passed, {f}.", ("filler",)),
            (f"Alarm in {wrong}, I mean, {words}, please.", ("self_correction",)),
        )
    text, kinds = _form(rng, forms)
    return _Request(text, ({"name": "timer", "arguments": {"seconds": seconds}},), kinds)


def _operand(rng: np.random.Generator, value: int, split: str) -> str:
    return number_words(value) if split == "eval" and rng.random() < 0.5 else str(value)


def _calculator_request(rng: np.random.Generator, fam: Families, split: str) -> _Request:
    op_word, op = fam.ops[int(rng.integers(len(fam.ops)))]
    b = int(rng.integers(2, 13))
    a = b * int(rng.integers(2, 13)) if op == "/" else int(rng.integers(2, 100))
    wrong_word, _ = _pick(rng, fam.ops, avoid=(op_word, op))
    f = _filler(rng, fam)
    x, y = _operand(rng, a, split), _operand(rng, b, split)
    if split == "train":
        forms = (
            (f"What's {x} {wrong_word}, sorry, {x} {op_word} {y}?", ("self_correction",)),
            (f"{f.capitalize()}, what is {x} {op_word} {y}?", ("filler",)),
            (f"How much is, {f}, {x} {op_word} {y}?", ("filler",)),
            (f"Can you, could you work out {x} {op_word} {y}?", ("false_start",)),
            (f"Calculate {x} {op_word}, {f}, {y} for me.", ("filler",)),
        )
    else:
        forms = (
            (f"Quick sum, {f}, {x} {op_word} {y}?", ("filler",)),
            (f"Do {x} {wrong_word}, no wait, {x} {op_word} {y}.", ("self_correction",)),
            (f"What do you get, what do I get for {x} {op_word} {y}?", ("false_start",)),
            (f"{f.capitalize()}, {x} {op_word} {y} is how much?", ("filler",)),
        )
    text, kinds = _form(rng, forms)
    call = {"name": "calculator", "arguments": {"expression": f"{a} {op} {b}"}}
    return _Request(text, (call,), kinds)


def _clock_request(rng: np.random.Generator, fam: Families, split: str) -> _Request:
    f = _filler(rng, fam)
    if rng.random() < 0.5:
        if split == "train":
            forms = (
                (f"{f.capitalize()}, what time is it?", ("filler",)),
                (f"What's the, {f}, the time right now?", ("filler", "false_start")),
                ("Do you know the, what's the time?", ("false_start",)),
            )
        else:
            forms = (
                (f"Have you got the time, {f}?", ("filler",)),
                ("How late, how late is it now?", ("false_start",)),
                (f"{f.capitalize()}, tell me the time.", ("filler",)),
            )
        text, kinds = _form(rng, forms)
        return _Request(text, ({"name": "clock", "arguments": {}},), kinds)
    city, zone = fam.zones[int(rng.integers(len(fam.zones)))]
    wrong_city, _ = _pick(rng, fam.zones, avoid=(city, zone))
    if split == "train":
        forms = (
            (f"What time is it in, {f}, {city}?", ("filler",)),
            (f"What's the time in {wrong_city}, no, in {city}?", ("self_correction",)),
        )
    else:
        forms = (
            (f"What's the clock saying in, {f}, {city}?", ("filler",)),
            (f"Time in {wrong_city}, sorry, I mean {city}?", ("self_correction",)),
        )
    text, kinds = _form(rng, forms)
    return _Request(text, ({"name": "clock", "arguments": {"timezone": zone}},), kinds)


def _navigate_request(rng: np.random.Generator, fam: Families, split: str) -> _Request:
    place = _pick(rng, fam.locations)
    wrong = _pick(rng, fam.locations, avoid=place)
    f = _filler(rng, fam)
    if split == "train":
        forms = (
            (f"Go to the {wrong}, no, wait, the {place}.", ("self_correction",)),
            (f"{f.capitalize()}, can you drive to the {place}?", ("filler",)),
            (f"Head over to the, {f}, the {place}, please.", ("filler", "false_start")),
            (f"Could you go, could you go to the {place}?", ("false_start",)),
        )
    else:
        forms = (
            (f"Make your way to the {place}, {f}.", ("filler",)),
            (f"Roll into the {wrong}, er, no, the {place}.", ("self_correction",)),
            (f"Move, move yourself to the {place}.", ("false_start",)),
        )
    text, kinds = _form(rng, forms)
    return _Request(text, ({"name": "navigate_to", "arguments": {"location": place}},), kinds)


def _pick_up_request(rng: np.random.Generator, fam: Families, split: str) -> _Request:
    thing = _pick(rng, fam.objects)
    wrong = _pick(rng, fam.objects, avoid=thing)
    f = _filler(rng, fam)
    article = "" if thing == "keys" else "the "
    wrong_article = "" if wrong == "keys" else "the "
    if split == "train":
        forms = (
            (
                f"Pick up {wrong_article}{wrong}, sorry, I mean {article}{thing}.",
                ("self_correction",),
            ),
            (f"{f.capitalize()}, could you pick up {article}{thing}?", ("filler",)),
            (f"Grab, {f}, pick up {article}{thing} for me.", ("filler", "false_start")),
        )
    else:
        forms = (
            (f"Lift {wrong_article}{wrong}, no, {article}{thing}, please.", ("self_correction",)),
            (f"Would you, {f}, pick {article}{thing} up?", ("filler",)),
            (f"Take, take hold of {article}{thing}.", ("false_start",)),
        )
    text, kinds = _form(rng, forms)
    return _Request(text, ({"name": "pick_up", "arguments": {"object": thing}},), kinds)


def _light_request(rng: np.random.Generator, fam: Families, split: str) -> _Request:
    room = _pick(rng, fam.rooms)
    on = bool(rng.random() < 0.5)
    state, other = ("on", "off") if on else ("off", "on")
    f = _filler(rng, fam)
    if split == "train":
        forms = (
            (f"Turn {other} the, no, turn {state} the {room} lights.", ("self_correction",)),
            (f"{f.capitalize()}, switch the lights {state} in the {room}.", ("filler",)),
            (f"Can you, {f}, turn the {room} light {state}?", ("filler",)),
            (f"Lights, the {room} lights, {state} please.", ("false_start",)),
        )
    else:
        forms = (
            (f"Flick the {room} lights {state}, {f}.", ("filler",)),
            (f"Lights {other} in the, sorry, {state} in the {room}.", ("self_correction",)),
            (f"Put the, put the {room} lights {state}.", ("false_start",)),
        )
    text, kinds = _form(rng, forms)
    call = {"name": "set_light", "arguments": {"room": room, "on": on}}
    return _Request(text, (call,), kinds)


_TOOL_MAKERS: tuple[Callable[[np.random.Generator, Families, str], _Request], ...] = (
    _timer_request,
    _calculator_request,
    _clock_request,
    _navigate_request,
    _pick_up_request,
    _light_request,
)


def _tool_request(rng: np.random.Generator, kind: int, split: str) -> _Request:
    """One disfluent request; about one in five asks for two things at once."""
    fam = FAMILIES[split]
    first = _TOOL_MAKERS[kind](rng, fam, split)
    if rng.random() >= 0.2:
        return first
    index = (kind + 1 + int(rng.integers(len(_TOOL_MAKERS) - 1))) % len(_TOOL_MAKERS)
    other = _TOOL_MAKERS[index](rng, fam, split)
    second = other.text[0].lower() + other.text[1:]
    text = f"{first.text.rstrip('.?!')}, and then {second}"
    kinds = tuple(dict.fromkeys(first.disfluencies + other.disfluencies))
    return _Request(text, first.calls + other.calls, kinds)


# --- audio -----------------------------------------------------------------------------------


class Voices:
    """Renders text with a named voice at 16 kHz; engines are built once and cached."""

    def __init__(self) -> None:
        self._espeak: dict[str, Any] = {}
        self._piper: Any = None

    def render(self, text: str, voice: str, rate_wpm: int) -> np.ndarray:
        import soxr

        spoken = text.replace("—", ",").replace("-", " ")
        if voice == PIPER_VOICE:
            audio, rate = self._render_piper(spoken, rate_wpm)
        else:
            engine = self._espeak.get(voice)
            if engine is None:
                from venus_ros.audio.tts import EspeakTts

                engine = self._espeak[voice] = EspeakTts(voice=voice, output_rate=INPUT_RATE)
            engine.rate_wpm = int(rate_wpm)
            audio, rate = engine.render(spoken)
        audio = np.asarray(audio, dtype=np.float32)
        if rate != INPUT_RATE:
            audio = soxr.resample(audio, rate, INPUT_RATE, quality="HQ").astype(np.float32)
        return trim(audio)

    def _render_piper(self, text: str, rate_wpm: int) -> tuple[np.ndarray, int]:
        from piper import SynthesisConfig

        if self._piper is None:
            self._piper = _load_piper()
        # Zero noise scales: piper's sampling noise is drawn inside the ONNX graph, unseeded.
        config = SynthesisConfig(
            length_scale=PIPER_NATIVE_WPM / float(rate_wpm), noise_scale=0.0, noise_w_scale=0.0
        )
        parts = [chunk.audio_float_array for chunk in self._piper.synthesize(text, config)]
        audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        return audio, int(self._piper.config.sample_rate)


def _load_piper() -> Any:
    """The packaged piper voice, with a one-thread ONNX Runtime session (public API only)."""
    import json

    import onnxruntime
    from piper import PiperConfig, PiperVoice

    from venus_ros.audio.tts import packaged_piper_voice

    model = packaged_piper_voice()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(model), sess_options=options, providers=["CPUExecutionProvider"]
    )
    config_path = model.with_name(model.name + ".json")
    config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
    return PiperVoice(session=session, config=config)


def frame_rms(audio: np.ndarray, frame: int = _FRAME) -> np.ndarray:
    """RMS of consecutive ``frame``-sample frames (the last partial frame is dropped)."""
    count = len(audio) // frame
    if count == 0:
        return np.zeros(0, np.float32)
    frames = audio[: count * frame].astype(np.float64).reshape(count, frame)
    return np.sqrt(np.mean(frames**2, axis=1))


def _active(audio: np.ndarray, gate_db: float = GATE_DB) -> np.ndarray:
    rms = frame_rms(audio)
    if rms.size == 0 or rms.max() <= 0:
        return np.zeros(rms.size, bool)
    return rms > max(rms.max() * 10 ** (-gate_db / 20), 1e-5)


def trim(audio: np.ndarray, gate_db: float = GATE_DB) -> np.ndarray:
    """Cut leading and trailing silence: frames (10 ms at 16 kHz) more than ``gate_db`` below
    the loudest frame.

    Raises:
        ValueError: the audio holds no sound at all.
    """
    active = np.flatnonzero(_active(audio, gate_db))
    if active.size == 0:
        raise ValueError("synthesized speech is silent")
    return audio[active[0] * _FRAME : (active[-1] + 1) * _FRAME].copy()


def active_rms_dbfs(audio: np.ndarray) -> float:
    """Speech level: RMS over the frames above the energy gate, in dBFS."""
    rms = frame_rms(audio)
    mask = _active(audio)
    if not mask.any():
        return -math.inf
    return float(20 * np.log10(np.sqrt(np.mean(rms[mask] ** 2))))


def at_level(audio: np.ndarray, dbfs: float) -> np.ndarray:
    """``audio`` scaled so that its active speech (:func:`active_rms_dbfs`) is at ``dbfs``."""
    gain = 10 ** ((dbfs - active_rms_dbfs(audio)) / 20)
    return (audio * gain).astype(np.float32)


def _band_limit(audio: np.ndarray, low_hz: float = 250.0, high_hz: float = 4000.0) -> np.ndarray:
    """A small-loudspeaker sound for TV-like speech: keep ``low_hz``-``high_hz`` only."""
    spectrum = np.fft.rfft(audio.astype(np.float64))
    freqs = np.fft.rfftfreq(len(audio), 1.0 / INPUT_RATE)
    spectrum[(freqs < low_hz) | (freqs > high_hz)] = 0
    return np.fft.irfft(spectrum, n=len(audio)).astype(np.float32)


def room_noise(rng: np.random.Generator, samples: int, dbfs: float = NOISE_DBFS) -> np.ndarray:
    """Pink-ish noise (1/f power above 20 Hz) with an RMS of ``dbfs``."""
    if samples <= 0:
        return np.zeros(0, np.float32)
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    freqs = np.fft.rfftfreq(samples, 1.0 / INPUT_RATE)
    spectrum /= np.sqrt(np.maximum(freqs, 20.0))
    noise = np.fft.irfft(spectrum, n=samples)
    noise *= 10 ** (dbfs / 20) / max(float(np.sqrt(np.mean(noise**2))), 1e-12)
    return noise.astype(np.float32)


# --- samples ---------------------------------------------------------------------------------


class _Builder:
    """Places utterances on the user channel and collects turns."""

    def __init__(self) -> None:
        self.pieces: list[tuple[int, np.ndarray]] = []
        self.turns: list[dict[str, Any]] = []

    def place(self, audio: np.ndarray, start_s: float, text: str | None) -> tuple[float, float]:
        first = round(start_s * INPUT_RATE)
        self.pieces.append((first, audio))
        start, end = first / INPUT_RATE, (first + len(audio)) / INPUT_RATE
        if text is not None:
            self.turns.append({"start": round(start, 6), "end": round(end, 6), "text": text})
        return round(start, 6), round(end, 6)

    def mix(self, total_s: float, skip_last: bool = False) -> np.ndarray:
        """Every placed piece (but the last with ``skip_last``) on a ``total_s`` long track."""
        length = max(
            round(total_s * INPUT_RATE), max((f + len(a) for f, a in self.pieces), default=0)
        )
        out = np.zeros(length, np.float32)
        for first, audio in self.pieces[:-1] if skip_last else self.pieces:
            out[first : first + len(audio)] += audio
        return out


def _uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    return float(rng.uniform(bounds[0], bounds[1]))


@dataclass(frozen=True)
class _Context:
    voices: Voices
    pool: tuple[str, ...]
    piper: bool
    timing: Timing
    families: Families


def _choose_voice(
    rng: np.random.Generator, ctx: _Context, avoid: str | None = None
) -> tuple[str, int]:
    """A voice and rate; with ``avoid``, a voice other than that one (a second talker)."""
    low, high = ctx.timing.rate_wpm
    rate = int(rng.integers(low, high + 1))
    pool = tuple(v for v in ctx.pool if v != avoid)
    if ctx.piper and avoid != PIPER_VOICE and (not pool or rng.random() < PIPER_SHARE):
        return PIPER_VOICE, rate
    return str(pool[int(rng.integers(len(pool)))]), rate


def _build_sample(
    category: str,
    rng: np.random.Generator,
    ctx: _Context,
    content: Any,
) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    t = ctx.timing
    voice, rate = _choose_voice(rng, ctx)
    level = USER_RMS_DBFS + _uniform(rng, (-3.0, 3.0))

    def speak(text: str) -> np.ndarray:
        return at_level(ctx.voices.render(text, voice, rate), level)

    build = _Builder()
    meta: dict[str, Any] = {"category": category}
    extra: dict[str, Any] = {"voice": voice, "rate_wpm": rate}

    if category in OVERLAP_CATEGORIES:
        a_text, user_text = content
        a_start = round(_uniform(rng, t.assistant_start_s), 3)
        a_len = len(ctx.voices.render(a_text, "en-us", 170)) / INPUT_RATE
        u_start = a_start + _uniform(rng, t.overlap_delay_s)
        if category == "background":
            kind, line = user_text
            below = _uniform(rng, BACKGROUND_DB_BELOW)
            audio = ctx.voices.render(line, voice, rate)
            if kind == "tv":
                audio = _band_limit(audio)
            level = USER_RMS_DBFS - below
            audio = at_level(audio, level)
            span = build.place(audio, u_start, None)
            extra.update(
                background={"kind": kind, "text": line, "start": span[0], "end": span[1]},
                background_db_below_user=round(below, 2),
            )
        else:
            if category == "backchannel":
                level -= _uniform(rng, (0.0, 4.0))  # backchannels are often softer
            elif category == "other_directed":
                level -= _uniform(rng, (0.0, 3.0))  # turned away from the robot
            span = build.place(speak(user_text), u_start, user_text)
        # Room to respond after the overlap, the assistant's own turn, within 8-12 s.
        total = span[1] + _uniform(rng, t.trailing_s)
        if t.overlap_total_s[0] > 0:
            total = max(total, a_start + a_len + 0.5)
        total = min(max(total, t.overlap_total_s[0]), t.overlap_total_s[1])
        total = max(total, span[1] + t.trailing_s[0])
        meta.update(
            overlap=[span[0], span[1]],
            expected="respond" if category == "interruption" else "resume",
            assistant_turns=[{"start": a_start, "text": a_text}],
        )
        extra["assistant_duration_s"] = round(a_len, 3)  # at en-us, 170 wpm
    elif category in IDLE_CATEGORIES:
        (kind, line), followup = content
        start = _uniform(rng, t.lead_in_s)
        if category == "background_idle":
            other, other_rate = _choose_voice(rng, ctx, avoid=voice)
            below = _uniform(rng, BACKGROUND_DB_BELOW)
            audio = ctx.voices.render(line, other, other_rate)
            if kind == "tv":
                audio = _band_limit(audio)
            span = build.place(at_level(audio, level - below), start, None)
            extra.update(
                background_voice=other,
                background_db_below_user=round(below, 2),
                background_level_dbfs=round(level - below, 2),
            )
        else:
            softer = _uniform(rng, (0.0, 3.0))  # turned away from the robot
            span = build.place(
                at_level(ctx.voices.render(line, voice, rate), level - softer), start, line
            )
            extra["remark_db_below_user"] = round(softer, 2)
        meta["idle"] = {"start": span[0], "end": span[1], "text": line, "kind": kind}
        end = span[1]
        if followup is not None:
            request, request_kind = followup
            f_start = span[1] + _uniform(rng, IDLE_GAP_S)
            _, end = build.place(speak(request), f_start, request)
            extra["followup"] = request_kind
            trailing = max(_uniform(rng, t.trailing_s), TURN_TAKING_SILENCE_S)
        else:
            trailing = max(_uniform(rng, t.trailing_s), IDLE_SILENCE_S)
        total = end + trailing
    elif category == "pause":
        first, second = content
        start = _uniform(rng, t.lead_in_s)
        _, end1 = build.place(speak(first), start, first)
        gap = _uniform(rng, t.pause_s)
        start2, end2 = build.place(speak(second), end1 + gap, second)
        extra.update(pause=[end1, start2], sentence=f"{first} {second}")
        total = end2 + _uniform(rng, t.trailing_s)
    else:
        if category == "tool_use":
            request: _Request = content
            text = request.text
            meta.update(
                expected_tool_calls=[dict(c) for c in request.calls],
                tools=[tool.name for tool in suite_tools()],
            )
            extra["disfluencies"] = list(request.disfluencies)
        elif category == "delegation":
            text, needs = content
            meta["needs_delegation"] = needs
        else:
            text = content
        _, end = build.place(speak(text), _uniform(rng, t.lead_in_s), text)
        trailing = _uniform(rng, t.trailing_s)
        if category == "turn_taking":
            trailing = max(trailing, TURN_TAKING_SILENCE_S)
        total = end + trailing
    meta["turns"] = build.turns
    extra["level_dbfs"] = round(level, 2)
    # FDB v1.5's clean input: the same input without the overlap event (here the only user
    # speech of an overlap sample, so it is silence, plus the room noise when there is any).
    clean = build.mix(total, skip_last=True) if category in OVERLAP_CATEGORIES else None
    return build.mix(total), clean, {**meta, **extra}


def _contents(category: str, n: int, rng: np.random.Generator, fam: Families) -> list[Any]:
    """What the ``n`` samples of a category say: each bank in a seeded order, no repeats until
    it runs out; delegation labels half and half."""

    def cycle(bank: Sequence[Any]) -> list[Any]:
        order: list[int] = []
        while len(order) < n:
            order.extend(int(i) for i in rng.permutation(len(bank)))
        return [bank[i] for i in order[:n]]

    if category in OVERLAP_CATEGORIES:
        assistant = cycle(fam.assistant_texts)
        if category == "backchannel":
            user: list[Any] = cycle(fam.backchannels)
        elif category == "interruption":
            user = cycle(fam.interruptions)
        elif category == "other_directed":
            remarks = [("vocative", v) for v in fam.vocatives]
            remarks += [("side", s) for s in fam.side_comments]
            names = cycle(fam.other_names)
            user = [
                text.format(name=name) if kind == "vocative" else text
                for (kind, text), name in zip(cycle(remarks), names, strict=True)
            ]
        else:
            lines = [("talker", t) for t in fam.background_talk]
            lines += [("tv", t) for t in fam.background_tv]
            user = cycle(lines)
        return list(zip(assistant, user, strict=True))
    if category in IDLE_CATEGORIES:
        if category == "other_directed_idle":
            names = iter(cycle(fam.other_names))
            remarks = [("vocative", v) for v in fam.vocatives]
            remarks += [("side", s) for s in fam.side_comments]
            remarks += [("side", s) for s in fam.phone_talk]
            said = [
                (kind, text.format(name=next(names)) if kind == "vocative" else text)
                for kind, text in cycle(remarks)
            ]
        else:
            lines = [("talker", t) for t in fam.background_talk]
            lines += [("tv", t) for t in fam.background_tv]
            said = cycle(lines)
        requests = [(q, "question") for q in fam.questions]
        requests += [(d, "delegation") for d in fam.delegate_yes]
        follow = iter(cycle(requests))
        with_request = [i % 2 == 0 for i in range(n)]
        with_request = [with_request[int(i)] for i in rng.permutation(n)]
        return [(s, next(follow) if f else None) for s, f in zip(said, with_request, strict=True)]
    if category == "pause":
        return cycle(fam.paused_sentences)
    if category == "turn_taking":
        return cycle(fam.questions)
    if category == "delegation":
        labels = [True] * (n // 2) + [False] * (n // 2)
        if n % 2:
            labels.append(bool(rng.random() < 0.5))
        labels = [labels[int(i)] for i in rng.permutation(n)]
        yes, no = iter(cycle(fam.delegate_yes)), iter(cycle(fam.delegate_no))
        return [(next(yes) if label else next(no), label) for label in labels]
    if category == "tool_use":
        return cycle(range(len(_TOOL_MAKERS)))  # tool kinds, balanced; requests per sample
    raise ValueError(f"unknown category {category!r}")


def _check_args(
    n: int, seed: int, categories: Sequence[str] | None, purpose: str, voices: str
) -> tuple[str, ...]:
    if purpose not in SEED_RANGES:
        raise ValueError(f"split must be one of {', '.join(SEED_RANGES)}, got {purpose!r}")
    seeds = SEED_RANGES[purpose]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed not in seeds:
        raise ValueError(
            f"seed {seed!r} is outside the {purpose} range [{seeds.start}, {seeds.stop}); "
            f"{purpose} suites must use seeds from it so they never overlap "
            + ", ".join(
                f"{k} [{r.start}, {r.stop})" for k, r in SEED_RANGES.items() if k != purpose
            )
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (samples per category) must be an int >= 1, got {n!r}")
    if voices not in VOICE_SETS:
        raise ValueError(f"voices must be one of {', '.join(VOICE_SETS)}, got {voices!r}")
    chosen = tuple(CATEGORIES if categories is None else dict.fromkeys(categories))
    unknown = [c for c in chosen if c not in CATEGORIES]
    if unknown or not chosen:
        raise ValueError(
            f"unknown or no categories {unknown or list(chosen)}; "
            f"choose from {', '.join(CATEGORIES)}"
        )
    return tuple(c for c in CATEGORIES if c in chosen)


def _prepare_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a folder")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise FileExistsError(
            f"{out} is not empty; choose a new folder (or pass overwrite=True to replace the "
            f"suite in it)"
        )
    for child in out.iterdir():
        if child.is_dir() and (child / METADATA_JSON).is_file():
            shutil.rmtree(child)
    (out / TOOLS_JSON).unlink(missing_ok=True)


def synthesize(
    out: Path,
    n: int,
    seed: int,
    categories: Sequence[str] | None = None,
    *,
    noise: bool = False,
    progress: bool = False,
    split: str | None = None,
    purpose: str | None = None,
    voices: str = "auto",
    compact: bool = False,
    overwrite: bool = False,
) -> Suite:
    """Write a synthetic suite of ``n`` samples per category to ``out`` and load it.

    Sample ids are ``<category>_<index:03d>``. Each sample's metadata records in its unknown
    (ignored) keys the voice and rate used, the speech level and what else was drawn.

    Args:
        out: the suite folder (created; must be empty unless ``overwrite``).
        n: samples per category.
        seed: the suite seed; must lie in ``SEED_RANGES[split]``.
        categories: which categories (default: all, in :data:`CATEGORIES` order).
        noise: add seeded pink-ish room noise at :data:`NOISE_DBFS`; overlap samples then
            get ``clean_input.wav`` (the input without the overlap event, noise kept).
        progress: show a progress bar (tqdm) on stderr.
        split: ``"eval"`` (default) or ``"train"``: which part of the phrase families and
            voices (:data:`FAMILIES`) is drawn from, and which seed range the seed must come
            from. The parts are disjoint: training never sees an evaluation phrase or voice.
        purpose: the former name of ``split`` (either may be given, not both differently).
        voices: ``"auto"`` (the split's espeak-ng voices, plus, for ``eval``, the piper voice
            for about a quarter of the samples when it is installed), ``"espeak"``
            (reproducible without the optional extra) or ``"piper"`` (the neural voice only;
            ``eval`` only).
        compact: use :data:`COMPACT_TIMING` (the shortest timings; for committed suites)
            instead of :data:`TIMING`.
        overwrite: replace the sample folders and ``tools.json`` of an existing suite in ``out``.

    Returns:
        The written suite, as :func:`venus_ros.eval.scenario.load_suite` reads it.

    Raises:
        ValueError: a seed outside the split's range, a bad ``n``, split, category or
            ``voices``.
        FileExistsError: ``out`` is not empty and ``overwrite`` is false.
        venus_ros.core.errors.DeviceError: espeak-ng (or piper, for ``voices="piper"``) is
            not installed.
    """
    from venus_ros.audio.tts import piper_available

    if split is not None and purpose is not None and split != purpose:
        raise ValueError(f"split {split!r} and purpose {purpose!r} disagree; give one")
    split = split or purpose or "eval"
    chosen = _check_args(n, seed, categories, split, voices)
    fam = FAMILIES[split]
    out = Path(out)
    if voices == "piper" and not fam.piper:
        raise ValueError(f"voices='piper': the neural voice is not part of the {split} split")
    use_piper = fam.piper and (voices == "piper" or (voices == "auto" and piper_available()))
    if voices == "piper" and not piper_available():
        from venus_ros.audio.tts import PIPER_INSTALL_HINT
        from venus_ros.core.errors import DeviceError

        raise DeviceError(f"voices='piper' needs the neural voice: run `{PIPER_INSTALL_HINT}`")
    ctx = _Context(
        voices=Voices(),
        pool=() if voices == "piper" else fam.espeak_voices,
        piper=use_piper,
        timing=COMPACT_TIMING if compact else TIMING,
        families=fam,
    )
    _prepare_out(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    bar = _progress(len(chosen) * n, progress)
    try:
        for category in chosen:
            index = CATEGORIES.index(category)
            contents = _contents(category, n, np.random.default_rng([seed, index]), fam)
            for i, content in enumerate(contents):
                rng = np.random.default_rng([seed, index, i + 1])
                if category == "tool_use":
                    content = _tool_request(rng, content, split)
                audio, clean, meta = _build_sample(category, rng, ctx, content)
                meta.update(generator="venus_ros.eval.synth", seed=seed, split=split)
                if compact:
                    meta["compact"] = True
                if noise:
                    hum = room_noise(rng, len(audio))
                    audio = audio + hum
                    clean = None if clean is None else clean + hum
                    meta["noise_dbfs"] = NOISE_DBFS
                else:
                    clean = None  # silence: Sample.clean_audio derives it from the overlap
                peak = float(np.max(np.abs(audio)))
                if clean is not None:
                    peak = max(peak, float(np.max(np.abs(clean))))
                if peak > PEAK_LIMIT:
                    gain = PEAK_LIMIT / peak
                    audio = audio * gain
                    clean = None if clean is None else clean * gain
                    meta["gain_db"] = round(20 * math.log10(gain), 2)
                write_sample(out, f"{category}_{i:03d}", audio, INPUT_RATE, meta, clean)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    if "tool_use" in chosen:
        write_tools(out, suite_tools())
    return load_suite(out)


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is a nicety
        return None
    return tqdm(total=total, desc="synthesizing", unit="sample")
