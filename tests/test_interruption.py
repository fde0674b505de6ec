"""The floor policy's interruption head: its trainer (venus_ros/training/interruption.py), the
committed head, the policy stopping between unit boundaries on it, and the frontend doing so
on real speech."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_floor_policy import CountingEmbedder, make_obs, overlapping

from venus_ros.frontends.cascade.floor import (
    INTERRUPTION_PATH,
    LEVEL_MIN_SPEECH_S,
    MODEL_PATH,
    SUBSTEPS,
    UTTERANCE_GAP_S,
    TrainedFloorPolicy,
    UtteranceLevel,
)
from venus_ros.frontends.cascade.texthead import TextHead
from venus_ros.frontends.policy import FloorAction, FloorObservation
from venus_ros.training.addressee import EXTRA_NOT_ADDRESSED, asr_form, evaluation_phrases
from venus_ros.training.interruption import (
    FINAL_S,
    KINDS,
    MAX_FIRE,
    Row,
    choose_threshold,
    load_corpus,
    recognised_rows,
    train_interruption,
    training_phrases,
)

# ----------------------------------------------------------------------------- the trainer


def test_training_phrases_are_training_material_only() -> None:
    phrases = training_phrases()
    kinds = {p.kind for p in phrases}
    assert kinds == set(KINDS)
    held_out = evaluation_phrases()
    for phrase in phrases:
        form = " ".join(
            "".join(c for c in w if c.isalnum() or c == "'") for w in phrase.text.lower().split()
        )
        assert form not in held_out, phrase
    # every group (a phrase and its variants, e.g. one vocative with every name) is one kind
    groups: dict[int, set[str]] = {}
    for p in phrases:
        groups.setdefault(p.group, set()).add(p.kind)
    assert all(len(k) == 1 for k in groups.values())


def test_the_hand_written_corpus_is_large_varied_and_trained_on() -> None:
    corpus = load_corpus()
    assert len(corpus["interruption"]) >= 300 and len(corpus["backchannel"]) >= 150
    assert corpus["other_directed"] and corpus["background"]
    phrases = training_phrases()
    kind_of = {asr_form(p.text): p.kind for p in phrases}
    # the same words are never of two kinds (the first bank to name them keeps them)
    assert len(kind_of) == len({(asr_form(p.text), p.kind) for p in phrases})
    for kind, texts in corpus.items():
        kept = [t for t in texts if kind_of.get(asr_form(t)) == kind]
        assert len(kept) >= 0.9 * len(texts), kind
    # remarks to others that open like a cut-in ("No, ...", "Sorry, ...") are not negatives
    remarks = {p.text for p in phrases if p.kind == "other_directed"}
    openers = [t for t in EXTRA_NOT_ADDRESSED if asr_form(t).split()[:1] in (["no"], ["sorry"])]
    assert not remarks & set(openers)


def test_a_malformed_corpus_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("version: 1\nbackchannels:\n  - yes\n", encoding="utf-8")
    with pytest.raises(ValueError, match="lists of strings"):
        load_corpus(bad)  # an unquoted yes is YAML's true
    bad.write_text("interruptions: [Stop.]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="version 1"):
        load_corpus(bad)
    bad.write_text("version: 1\ninterruptions: [a\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not YAML"):
        load_corpus(bad)
    good = tmp_path / "g.yaml"
    good.write_text(
        "version: 1\ninterruptions:\n  stop: [Stop it now.]\n  ask:\n    - What now?\n"
        "backchannels: [mm-hmm]\n",
        encoding="utf-8",
    )
    corpus = load_corpus(good)
    assert corpus["interruption"] == ("Stop it now.", "What now?")
    assert corpus["backchannel"] == ("mm-hmm",) and corpus["background"] == ()
    texts = {p.text: p.kind for p in training_phrases(corpus)}
    assert texts["Stop it now."] == "interruption" and "What now?" in texts


def _rows(kind: str, sample: int, texts: list[str]) -> list[Row]:
    return [Row(t, kind, sample, sample, 0.3 + 0.2 * i) for i, t in enumerate(texts)]


def test_threshold_is_the_smallest_that_keeps_every_negative_kind_within_its_limit() -> None:
    rows = [
        *_rows("interruption", 0, ["a", "b"]),
        *_rows("interruption", 1, ["c"]),
        *_rows("backchannel", 2, ["d", "e"]),
        *_rows("backchannel", 3, ["f"]),
        *_rows("other_directed", 4, ["g"]),
    ]
    scores = np.array([0.6, 0.95, 0.8, 0.7, 0.85, 0.5, 0.9])
    limits = {"backchannel": 0.0, "other_directed": 0.0}
    threshold, final, rates = choose_threshold(scores, rows, limits)
    # backchannel sample 2 reaches 0.85 and the remark 0.9: above both, 0.95 is the only choice
    assert threshold == pytest.approx(0.95) and final == np.inf  # no finals: none is needed
    assert rates["interruption"] == pytest.approx(0.5)
    assert rates["backchannel"] == 0.0
    looser = {"backchannel": 0.5, "other_directed": 1.0}
    threshold, final, rates = choose_threshold(scores, rows, looser)
    assert threshold == pytest.approx(0.6)  # one backchannel sample of two may fire
    assert rates["interruption"] == 1.0 and rates["backchannel"] == 0.5


def test_final_transcripts_get_their_own_threshold_where_that_catches_more() -> None:
    """A short command whose partials stay unsure but whose whole utterance reads clearly is
    caught on its final, at a threshold the negatives' finals stay under."""
    rows = [
        *_rows("interruption", 0, ["stop"]),
        Row("quiet please", "interruption", 1, 1, 0.3),
        Row("quiet please.", "interruption", 1, 1, FINAL_S),
        *_rows("backchannel", 2, ["uh"]),
        Row("uh-huh", "backchannel", 2, 2, FINAL_S),
        Row("Sam, stop it.", "other_directed", 3, 3, 0.3),
        Row("Sam, stop it now.", "other_directed", 3, 3, FINAL_S),  # a name: never fires
    ]
    scores = np.array([0.95, 0.7, 0.8, 0.75, 0.6, 0.5, 0.99])
    limits = {"backchannel": 0.0, "other_directed": 0.0}
    threshold, final, rates = choose_threshold(scores, rows, limits)
    # partials: 0.75 (the backchannel) must not fire, so 0.95; finals: above 0.6, up to 0.8
    assert threshold == pytest.approx(0.95)
    assert final == pytest.approx(0.8)  # the largest final threshold that still catches it
    assert rates == {"interruption": 1.0, "backchannel": 0.0, "other_directed": 0.0}
    # a negative whose final reads like the command leaves finals to the partial threshold
    scores[4] = 0.85
    threshold, final, rates = choose_threshold(scores, rows, limits)
    assert (threshold, final) == (pytest.approx(0.95), np.inf)
    assert rates["interruption"] == 0.5


