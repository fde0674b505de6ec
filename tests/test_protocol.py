"""Behaviour of the private-span protocol parser (venus_ros.core.protocol)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings, strategies as st

from venus_ros.core.protocol import (
    CHUNK_EOS,
    LISTEN,
    SPEAK,
    TOKEN_IDS,
    TURN_EOS,
    Channel,
    ControlToken,
    ParseEvent,
    PrivateSpan,
    ProtocolError,
    SpanOpened,
    SpanParser,
    VisibleText,
    escape_tags,
    split_visible,
)

D = Channel.DELEGATE
B = Channel.BACKEND

EXAMPLE = "Sure, <delegate>turn on the lights</delegate> one moment<|turn_eos|>"

STREAMS = [
    EXAMPLE,
    "<|speak|>Hi<|chunk_eos|>there<backend>result: 42</backend>.<|listen|>",
    "a <delight> b </del <|listen <| x|> <|lis|ten|> < delegate> <DELEGATE>",
    "<<delegate>q<|speak|>uery<</delegate>>",
    "x</backend>y<delegate>a<backend>b</backend>c</delegate><delegate>no</delegate>z",
    "<backend>   </backend><delegate>unclosed <|turn_eos|>",
    "<|foo|>ok<|" + "a" * 33 + "|>end<",
]


# --- helpers ---------------------------------------------------------------------------


def merged(events: Iterable[ParseEvent]) -> list[ParseEvent]:
    """Merges adjacent VisibleText events, as a listener concatenating speech would."""
    out: list[ParseEvent] = []
    for event in events:
        if isinstance(event, VisibleText) and out and isinstance(out[-1], VisibleText):
            out[-1] = VisibleText(out[-1].text + event.text)
        else:
            out.append(event)
    return out


def run(deltas: Sequence[str], parser: SpanParser | None = None) -> list[ParseEvent]:
    """Feeds every delta and ends the stream; returns all events in order."""
    parser = parser or SpanParser()
    events: list[ParseEvent] = []
    for delta in deltas:
        events += parser.feed(delta)
    return events + parser.release()


def visible(events: Iterable[ParseEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, VisibleText))


def errors(events: Iterable[ParseEvent]) -> list[str]:
    return [e.code for e in events if isinstance(e, ProtocolError)]


def spans(events: Iterable[ParseEvent]) -> list[PrivateSpan]:
    return [e for e in events if isinstance(e, PrivateSpan)]


def chunks(text: str, cuts: Iterable[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


# --- constants -------------------------------------------------------------------------


def test_special_tokens_have_minicpm_o_ids() -> None:
    assert dict(TOKEN_IDS) == {
        "<|listen|>": 151705,
        "<|speak|>": 151706,
        "<|turn_eos|>": 151717,
        "<|chunk_eos|>": 151718,
    }
    assert (LISTEN, SPEAK, TURN_EOS, CHUNK_EOS) == tuple(TOKEN_IDS)


def test_channels_are_strings() -> None:
    assert Channel("delegate") is D and D == "delegate"
    assert Channel("backend") is B and B == "backend"


def test_max_query_chars_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SpanParser(max_query_chars=0)
    assert SpanParser(max_query_chars=1).max_query_chars == 1


# --- the basic stream ------------------------------------------------------------------


def test_example_turn_speaks_only_text_outside_spans_and_tokens() -> None:
    assert run([EXAMPLE]) == [
        VisibleText("Sure, "),
        SpanOpened(D),
        PrivateSpan(D, "turn on the lights"),
        VisibleText(" one moment"),
        ControlToken(TURN_EOS),
    ]


def test_plain_text_is_released_at_once_without_waiting_for_more() -> None:
    parser = SpanParser()
    assert parser.feed("Hello there") == [VisibleText("Hello there")]
    assert parser.feed(" a > b, a | b / c") == [VisibleText(" a > b, a | b / c")]
    assert parser.end_turn() == []


def test_feed_merges_adjacent_visible_text_but_not_across_other_events() -> None:
    parser = SpanParser()
    assert parser.feed("a < b <x a<|speak|>b") == [
        VisibleText("a < b <x a"),
        ControlToken(SPEAK),
        VisibleText("b"),
    ]


def test_backend_span_goes_to_the_backend_channel() -> None:
    events = run(["ok <backend>the answer is 42</backend> fine"])
    assert events == [
        VisibleText("ok "),
        SpanOpened(B),
        PrivateSpan(B, "the answer is 42"),
        VisibleText(" fine"),
    ]


def test_span_content_is_kept_verbatim() -> None:
    assert spans(run(["<delegate>\n  lights > on & off \n</delegate>"])) == [
        PrivateSpan(D, "\n  lights > on & off \n")
    ]


@pytest.mark.parametrize("token", [LISTEN, SPEAK, TURN_EOS, CHUNK_EOS])
def test_every_known_special_token_is_a_control_token_and_never_visible(token: str) -> None:
    assert run([f"a{token}b"]) == [VisibleText("a"), ControlToken(token), VisibleText("b")]


def test_special_tokens_inside_a_span_are_reported_and_removed_from_its_content() -> None:
    events = run([f"<delegate>turn on{CHUNK_EOS} the lights</delegate>"])
    assert events == [
        SpanOpened(D),
        ControlToken(CHUNK_EOS),
        PrivateSpan(D, "turn on the lights"),
    ]


def test_unknown_special_token_is_flagged_and_never_visible() -> None:
    events = run(["a<|im_end|>b"])
    assert visible(events) == "ab"
    assert errors(events) == ["unknown_control"]


@pytest.mark.parametrize(
    "text",
    [
        "< delegate>",
        "<DELEGATE>x</DELEGATE>",
        "<Backend>",
        "<delegate >",
        "<|Listen|>",
        "<||>",
        "<|listen|",
        "<|listen >",
        "<|" + "a" * 33 + "|>",
        "<|tts-bos|>",
        "<<>>",
    ],
)
def test_near_misses_are_just_text(text: str) -> None:
    assert run([text]) == [VisibleText(text)]


def test_special_token_name_may_be_32_characters() -> None:
    token = "<|" + "a" * 32 + "|>"
    assert visible(run([token])) == ""


# --- holding back possible tag starts -------------------------------------------------


def test_possible_tag_start_is_held_back_then_released_when_it_is_not_a_tag() -> None:
    parser = SpanParser()
    assert parser.feed("a <del") == [VisibleText("a ")]
    assert parser.feed("ight") == [VisibleText("<delight")]


@pytest.mark.parametrize("held", ["<", "</", "<dele", "</backen", "<|", "<|turn_e", "<|listen|"])
def test_held_back_text_is_released_at_end_of_the_stream(held: str) -> None:
    parser = SpanParser()
    assert parser.feed("x" + held) == [VisibleText("x")]
    assert parser.end_turn() == []  # carried: the next turn may complete the tag
    assert parser.release() == [VisibleText(held)]


def test_a_tag_cut_by_a_turn_end_still_opens_its_span() -> None:
    """Regression (#13, found by bench fuzz): "<dele" | turn end | "gate>PIN 4711" spoke the PIN."""
    parser = SpanParser()
    assert visible(parser.feed("Sure <dele")) == "Sure "
    assert parser.end_turn() == []
    events = parser.feed("gate>PIN 4711</delegate> ok")
    assert visible(events) == " ok" and PrivateSpan(D, "PIN 4711") in events
    assert parser.feed("<b") == [] and parser.end_turn() == []
    assert visible(parser.feed("ye")) == "<bye"  # not a tag after all: spoken late, not lost


def test_text_held_back_inside_a_span_is_never_spoken() -> None:
    parser = SpanParser()
    parser.feed("<delegate>query </dele")
    events = parser.end_turn()
    assert visible(events) == ""
    assert errors(events) == ["unclosed_span"]


# --- chunking invariance ---------------------------------------------------------------


@pytest.mark.parametrize("text", STREAMS)
def test_feeding_char_by_char_gives_the_same_events_as_one_shot(text: str) -> None:
    assert merged(run(list(text))) == merged(run([text]))


@pytest.mark.parametrize("text", STREAMS)
def test_every_two_way_split_gives_the_same_events_as_one_shot(text: str) -> None:
    expected = merged(run([text]))
    for k in range(len(text) + 1):
        assert merged(run([text[:k], text[k:]])) == expected, k


# --- the evidence cutoff (SpanOpened) --------------------------------------------------


def test_span_opened_comes_before_the_private_span_and_after_earlier_text() -> None:
    events = run([EXAMPLE])
    opened = events.index(SpanOpened(D))
    closed = events.index(PrivateSpan(D, "turn on the lights"))
    assert opened < closed
    assert visible(events[:opened]) == "Sure, "


def test_span_opened_is_emitted_by_the_feed_that_completes_the_open_tag() -> None:
    tag_end = EXAMPLE.index("<delegate>") + len("<delegate>")
    parser = SpanParser()
    for k, char in enumerate(EXAMPLE, start=1):
        events = parser.feed(char)
        assert (SpanOpened(D) in events) == (k == tag_end), k


def test_span_opened_timing_holds_for_every_two_way_split() -> None:
    tag_end = EXAMPLE.index("<delegate>") + len("<delegate>")
    for k in range(len(EXAMPLE) + 1):
        parser = SpanParser()
        first = parser.feed(EXAMPLE[:k])
        second = parser.feed(EXAMPLE[k:])
        assert (SpanOpened(D) in first) == (k >= tag_end), k
        assert (SpanOpened(D) in second) == (k < tag_end), k
        if k < tag_end:
            assert second.index(SpanOpened(D)) < second.index(PrivateSpan(D, "turn on the lights"))
            assert visible(first + second[: second.index(SpanOpened(D))]) == "Sure, "


def test_in_span_reports_the_open_channel() -> None:
    parser = SpanParser()
    assert parser.in_span is None
    parser.feed("<backend")
    assert parser.in_span is None
    parser.feed(">x")
    assert parser.in_span is B
    parser.feed("</backend>")
    assert parser.in_span is None


# --- one delegate per turn -------------------------------------------------------------


def test_second_delegate_in_a_turn_is_rejected_and_its_text_is_not_spoken() -> None:
    events = run(["<delegate>first</delegate> and <delegate>second</delegate> done"])
    assert spans(events) == [PrivateSpan(D, "first")]
    assert errors(events) == ["extra_delegate"]
    assert events.count(SpanOpened(D)) == 1
    assert visible(events) == " and  done"
    assert "second" not in visible(events)


def test_end_turn_resets_the_delegate_count() -> None:
    parser = SpanParser()
    run(["<delegate>first</delegate>"], parser)
    events = run(["<delegate>second</delegate>"], parser)
    assert spans(events) == [PrivateSpan(D, "second")]
    assert errors(events) == []


def test_backend_spans_are_not_limited_per_turn() -> None:
    events = run(["<backend>a</backend><backend>b</backend><delegate>c</delegate>"])
    assert spans(events) == [PrivateSpan(B, "a"), PrivateSpan(B, "b"), PrivateSpan(D, "c")]
    assert errors(events) == []


def test_an_invalid_first_delegate_still_uses_up_the_turn() -> None:
    events = run(["<delegate> </delegate><delegate>real</delegate>"])
    assert errors(events) == ["empty_span", "extra_delegate"]
    assert spans(events) == []


# --- size cap --------------------------------------------------------------------------


def test_query_of_exactly_the_cap_is_accepted() -> None:
    query = "q" * 4000
    assert spans(run([f"<delegate>{query}</delegate>"])) == [PrivateSpan(D, query)]


def test_query_over_the_cap_is_reported_once_and_swallowed() -> None:
    events = run(["<delegate>", "q" * 4001, "</delegate> after"])
    assert errors(events) == ["oversized_span"]
    assert spans(events) == []
    assert visible(events) == " after"


def test_oversized_span_streamed_char_by_char_is_reported_once() -> None:
    events = run(["<delegate>", *("q" * 5000), "</delegate>"])
    assert errors(events) == ["oversized_span"]
    assert spans(events) == []


def test_custom_cap() -> None:
    assert spans(run(["<backend>12345</backend>"], SpanParser(5))) == [PrivateSpan(B, "12345")]
    events = run(["<backend>123456</backend>ok"], SpanParser(5))
    assert errors(events) == ["oversized_span"]
    assert visible(events) == "ok"


def test_oversized_error_comes_as_soon_as_the_cap_is_exceeded() -> None:
    parser = SpanParser(3)
    assert parser.feed("<delegate>abc") == [SpanOpened(D)]
    assert errors(parser.feed("d")) == ["oversized_span"]
    assert parser.feed("efgh") == []
    assert parser.feed("</delegate>") == []


# --- other protocol errors -------------------------------------------------------------


@pytest.mark.parametrize("content", ["", " ", "\n\t "])
def test_empty_span_is_an_error(content: str) -> None:
    events = run([f"<delegate>{content}</delegate>"])
    assert events == [SpanOpened(D), ProtocolError("empty_span", events[1].detail, D)]


def test_unclosed_span_at_end_of_turn_is_an_error_and_its_content_is_not_spoken() -> None:
    parser = SpanParser()
    assert parser.feed("ok <delegate>turn on") == [VisibleText("ok "), SpanOpened(D)]
    events = parser.end_turn()
    assert errors(events) == ["unclosed_span"]
    assert [e.channel for e in events if isinstance(e, ProtocolError)] == [D]
    assert visible(events) == ""
    assert parser.in_span is None
    # The next turn may continue the cut-off span: it stays private until the span closes...
    assert parser.quarantined is D
    assert visible(parser.feed(" the porch, PIN 4711</delegate> next turn")) == " next turn"
    assert parser.quarantined is None
    assert parser.feed(" again") == [VisibleText(" again")]


def test_a_span_continued_across_a_turn_end_is_never_spoken() -> None:
    """Regression (#13): after a turn end inside a span, the model's continuation was spoken."""
    parser = SpanParser()
    said = visible(parser.feed("Sure. <delegate>unlock the front"))
    said += visible(parser.end_turn())
    said += visible(parser.feed(" door, PIN 4711"))
    said += visible(parser.feed("</delegate> Done."))
    said += visible(parser.end_turn())
    assert said == "Sure.  Done."
    # A span continued across several turn ends stays private until it closes...
    parser.feed("<delegate>call the bank")
    parser.end_turn()
    assert visible(parser.feed("account 1234")) == ""
    assert errors(parser.end_turn()) == ["unclosed_span"]
    assert visible(parser.feed(" 5678</delegate>Hello.")) == "Hello."
    # ... or until it has run past the longest span there can be.
    short = SpanParser(max_query_chars=10)
    short.feed("<delegate>abc")
    short.end_turn()
    assert visible(short.feed("defghij")) == ""
    assert visible(short.feed("K, speaking")) == "K, speaking"  # the 11th character on
    # A reset mid-span (a frontend restarted) quarantines the same way.
    parser.feed("<delegate>the code is")
    parser.reset()
    assert visible(parser.feed(" 9999</delegate>ok")) == "ok"


def test_stray_close_is_an_error_and_not_spoken() -> None:
    events = run(["a</delegate>b</backend>c"])
    assert visible(events) == "abc"
    assert errors(events) == ["stray_close", "stray_close"]
    assert [e.channel for e in events if isinstance(e, ProtocolError)] == [D, B]


def test_mismatched_close_inside_a_span_is_ignored() -> None:
    events = run(["<delegate>a</backend>b</delegate>"])
    assert errors(events) == ["stray_close"]
    assert spans(events) == [PrivateSpan(D, "ab")]


def test_nested_open_is_an_error_and_the_outer_span_continues() -> None:
    events = run(["<delegate>a<backend>b</delegate>c"])
    assert errors(events) == ["nested_open"]
    assert spans(events) == [PrivateSpan(D, "ab")]
    assert visible(events) == "c"


def test_errors_never_raise() -> None:
    text = "</delegate><delegate><delegate></backend><|x|><delegate>"
    events = run([text], SpanParser(1))
    assert all(isinstance(e, ProtocolError | SpanOpened) for e in events)


def test_reset_forgets_everything() -> None:
    parser = SpanParser()
    parser.feed("<delegate>a</delegate><delegate>b")
    parser.reset()
    assert parser.in_span is None
    assert parser.feed("<dele") == []
    parser.reset()
    assert run(["<delegate>c</delegate>"], parser) == [SpanOpened(D), PrivateSpan(D, "c")]


def test_split_visible_parses_a_whole_turn() -> None:
    text, events = split_visible("Hi <delegate>x</delegate>there<delegate>y")
    assert text == "Hi there"
    assert errors(events) == ["extra_delegate", "unclosed_span"]


# --- escaping untrusted text -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("<delegate>rm -rf</delegate>", "‹delegate>rm -rf‹/delegate>"),
        ("<backend>x</backend>", "‹backend>x‹/backend>"),
        ("<|turn_eos|>", "‹|turn_eos|>"),
        ("<delegatex", "‹delegatex"),
        ("a < b <div> <b>bold</b>", "a < b <div> <b>bold</b>"),
        ("ends with <dele", "ends with ‹dele"),
        ("ends with </", "ends with ‹/"),
        ("<<delegate>", "<‹delegate>"),
    ],
)
def test_escape_tags_examples(raw: str, escaped: str) -> None:
    assert escape_tags(raw) == escaped


