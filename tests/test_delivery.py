"""Delivery of backend replies through the real DuplexLoop: played, interrupted, stale, withdrawn.

The loop is driven unit by unit with the ListFrontend of ``test_duplex``; the tests play the
speaker's part by acknowledging chunks, so "delivered" can only follow an acknowledgement.
"""

from __future__ import annotations

import pytest
from test_duplex import LISTEN, YIELD, Rig, speak

from venus_ros.core.delivery import BackendReply, DeliveryOutcome, DeliveryRules, Outcome
from venus_ros.core.duplex import DuplexConfig
from venus_ros.core.playback import PlaybackAck
from venus_ros.core.timeline import Kind

N = 2400  # samples per spoken chunk in these tests


class DeliveryRig(Rig):
    """A Rig whose loop reports delivery outcomes into :attr:`outcomes`."""

    def __init__(self, outputs: list[object], rules: DeliveryRules | None = None) -> None:
        super().__init__(outputs, config=DuplexConfig(delivery=rules or DeliveryRules()))
        self.outcomes: list[DeliveryOutcome] = []
        self.loop._on_delivery = self.outcomes.append

    def play(self, unit: int, fraction: float = 1.0, flushed: bool = False) -> None:
        """The speaker reports unit ``unit``'s chunk played (in part, if flushed)."""
        played = round(N * fraction)
        assert self.loop.acknowledge(PlaybackAck(unit, played, N, flushed=flushed or played < N))

    def kinds(self) -> list[tuple[str, Outcome]]:
        return [(o.task_id, o.outcome) for o in self.outcomes]

    def inserted(self, unit: int) -> tuple[str, ...]:
        return self.frontend.units[unit].texts


ANSWER = "It is twenty degrees in Lisbon today."
WORDS = ANSWER.split()


def answer_in(units: int, eot_last: bool = True) -> list[object]:
    """A turn speaking ANSWER over ``units`` units."""
    per = len(WORDS) // units
    pieces = [
        " ".join(WORDS[i * per : (i + 1) * per if i < units - 1 else None]) + " "
        for i in range(units)
    ]
    return [speak(p, N, eot=eot_last and i == units - 1) for i, p in enumerate(pieces)]


def test_a_reply_counts_as_delivered_only_once_its_turn_was_played_in_full() -> None:
    rig = DeliveryRig([LISTEN, *answer_in(2), LISTEN])
    rig.loop.offer_backend(BackendReply("t1", ANSWER, topic="weather"))
    rig.step()  # unit 0: inserted, the frontend keeps listening
    assert rig.inserted(0) == (f"<backend>{ANSWER}</backend>",)
    rig.step()  # unit 1: the turn that voices it starts
    rig.step()  # unit 2: it finishes
    rig.step()
    assert rig.outcomes == []  # the speaker has not said anything yet
    rig.play(1)
    assert rig.outcomes == []
    rig.play(2)
    assert rig.outcomes == [DeliveryOutcome("t1", Outcome.DELIVERED, "played in full", 1, 1.0)]
    (record,) = rig.payloads(Kind.DELIVERY)
    assert record["outcome"] == "delivered" and record["topic"] == "weather"


def test_a_reply_interrupted_early_is_offered_again_once_then_dropped() -> None:
    outputs = [LISTEN, *answer_in(2, eot_last=False), YIELD, LISTEN, *answer_in(2, False), YIELD]
    rig = DeliveryRig(outputs)
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    for _ in range(3):
        rig.step()
    rig.step()  # unit 3: the user barged in, the frontend yields: the speaker flushes
    rig.play(1, fraction=0.25)  # a quarter of the first chunk was heard
    rig.play(2, fraction=0.0)
    assert rig.kinds() == [("t1", Outcome.REOFFERED)]
    assert rig.outcomes[0].reason.startswith("interrupted: ")
    assert rig.outcomes[0].heard_fraction is not None and rig.outcomes[0].heard_fraction < 0.5

    rig.step()  # unit 4: listening again: offered a second time
    assert rig.inserted(4) == (f"<backend>{ANSWER}</backend>",)
    (_, again) = rig.payloads(Kind.BACKEND_INSERT)
    assert again["attempt"] == 2
    rig.step()
    rig.step()
    rig.step()  # interrupted again
    rig.play(5, fraction=0.0)
    rig.play(6, fraction=0.0)
    assert rig.kinds() == [("t1", Outcome.REOFFERED), ("t1", Outcome.DROPPED)]
    assert "offered 2 times" in rig.outcomes[-1].reason
    rig.step()
    assert rig.loop.pending_replies == 0