def test_partials_are_what_whisper_hears_of_the_first_second() -> None:
    phrases = [p for p in training_phrases() if p.text in ("Stop.", "mm-hmm")]
    assert len(phrases) == 2
    rows = recognised_rows(phrases, seed=3)
    assert rows and {r.kind for r in rows} == {"interruption", "backchannel"}
    assert all(r.prefix_s <= 1.1 or r.prefix_s == FINAL_S for r in rows)
    # each spoken sample ends with its final transcript, of the whole utterance
    for sample in {r.sample for r in rows}:
        assert [r.prefix_s for r in rows if r.sample == sample][-1] == FINAL_S
    stops = [r.text.lower() for r in rows if r.kind == "interruption"]
    assert any("stop" in t for t in stops), stops
    # the same seed gives the same partials
    again = recognised_rows(phrases, seed=3)
    assert again == rows


def test_training_writes_a_head_that_separates_its_kinds(tmp_path: Path) -> None:
    chosen = training_phrases()
    phrases = [p for p in chosen if p.kind == "interruption" and len(p.text) < 30][:6]
    phrases += [p for p in chosen if p.kind == "backchannel"][:6]
    report = train_interruption(tmp_path, seed=1, phrases=phrases, cache=tmp_path / "p.json")
    head = TextHead.load(tmp_path / INTERRUPTION_PATH.name)
    assert 0.5 <= head.threshold <= 1.0
    assert head.final_threshold == report["final_threshold"]
    assert report["fire_rates"]["backchannel"] <= MAX_FIRE["backchannel"]
    assert (tmp_path / "interruption_report.md").read_text().startswith("# Interruption head")