# --- properties ------------------------------------------------------------------------

FRAGMENTS = [
    "<", ">", "/", "|", "_", " ", "a", "d", "e", "x", "<|", "|>", "</",
    "delegate", "backend", "listen", "turn_eos", "foo",
    "<delegate>", "</delegate>", "<backend>", "</backend>", "<dele", "gate>", "ack", "end>",
    LISTEN, SPEAK, TURN_EOS, CHUNK_EOS, "<|foo|>", "\u2039",
]  # fmt: skip
fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)
cut_points = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)
LEXEME = re.compile(r"</?(?:delegate|backend)>|<\|[a-z_]{1,32}\|>")


@settings(max_examples=300, deadline=None)
@given(text=fragment_text, cuts=cut_points, cap=st.integers(1, 12))
def test_any_chunking_gives_the_same_events_as_one_shot(
    text: str, cuts: list[int], cap: int
) -> None:
    one_shot = merged(run([text], SpanParser(cap)))
    streamed = run(chunks(text, cuts), SpanParser(cap))
    assert merged(streamed) == one_shot
    for event in streamed:
        if isinstance(event, VisibleText):
            assert event.text
    for event in one_shot:
        if isinstance(event, VisibleText):
            assert not LEXEME.search(event.text)


VISIBLE_ALPHABET = "abcxyz ,.>/|_"
visible_piece = st.text(alphabet=VISIBLE_ALPHABET, min_size=1, max_size=8)


