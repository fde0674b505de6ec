"""The content judge: the hand-labelled calibration set, the acceptance cases, the judged window,
and the OpenAI-compatible judge against the loopback fake server."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fake_openai import FakeOpenAI, error, text

from venus_ros.eval.judge import (
    FDB_LABELS,
    LABELS,
    JudgeCase,
    JudgeError,
    OfflineJudge,
    OpenAIJudge,
    TimedWord,
    judge_window,
    make_judge,
    parse_behaviour,
)

CALIBRATION = Path(__file__).parent / "data" / "judge_calibration.json"


@pytest.fixture(scope="module")
def embed():
    """The packaged all-MiniLM-L6-v2 (ONNX Runtime), injected into the judge as the CLI does."""
    from venus_ros.frontends.cascade.embed import Embedder

    return Embedder().embed


def _cases() -> list[dict]:
    return json.loads(CALIBRATION.read_text(encoding="utf-8"))["cases"]


def _case(c: dict) -> JudgeCase:
    return JudgeCase(c["overlap_text"], c["before"], c["after"], c["reference"], c["category"])


def test_the_calibration_set_is_big_and_varied_enough() -> None:
    cases = _cases()
    assert len(cases) >= 60
    assert len({c["id"] for c in cases}) == len(cases)
    labels = Counter(c["label"] for c in cases)
    assert set(labels) == set(LABELS) and min(labels.values()) >= 5
    categories = Counter(c["category"] for c in cases)
    assert len(categories) == 4 and min(categories.values()) >= 10


def test_the_offline_judge_agrees_with_the_hand_labels(embed) -> None:
    judge = OfflineJudge(embed=embed)
    cases = _cases()
    wrong = []
    for c in cases:
        verdict = judge.label(_case(c))
        if verdict.label != c["label"]:
            wrong.append((c["id"], c["label"], verdict.label, verdict.reason))
    agreement = 1 - len(wrong) / len(cases)
    assert agreement >= 0.90, f"agreement {agreement:.1%}; disagreements: {wrong}"


def test_generic_replies_are_unknown_not_respond(embed) -> None:
    judge = OfflineJudge(embed=embed)
    user = "Wait, how far is the station from here?"
    answer = "The hiking trail is about six kilometres long, with a steep climb at the start."
    for reply in ("Okay.", "Let me check.", "Sure, let me check.", "No tool can answer this yet."):
        assert judge.label(JudgeCase(user, "The hiking trail", reply, answer)).label == "unknown"
    assert judge.label(JudgeCase(user, "The hiking trail", "", answer)).label == "unknown"
    # "Let me check" followed by content in the window is judged on the content.
    reply = "Let me check. The station is about two kilometres from here."
    assert judge.label(JudgeCase(user, "The hiking trail", reply, answer)).label == "respond"


def test_a_continuing_multi_sentence_answer_is_resume_for_every_category(embed) -> None:
    judge = OfflineJudge(embed=embed)
    answer = (
        "Bread dough needs time to rise. After kneading, cover the bowl with a towel. Leave it "
        "somewhere warm for about an hour, until it has doubled in size."
    )
    rest = "After kneading, cover the bowl with a towel. Leave it somewhere warm for about an hour"
    for user in (
        "mm-hmm",
        "Wait, is that safe for kids?",
        "Tom, dinner is ready!",
        "And it's a goal!",
    ):
        case = JudgeCase(user, "Bread dough needs time to rise.", rest, answer)
        assert judge.label(case).label == "resume", user


def test_an_answer_carried_on_is_resume_though_a_misheard_word_matches_the_overlap(
    embed,
) -> None:
    judge = OfflineJudge(embed=embed)
    answer = "Rinse the pan while it is still warm, dry it on the stove, and rub in a drop of oil."
    before = "Rinse the pan"
    carried = "while it is still warm, dry it on the stove, and rub in a drop and boil."  # "of oil"
    case = JudgeCase("Noah, the kettle is boiling!", before, carried, answer)
    assert judge.label(case).label == "resume"
    # the answer's own words after the overlap's are a reply to it
    reply = "Boiling water would crack it, dry it on the stove instead."
    case = JudgeCase("Wait, can I use boiling water?", before, reply, answer)
    assert judge.label(case).label == "respond"


@pytest.mark.parametrize("embedded", [True, False])
def test_a_request_to_stop_or_wait_is_answered_by_doing_it(embed, embedded) -> None:
    judge = OfflineJudge(embed=embed if embedded else None)
    answer = "The ferry leaves every hour in summer, and twice a day in winter."
    before = "The ferry leaves every hour"
    for overlap, reply in (
        ("Hang on.", "I'll wait."),
        ("Okay, that's enough, thanks.", "Sure, I'll stop."),
        ("Just a sec.", "Take your time."),
        ("Shh, not now.", "I'll be quiet."),
        ("No, no, no!", "Sorry, I'll stop. What did you mean?"),
    ):
        assert judge.label(JudgeCase(overlap, before, reply, answer)).label == "respond", overlap
    # saying nothing of it, or answering speech that asked something else, is not
    assert judge.label(JudgeCase("Hang on.", before, "Okay.", answer)).label == "unknown"
    assert judge.label(JudgeCase("Mm-hmm.", before, "I'll stop.", answer)).label == "unknown"
    assert judge.label(JudgeCase("No.", before, "I'll stop.", answer)).label == "unknown"
    case = JudgeCase("Hang on, my keys fell behind the sofa.", before, "I'll wait.", answer)
    assert judge.label(case).label != "respond"


def test_the_judge_without_embeddings_is_deterministic_and_mostly_right() -> None:
    judge = OfflineJudge()
    cases = _cases()
    first = [judge.label(_case(c)).label for c in cases]
    assert first == [judge.label(_case(c)).label for c in cases]
    agreement = np.mean([a == c["label"] for a, c in zip(first, cases, strict=True)])
    assert agreement >= 0.85


def _words(*items: tuple[str, float, float]) -> tuple[TimedWord, ...]:
    return tuple(TimedWord(t, a, b) for t, a, b in items)


def test_the_judged_window_is_the_first_new_segment_or_the_continuing_speech() -> None:
    words = _words(
        ("The", 1.0, 1.2),
        ("museum", 1.2, 1.6),
        ("opens", 1.6, 2.0),
        ("at", 3.1, 3.2),
        ("six", 3.2, 3.5),
        ("Entry", 5.0, 5.3),
        ("is", 5.3, 5.4),
        ("free", 5.4, 5.8),
    )
    # Stopped at 3.5, answered at 5.0: the new segment is judged.
    before, after = judge_window(words, [(1.0, 3.5), (5.0, 5.8)], (3.0, 3.6))
    assert before == "The museum opens" and after == "Entry is free"
    # Never stopped: the running segment's words from the onset on.
    _, after = judge_window(words, [(1.0, 9.0)], (3.0, 3.6))
    assert after == "at six Entry is free"
    # Silent after the onset: nothing to judge.
    _, after = judge_window(words[:3], [(1.0, 2.0)], (4.0, 4.5))
    assert after == ""
    # The answer ended 0.2 s after the overlap with no yield on the timeline: it was completed,
    # so its words are judged, not what came after; with a yield the new segment is.
    _, after = judge_window(words, [(1.0, 3.8), (5.0, 5.8)], (3.0, 3.6), flushes=[])
    assert after == "at six"
    _, after = judge_window(words, [(1.0, 3.8), (5.0, 5.8)], (3.0, 3.6), flushes=[4.0])
    assert after == "Entry is free"
    # The onset inside a 0.6 s pause of the turn: what follows the pause is judged.
    _, after = judge_window(words, [(1.0, 2.0), (2.6, 3.5)], (2.3, 2.5))
    assert after == "at six"


def test_fdb_tags_parse_and_bad_answers_are_refused() -> None:
    assert parse_behaviour('{ "behaviour": ["C_RESUME"] }') == "resume"
    assert parse_behaviour('Reasoning... {"behaviour": ["C_UNCERTAIN_HANDLING"]}') == "uncertain"
    assert set(FDB_LABELS) == set(LABELS)
    with pytest.raises(ValueError, match="unknown behaviour"):
        parse_behaviour('{"behaviour": ["C_MAYBE"]}')
    with pytest.raises(ValueError, match="no"):
        parse_behaviour("respond")


def test_the_openai_judge_speaks_the_chat_api_and_never_leaks_its_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-secret-123")
    case = JudgeCase(
        "Wait, which platform?",
        "The train leaves",
        "Platform four.",
        "",
        "interruption",
        _words(("Platform", 4.0, 4.4), ("four.", 4.4, 4.8)),
        (3.0, 3.5),
    )
    with FakeOpenAI(error(500), text('{"behaviour": ["C_RESPOND"]}')) as server:
        judge = OpenAIJudge("judge-model", base_url=server.url, api_key_env="JUDGE_KEY", retries=1)
        verdict = judge.label(case)
        assert verdict.label == "respond"
        request = server.requests[-1]
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-secret-123"
        body = request.json()
        assert body["model"] == "judge-model" and body["temperature"] == 0
        sent = json.loads(body["messages"][1]["content"])
        assert sent["judged"] == "Platform four."
        assert sent["assistant_words"][0] == {"text": "Platform", "timestamp": [4.0, 4.4]}
        assert "C_RESPOND" in body["messages"][0]["content"]
    with FakeOpenAI(text("no json here"), text("still none")) as server:
        judge = OpenAIJudge("m", base_url=server.url, api_key_env="JUDGE_KEY", retries=1)
        with pytest.raises(JudgeError) as info:
            judge.label(case)
    assert "sk-secret" not in str(info.value) + verdict.reason + capsys.readouterr().out
    monkeypatch.delenv("JUDGE_KEY")
    with pytest.raises(JudgeError, match=r"\$JUDGE_KEY"):
        OpenAIJudge("m", base_url="http://127.0.0.1:9", api_key_env="JUDGE_KEY").label(case)


def test_make_judge_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_judge("offline"), OfflineJudge)
    monkeypatch.setenv("VENUS_EVAL_JUDGE_BASE_URL", "http://127.0.0.1:1/v1")
    judge = make_judge("openai:gpt-x")
    assert isinstance(judge, OpenAIJudge) and judge.base_url == "http://127.0.0.1:1/v1"
    with pytest.raises(ValueError, match="model name"):
        make_judge("openai:")
    with pytest.raises(ValueError, match="unknown judge"):
        make_judge("gpt")


def test_a_multi_sentence_turn_with_pauses_and_no_yield_is_resume_end_to_end(embed) -> None:
    """Real speech through the whole path: espeak-ng sentences with 0.3-0.5 s pauses as played
    audio, Silero segments merged as FDB merges them, faster-whisper words, the judge; the
    onset falls inside a sentence and inside a pause."""
    from venus_ros.audio.tts import EspeakTts
    from venus_ros.eval.judge import WhisperTranscriber
    from venus_ros.eval.metrics import SampleRun, compute_metrics
    from venus_ros.eval.scenario import AssistantTurn, Sample, Turn
    from venus_ros.eval.timing import energy_segments

    sentences = (
        "The ferry runs every hour in summer.",
        "In winter there are only four crossings a day.",
        "The last one back leaves the island just after six.",
    )
    tts, rate = EspeakTts(output_rate=24000), 24000
    parts, times, t = [np.zeros(rate // 2, np.float32)], [], 0.5
    for sentence, pause in zip(sentences, (0.3, 0.5, 0.0), strict=True):
        audio, _ = tts.render(sentence)
        audio = np.asarray(audio, np.float32)
        voiced = energy_segments(audio, rate)
        audio = audio[round(voiced[0][0] * rate) : round(voiced[-1][1] * rate)]
        times.append((t, t + audio.size / rate))
        t += audio.size / rate + pause
        parts += [audio, np.zeros(round(pause * rate), np.float32)]
    played = np.concatenate([*parts, np.zeros(rate * 3, np.float32)])
    in_pause = times[1][1] + 0.25  # inside the 0.5 s pause
    mid = 0.5 * (times[1][0] + times[1][1])
    users = {
        "backchannel": "mm-hmm",
        "interruption": "Wait, is there a cheaper way?",
        "other_directed": "Tom, dinner is ready!",
        "background": "And it's a goal!",
    }
    runs = []
    for i, (category, said) in enumerate(users.items()):
        onset = in_pause if i % 2 else mid
        sample = Sample(
            id=f"{category}_x",
            folder=Path("/nonexistent"),
            category=category,
            turns=(Turn(onset, onset + 0.6, said),) if category != "background" else (),
            overlap=(onset, onset + 0.6),
            expected="respond" if category == "interruption" else "resume",
            needs_delegation=None,
            expected_tool_calls=(),
            tools=None,
            assistant_turns=(AssistantTurn(0.5, " ".join(sentences)),),
            extra={"background": {"text": said}} if category == "background" else {},
        )
        runs.append(SampleRun(sample, (), played, rate, (), (), (), 0))
    judge = OfflineJudge(embed=embed)
    metrics = compute_metrics(runs, "never-yield", judge=judge, transcriber=WhisperTranscriber())
    rows = {r["category"]: r for r in metrics["per_sample"]}
    for category, row in rows.items():
        assert row["speaking_at_overlap"], category
        assert row["label"] == "resume", (category, row["judged_text"], row["label_reason"])
    assert metrics["overlap"]["interruption"]["response_rate"] == 0.0
    for category in ("backchannel", "other_directed", "background"):
        assert metrics["overlap"][category]["continuation_rate"] == 1.0