# -------------------------------------------------------------------------- the committed head


def test_committed_head_is_consistent_with_the_floor_policy() -> None:
    head = TextHead.load(INTERRUPTION_PATH)
    assert 0.5 <= head.threshold < 1.0
    # the trainer chose a threshold for final transcripts too (inf: they never stop it)
    assert head.final_threshold is not None and head.final_threshold >= 0.5
    report = INTERRUPTION_PATH.with_name("interruption_report.md").read_text()
    assert f"thresholds {head.threshold:.4f} on partials" in report
    policy = TrainedFloorPolicy()
    assert policy.interruption is not None and policy.substeps == SUBSTEPS
    assert head.embedder == policy.features.embedder.name


# ----------------------------------------------------------------------------- the policy


def fixed_head(
    score: float, threshold: float = 0.8, final_threshold: float | None = None
) -> TextHead:
    """A head that gives every text ``score``."""
    logit = float(np.log(score / (1 - score)))
    return TextHead(np.zeros(384), logit, threshold, "", final_threshold=final_threshold)


def policy_with(
    tmp_path: Path, score: float, final_threshold: float | None = None
) -> TrainedFloorPolicy:
    path = tmp_path / f"head-{score}-{final_threshold}.npz"
    fixed_head(score, final_threshold=final_threshold).save(path)
    policy = TrainedFloorPolicy(MODEL_PATH, embedder=CountingEmbedder(), interruption=path)
    policy.reset()
    return policy


def spoken_then_ended(**final: Any) -> tuple[FloorObservation, FloorObservation]:
    """A sub-step of speech over the turn, and one after it ended (with ``final`` changes)."""
    spoken = overlapping(substep=1, substeps=SUBSTEPS, turn_overlap_s=0.4)
    ended = replace(
        spoken,
        substep=3,
        user_speech_s=0.0,
        user_speech_db=-120.0,
        user_speaking=False,
        trailing_silence_s=0.4,
    )
    return spoken, replace(ended, **final)


def test_any_text_is_read_on_the_interruption_head_and_the_addressee_gate_asks_it(
    tmp_path: Path,
) -> None:
    """The cascade's addressee gate asks the floor's interruption head whether the words it
    stopped for read as a cut-in before it takes the stop back as an aside."""
    from venus_ros.frontends.cascade.frontend import CascadeFrontend, CascadeParts

    policy = policy_with(tmp_path, 0.7)
    assert policy.interruption_score("Sorry to cut in, but the") == pytest.approx(0.7)
    headless = TrainedFloorPolicy(MODEL_PATH, embedder=CountingEmbedder(), interruption=False)
    assert headless.interruption_score("Stop.") is None
    parts = CascadeParts(policy, lambda text: False, None, "trained", "all", ())
    gate = CascadeFrontend(parts, asr=False).addressee_gate
    assert gate.cut_in is not None and gate.cut_in("Wait, what?") == pytest.approx(0.7)


def test_policy_stops_between_boundaries_on_a_confident_head(tmp_path: Path) -> None:
    sub = overlapping(substep=1, substeps=SUBSTEPS, transcript="well then", turn_overlap_s=0.4)
    sure = policy_with(tmp_path, 0.95)
    assert sure.substeps == SUBSTEPS
    assert sure.decide(sub) is FloorAction.YIELD
    assert sure.last_interruption == pytest.approx(0.95)
    # the boundary after the stop sees the yield: the answer follows the user's end
    after = make_obs(unit_index=4, t=5.0, trailing_silence_s=1.2, user_turn_speech_s=0.6)
    assert sure.decide(after) is FloorAction.START_SPEAKING
    unsure = policy_with(tmp_path, 0.5)
    assert unsure.decide(sub) is FloorAction.KEEP_SPEAKING
    # no words yet, too little overlap, or far below the user's level: the head is not asked
    for obs in (
        replace(sub, transcript=""),
        replace(sub, turn_overlap_s=0.1),
        replace(sub, user_speech_db=-45.0),
    ):
        fresh = policy_with(tmp_path, 0.95)
        assert fresh.decide(obs) is FloorAction.KEEP_SPEAKING, obs
        assert fresh.last_interruption is None
    # while listening the head has no say
    listening = make_obs(substep=1, substeps=SUBSTEPS, transcript="wait", user_speaking=True)
    assert policy_with(tmp_path, 0.95).decide(listening) is FloorAction.KEEP_LISTENING