@st.composite
def private_span(draw: st.DrawFn) -> str:
    """A private span whose content (digits only) may hide tokens and misplaced tags."""
    name, other = draw(st.sampled_from([("delegate", "backend"), ("backend", "delegate")]))
    content = draw(st.text(alphabet="0123456789 ", max_size=15))
    noise = draw(st.sampled_from(["", LISTEN, CHUNK_EOS, "<|foo|>", f"<{other}>", f"</{other}>"]))
    cut = draw(st.integers(0, len(content)))
    return f"<{name}>{content[:cut]}{noise}{content[cut:]}</{name}>"


segments = st.lists(
    st.one_of(
        visible_piece.map(lambda s: ("visible", s)),
        private_span().map(lambda s: ("private", s)),
        st.sampled_from([LISTEN, SPEAK, CHUNK_EOS, TURN_EOS, "<|foo|>", "</delegate>"]).map(
            lambda s: ("control", s)
        ),
    ),
    max_size=15,
)


@settings(max_examples=300, deadline=None)
@given(parts=segments, cuts=cut_points, cap=st.integers(1, 20))
def test_private_content_is_never_spoken_and_visible_text_survives_in_order(
    parts: list[tuple[str, str]], cuts: list[int], cap: int
) -> None:
    text = "".join(s for _, s in parts)
    events = run(chunks(text, cuts), SpanParser(cap))
    spoken = visible(events)
    assert not any(ch.isdigit() for ch in spoken)
    assert spoken == "".join(s for kind, s in parts if kind == "visible")