def test_a_reply_interrupted_after_most_of_it_was_heard_counts_as_delivered() -> None:
    rig = DeliveryRig([LISTEN, *answer_in(2, eot_last=False), YIELD])
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    for _ in range(4):
        rig.step()
    rig.play(1)
    rig.play(2, fraction=0.6)
    (outcome,) = rig.outcomes
    assert outcome.outcome is Outcome.DELIVERED
    assert outcome.reason.startswith("interrupted: ") and outcome.heard_fraction >= 0.5


def test_a_reply_that_waited_too_long_is_dropped_as_stale_not_spoken() -> None:
    rig = DeliveryRig([speak("I am ", N), speak("talking.", N, eot=True), LISTEN])
    rig.step()
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    rig.clock.advance(DeliveryRules().reply_max_age_s + 1)
    rig.step()
    rig.step()  # the first eligible boundary: too late
    assert rig.inserted(2) == ()
    assert rig.kinds() == [("t1", Outcome.DROPPED)]
    assert rig.outcomes[0].reason.startswith("stale: ")


def test_a_withdrawn_reply_is_never_inserted_and_an_early_withdrawal_refuses_it() -> None:
    rig = DeliveryRig([speak("Hmm ", N), speak("well.", N, eot=True), LISTEN, LISTEN])
    rig.step()
    rig.loop.offer_backend(BackendReply("t1", "Old answer."))
    assert rig.loop.withdraw_backend("t1", "superseded by task t2")
    assert rig.loop.withdraw_backend("t3", "the user cancelled")  # before it even arrived
    rig.loop.offer_backend(BackendReply("t3", "Cancelled answer."))
    for _ in range(3):
        rig.step()
    assert all(rig.inserted(i) == () for i in range(3))
    assert rig.kinds() == [("t1", Outcome.WITHDRAWN), ("t3", Outcome.WITHDRAWN)]
    assert [o.reason for o in rig.outcomes] == ["superseded by task t2", "the user cancelled"]


def test_a_reply_already_inserted_cannot_be_withdrawn() -> None:
    rig = DeliveryRig([LISTEN, speak(ANSWER, N, eot=True)])
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    rig.step()
    assert not rig.loop.withdraw_backend("t1", "too late")
    rig.step()
    rig.play(1)
    assert rig.kinds() == [("t1", Outcome.DELIVERED)]


def test_a_duplicate_offer_is_ignored() -> None:
    rig = DeliveryRig([LISTEN, speak(ANSWER, N, eot=True), LISTEN])
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    rig.loop.offer_backend(BackendReply("t1", ANSWER))  # e.g. re-offered by a restarted harness
    assert rig.loop.pending_replies == 1
    rig.step()
    rig.step()
    rig.play(1)
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    rig.step()
    assert rig.inserted(2) == ()
    assert rig.kinds() == [("t1", Outcome.DELIVERED)]
    reasons = [p.get("reason") for p in rig.payloads(Kind.BACKEND_INSERT)]
    assert reasons.count("duplicate") == 2


def test_a_reply_no_turn_voices_comes_back_and_is_dropped_after_its_retries() -> None:
    rules = DeliveryRules(reoffer_limit=1)
    rig = DeliveryRig([LISTEN] * 30, rules)
    rig.loop.offer_backend(BackendReply("t1", ANSWER))
    rig.run()
    inserted_at = [i for i, unit in enumerate(rig.frontend.units) if unit.texts]
    assert inserted_at == [0, 10]
    assert rig.kinds() == [("t1", Outcome.REOFFERED), ("t1", Outcome.DROPPED)]
    assert rig.outcomes[0].reason == "never voiced"


@pytest.mark.parametrize(
    ("field", "value"),
    [("heard_enough", 0.0), ("heard_enough", 1.5), ("reoffer_limit", -1), ("reply_max_age_s", 0)],
)
def test_delivery_rules_reject_nonsense(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        DeliveryRules(**{field: value})