def test_words_read_as_a_remark_are_not_yielded_to_on_how_they_sound(tmp_path: Path) -> None:
    """The boundary model yields on how speech over the turn sounds; words the interruption
    head reads as a remark (below REMARK_SCORE) hold that yield back until they read otherwise."""
    from venus_ros.frontends.cascade.floor import REMARK_SCORE

    boundary = overlapping(substep=4, substeps=SUBSTEPS, transcript="Where is my pen?")

    def policy(score: float) -> TrainedFloorPolicy:
        path = tmp_path / f"head-{score}.npz"
        fixed_head(score).save(path)
        # a boundary model that yields at every boundary with speech over the turn
        return TrainedFloorPolicy(
            MODEL_PATH, embedder=CountingEmbedder(), interruption=path, yield_threshold=0.0,
            yield_count=1,
        )  # fmt: skip

    remark = policy(REMARK_SCORE - 0.05)
    assert remark.decide(boundary) is FloorAction.KEEP_SPEAKING
    # no words read at this boundary: the boundary model decides
    assert remark.decide(replace(boundary, transcript="")) is FloorAction.YIELD
    unsure = policy(REMARK_SCORE + 0.05)  # neither a remark nor an interruption: as before
    assert unsure.decide(boundary) is FloorAction.YIELD
    assert unsure.last_interruption == pytest.approx(REMARK_SCORE + 0.05)


def test_a_final_transcript_over_the_turn_is_read_when_there_is_no_partial(
    tmp_path: Path,
) -> None:
    """A short "Stop." ends before its partial: the final is read, at the level it was said."""
    spoken, ended = spoken_then_ended(user_text="Stop.")
    policy = policy_with(tmp_path, 0.95)
    assert policy.decide(spoken) is FloorAction.KEEP_SPEAKING  # no words yet
    assert policy.decide(ended) is FloorAction.YIELD
    # the same final after speech far below the user's level (a TV) does not stop it
    quiet = policy_with(tmp_path, 0.95)
    assert quiet.decide(replace(spoken, user_speech_db=-45.0)) is FloorAction.KEEP_SPEAKING
    assert quiet.decide(ended) is FloorAction.KEEP_SPEAKING
    assert quiet.last_interruption is None
    # finals said before the turn (left in user_text by a backend reply) are not read over it
    earlier = policy_with(tmp_path, 0.95)
    assert earlier.decide(make_obs(user_text="Stop.", user_turn_speech_s=0.5)) in (
        FloorAction.KEEP_LISTENING,
        FloorAction.START_SPEAKING,
    )
    assert earlier.decide(ended) is FloorAction.KEEP_SPEAKING
    assert earlier.decide(replace(ended, user_text="Stop. Wait.")) is FloorAction.YIELD