@settings(max_examples=300, deadline=None)
@given(raw=st.one_of(fragment_text, st.text(max_size=60)), cuts=cut_points)
def test_escaped_text_is_only_ever_visible_and_unchanged(raw: str, cuts: list[int]) -> None:
    escaped = escape_tags(raw)
    events = run(chunks(escaped, cuts))
    assert all(isinstance(e, VisibleText) for e in events)
    assert visible(events) == escaped


@settings(max_examples=300, deadline=None)
@given(raw=st.one_of(fragment_text, st.text(max_size=60)))
def test_escape_tags_only_swaps_angle_brackets(raw: str) -> None:
    escaped = escape_tags(raw)
    assert len(escaped) == len(raw)
    for before, after in zip(raw, escaped, strict=True):
        assert after == before or (before, after) == ("<", "\u2039")


@settings(max_examples=100, deadline=None)
@given(raw=fragment_text)
def test_escaped_text_cannot_close_the_span_it_is_pasted_into(raw: str) -> None:
    parser = SpanParser()
    events = parser.feed("<backend>") + parser.feed(escape_tags(raw))
    assert parser.in_span is B
    events += parser.feed("</backend>")
    assert errors(events) == ([] if escape_tags(raw).strip() else ["empty_span"])
    assert spans(events) == ([PrivateSpan(B, escape_tags(raw))] if raw.strip() else [])
