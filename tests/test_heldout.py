"""The near-duplicate filter that keeps evaluation phrases out of training."""

from __future__ import annotations

from venus_ros.training.heldout import HeldOut


def test_equal_and_near_long_texts_are_held_out_but_not_unrelated_ones() -> None:
    held = HeldOut(["whoops i dropped a fork", "uh huh", "the bus leaves from platform four"])
    assert "uh huh" in held  # equal, however short
    assert "oops i dropped a fork" in held  # near in characters
    assert "the bus leaves from platform four today" in held  # near in content words
    assert "oops i dropped my spoon on the floor" not in held
    assert "uh huh yeah" not in held  # short texts are held out only when equal
    assert "could you turn the kitchen light off" not in held
    assert 3 not in held  # not a text


def test_the_trainers_use_no_text_near_an_evaluation_phrase() -> None:
    from venus_ros.training.addressee import asr_form, evaluation_phrases, training_texts

    held = HeldOut(evaluation_phrases())
    texts, _, _ = training_texts()
    near = [t for t in texts if asr_form(t) in held]
    assert not near, near[:5]


def test_the_interruption_trainer_uses_no_phrase_near_an_evaluation_phrase() -> None:
    from venus_ros.training.addressee import asr_form, evaluation_phrases
    from venus_ros.training.interruption import training_phrases

    held = HeldOut(evaluation_phrases())
    phrases = training_phrases()
    assert len(phrases) > 1000
    near = [p.text for p in phrases if asr_form(p.text) in held]
    assert not near, near[:5]