def test_a_final_is_read_at_the_level_of_its_words_not_of_a_fading_end(tmp_path: Path) -> None:
    """The unit that holds an utterance's last frames can hold a tenth of a second of its
    fading end, far below its words: the level stays that of the latest unit with at least
    LEVEL_MIN_SPEECH_S of speech, so the final is read; a whole utterance that quiet is not."""
    spoken = overlapping(substep=1, substeps=SUBSTEPS, turn_overlap_s=0.6)
    tail = replace(
        spoken,
        substep=2,
        user_speech_s=0.1,
        user_speech_db=-40.0,
        user_speaking=False,
        trailing_silence_s=0.2,
        turn_overlap_s=0.7,
    )
    ended = replace(tail, substep=3, user_text="Quiet, please.")
    policy = policy_with(tmp_path, 0.95)
    assert policy.decide(spoken) is FloorAction.KEEP_SPEAKING  # no words yet
    assert policy.decide(tail) is FloorAction.KEEP_SPEAKING
    assert policy.decide(ended) is FloorAction.YIELD
    assert LEVEL_MIN_SPEECH_S > 0.1
    far = policy_with(tmp_path, 0.95)  # the words themselves were that quiet: a TV
    assert far.decide(replace(spoken, user_speech_db=-40.0)) is FloorAction.KEEP_SPEAKING
    assert far.decide(tail) is FloorAction.KEEP_SPEAKING
    assert far.decide(ended) is FloorAction.KEEP_SPEAKING and far.last_interruption is None
    # a quiet onset with words already (less than LEVEL_MIN_SPEECH_S so far) is that quiet
    onset = replace(tail, trailing_silence_s=0.0, user_speech_s=0.19, transcript="No.")
    assert policy_with(tmp_path, 0.95).decide(onset) is FloorAction.KEEP_SPEAKING
    # a new utterance, after a pause that ends the loud one, is read at its own level
    loud = policy_with(tmp_path, 0.95)
    assert loud.decide(spoken) is FloorAction.KEEP_SPEAKING
    pause = replace(tail, user_speech_s=0.0, trailing_silence_s=UTTERANCE_GAP_S)
    assert loud.decide(pause) is FloorAction.KEEP_SPEAKING
    assert loud.decide(onset) is FloorAction.KEEP_SPEAKING
    assert loud.decide(replace(onset, user_speech_db=-25.0)) is FloorAction.YIELD


def test_an_utterance_level_is_its_loudest_unit_with_enough_speech() -> None:
    level = UtteranceLevel()
    assert level.db is None
    level.update(overlapping(user_speech_s=0.1, user_speech_db=-40.0))
    assert level.db == -40.0  # only an onset so far
    level.update(overlapping(user_speech_s=0.5, user_speech_db=-24.0))
    level.update(overlapping(user_speech_s=0.6, user_speech_db=-27.0))
    level.update(overlapping(user_speech_s=0.1, user_speech_db=-38.0, trailing_silence_s=0.3))
    level.update(overlapping(user_speech_s=0.0, trailing_silence_s=0.5))
    assert level.db == -24.0  # the fading end and the silence after it change nothing
    level.update(overlapping(user_speech_s=0.0, trailing_silence_s=UTTERANCE_GAP_S))
    assert level.db == -24.0  # kept until new speech
    level.update(overlapping(user_speech_s=0.3, user_speech_db=-33.0, trailing_silence_s=0.0))
    assert level.db == -33.0
    level.reset()
    assert level.db is None
    # "Wait." across a boundary: its onset at its level, its fading end far below, neither
    # unit with LEVEL_MIN_SPEECH_S of speech: the word is read at its onset's level
    level.update(overlapping(user_speech_s=0.19, user_speech_db=-23.0))
    level.update(overlapping(user_speech_s=0.16, user_speech_db=-33.0))
    assert level.db == -23.0


def test_a_final_transcript_is_read_against_the_heads_final_threshold(tmp_path: Path) -> None:
    """The head may be surer of a whole utterance than of a partial: its final threshold
    applies where the final is read, the partial threshold to partials."""
    spoken, ended = spoken_then_ended(user_text="Is it safe?")
    partial = replace(spoken, transcript="is it")
    lower = policy_with(tmp_path, 0.75, final_threshold=0.7)
    assert lower.decide(partial) is FloorAction.KEEP_SPEAKING  # 0.75 < 0.8 on a partial
    assert lower.decide(ended) is FloorAction.YIELD  # 0.75 >= 0.7 on the final
    never = policy_with(tmp_path, 0.95, final_threshold=float("inf"))
    asked = replace(ended, user_text="Is that far?")
    assert never.decide(asked) is FloorAction.KEEP_SPEAKING  # finals never stop it
    assert never.decide(replace(partial, transcript="is it far")) is FloorAction.YIELD
    # written and read back with the head; an older head without one reads finals as partials
    head = fixed_head(0.9, final_threshold=0.7)
    head.save(tmp_path / "h.npz")
    loaded = TextHead.load(tmp_path / "h.npz")
    assert loaded.final_threshold == pytest.approx(0.7)
    assert loaded.threshold_for(final=True) == pytest.approx(0.7)
    assert loaded.threshold_for(final=False) == pytest.approx(0.8)
    fixed_head(0.9).save(tmp_path / "old.npz")
    assert TextHead.load(tmp_path / "old.npz").threshold_for(final=True) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="final_threshold"):
        fixed_head(0.9, final_threshold=0.0)


def read_as_partial(tmp_path: Path, spoken: FloorObservation, text: str) -> FloorAction:
    """What a policy whose head reads everything as no interruption does with ``text`` as the
    partial transcript of speech over its turn."""
    return policy_with(tmp_path, 0.2).decide(replace(spoken, transcript=text))


def read_as_final(
    tmp_path: Path, spoken: FloorObservation, ended: FloorObservation, text: str
) -> FloorAction:
    """As :func:`read_as_partial`, with ``text`` the final transcript after the speech ended."""
    policy = policy_with(tmp_path, 0.2)
    policy.decide(spoken)
    return policy.decide(replace(ended, user_text=text))


def test_a_whole_utterance_that_only_asks_to_stop_or_wait_stops_the_assistant(
    tmp_path: Path,
) -> None:
    """Whatever the head's score, a final made only of a command ("Enough.") over the turn
    stops the assistant; a back-channel or a question does not, nor a command far below the
    user's level (a TV); a partial asking to stop, be quiet or wait does, one saying never mind
    does not (it may go on: "Never mind, I'll do it myself")."""
    spoken, ended = spoken_then_ended()
    for text, action in (
        ("Enough.", FloorAction.YIELD),
        ("Okay, hold up, please.", FloorAction.YIELD),
        ("Mm-hmm. Stop.", FloorAction.YIELD),
        ("Fair enough.", FloorAction.KEEP_SPEAKING),
        ("Okay.", FloorAction.KEEP_SPEAKING),
        ("Is that far?", FloorAction.KEEP_SPEAKING),
    ):
        assert read_as_final(tmp_path, spoken, ended, text) is action, text
    far = policy_with(tmp_path, 0.2)
    far.decide(replace(spoken, user_speech_db=-45.0))
    assert far.decide(replace(ended, user_text="Enough.")) is FloorAction.KEEP_SPEAKING
    for text, action in (
        ("Hang on.", FloorAction.YIELD),
        ("Just a second.", FloorAction.YIELD),
        ("Never mind.", FloorAction.KEEP_SPEAKING),
        ("Enough.", FloorAction.YIELD),  # to stop or be quiet: at once
        ("Okay, quiet, please.", FloorAction.YIELD),
        ("Fair enough.", FloorAction.KEEP_SPEAKING),
    ):
        assert read_as_partial(tmp_path, spoken, text) is action, text


def test_a_command_that_goes_on_to_ask_a_question_stops_the_assistant(tmp_path: Path) -> None:
    """Whatever the head's score, asking to wait or stop and then asking something ("Hang on,
    can I ...") interrupts, as a partial (no "?" yet) and as a final; a wait that goes on with the
    speaker's own business ("Hold on, my phone is ringing", "Hang on, let me find a pen, what
    was the address?") does not, nor a question to someone named."""
    spoken, ended = spoken_then_ended()
    for text, action in (
        ("Hang on, can I", FloorAction.YIELD),
        ("Just a moment. How long", FloorAction.YIELD),
        ("Yeah. Wait, is that per person?", FloorAction.YIELD),
        ("Hmm, stop, does it", FloorAction.YIELD),
        ("Hold on, my phone is", FloorAction.KEEP_SPEAKING),
        ("Hang on, let me find a pen, what was the address?", FloorAction.KEEP_SPEAKING),
        ("Hang on, Sam, where are the keys?", FloorAction.KEEP_SPEAKING),
        ("Is that far?", FloorAction.KEEP_SPEAKING),
    ):
        assert read_as_partial(tmp_path, spoken, text) is action, text
        assert read_as_final(tmp_path, spoken, ended, text) is action, text
    # the recogniser's dots alone ("...", ". . .") are no words to read: no error, no stop
    for text in ("...", ". . ."):
        assert read_as_partial(tmp_path, spoken, text) is FloorAction.KEEP_SPEAKING


class NamedEmbedder(CountingEmbedder):
    name = "stand-in/hash"


def test_speech_calling_someone_else_is_never_yielded_to(tmp_path: Path) -> None:
    sub = overlapping(substep=1, substeps=SUBSTEPS, turn_overlap_s=0.6)
    remark = replace(sub, transcript="Sam, can you grab the mail?")
    policy = policy_with(tmp_path, 0.95)
    assert policy.said_to_someone_else(remark)
    assert policy.decide(remark) is FloorAction.KEEP_SPEAKING
    # nor at a boundary, whatever the boundary model says, after a backchannel too
    boundary = overlapping(user_text="Yeah, okay. Sam, can you grab the mail?")
    assert policy.said_to_someone_else(boundary)
    assert policy.decide(boundary) is FloorAction.KEEP_SPEAKING
    # calling the assistant itself is an interruption
    called = replace(sub, transcript="Sam, hi. Venus, stop.")
    assert not policy.said_to_someone_else(called)
    assert policy_with(tmp_path, 0.95).decide(called) is FloorAction.YIELD


def test_policy_refuses_a_head_from_another_embedder(tmp_path: Path) -> None:
    path = tmp_path / "other.npz"
    TextHead(np.zeros(384), 0.0, 0.7, "some/other-embedder").save(path)
    with pytest.raises(ValueError, match="retrain it"):
        TrainedFloorPolicy(MODEL_PATH, embedder=NamedEmbedder(), interruption=path)
    with pytest.raises(ValueError, match="interruption head"):
        TrainedFloorPolicy(MODEL_PATH, embedder=CountingEmbedder(), interruption=tmp_path / "no")
    assert TrainedFloorPolicy(MODEL_PATH, text=False).substeps == 1


# ------------------------------------------------------------------------ on real speech


ANSWER = (
    "The ferry leaves from the north pier every forty minutes, and the last one back goes at "
    "half past ten, so you have plenty of time for dinner on the island before you return."
)


def _talk_over(tmp_path: Path, text: str, voice: str) -> tuple[float, list[float]]:
    """The assistant answers from 1.0 s; the user says ``text`` over it from 3.0 s. Returns
    the onset and the session times (fake clock) of the frontend's early stops."""
    from speech import espeak_16k

    from venus_ros.core.clock import FakeClock
    from venus_ros.core.session import SessionConfig, run_offline
    from venus_ros.core.timeline import Kind
    from venus_ros.frontends import make_frontend

    said = espeak_16k(text, tmp_path / "said.wav", voice=voice, wpm=170)
    onset = 3.0
    audio = np.zeros(12 * 16000, np.float32)
    start = round(onset * 16000)
    audio[start : start + said.size] = 0.3 * said / np.abs(said).max()
    frontend = make_frontend("cascade", clock=FakeClock())
    try:
        frontend.schedule_turns([(1.0, ANSWER)])
        session = run_offline(
            audio, 16000, frontend, clock=FakeClock(), config=SessionConfig(timeline_window_s=60)
        )
        stops = [r.t for r in session.timeline.snapshot().of_kind(Kind.FLUSH) if r.payload["early"]]
    finally:
        frontend.close()
    return onset, stops


def test_the_cascade_stops_within_a_second_for_stop_and_talks_through_a_backchannel(
    tmp_path: Path,
) -> None:
    onset, stops = _talk_over(tmp_path, "Wait, stop.", "en-us+m3")
    assert len(stops) == 1, stops
    assert onset < stops[0] <= onset + 1.0  # mid-unit, well before two yielding boundaries
    _, stops = _talk_over(tmp_path, "Mm-hmm, right.", "en-us+m3")
    assert stops == []
