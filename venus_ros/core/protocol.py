"""Private-span protocol of the Realtime-Venus frontend text stream.

The frontend model streams text deltas for every one-second unit.  Inside them it may
write private spans that must never be spoken:

* ``<delegate>…</delegate>`` — a request handed to the background harness;
* ``<backend>…</backend>`` — a background reply placed in the context.

MiniCPM-o 4.5 special tokens such as ``<|listen|>`` or ``<|turn_eos|>`` may also appear
in the text.  :class:`SpanParser` turns the stream into :data:`ParseEvent` values so
that only :class:`VisibleText` ever reaches speech, and :func:`escape_tags` makes
untrusted text (tool output) unable to open or close a span or form a special token.

This module uses the standard library only.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TypeAlias

__all__ = [
    "CHUNK_EOS",
    "EMPTY_SPAN",
    "ERROR_CODES",
    "EXTRA_DELEGATE",
    "LISTEN",
    "NESTED_OPEN",
    "OVERSIZED_SPAN",
    "SPEAK",
    "STRAY_CLOSE",
    "TOKEN_IDS",
    "TURN_EOS",
    "UNCLOSED_SPAN",
    "UNKNOWN_CONTROL",
    "Channel",
    "ControlToken",
    "ParseEvent",
    "PrivateSpan",
    "ProtocolError",
    "SpanOpened",
    "SpanParser",
    "VisibleText",
    "clean_text",
    "escape_tags",
    "split_visible",
]

LISTEN: Final = "<|listen|>"
"""The model chooses to keep listening in this unit."""
SPEAK: Final = "<|speak|>"
"""The model chooses to speak in this unit."""
TURN_EOS: Final = "<|turn_eos|>"
"""End of the model's turn."""
CHUNK_EOS: Final = "<|chunk_eos|>"
"""End of one streamed unit."""

TOKEN_IDS: Final[Mapping[str, int]] = MappingProxyType(
    {LISTEN: 151705, SPEAK: 151706, TURN_EOS: 151717, CHUNK_EOS: 151718}
)
"""MiniCPM-o 4.5 vocabulary ids of the special tokens, keyed by their text."""


class Channel(str, enum.Enum):
    """Private channel of a span."""

    DELEGATE = "delegate"
    BACKEND = "backend"


EMPTY_SPAN: Final = "empty_span"
OVERSIZED_SPAN: Final = "oversized_span"
UNCLOSED_SPAN: Final = "unclosed_span"
EXTRA_DELEGATE: Final = "extra_delegate"
STRAY_CLOSE: Final = "stray_close"
NESTED_OPEN: Final = "nested_open"
UNKNOWN_CONTROL: Final = "unknown_control"

ERROR_CODES: Final[frozenset[str]] = frozenset(
    {
        EMPTY_SPAN,
        OVERSIZED_SPAN,
        UNCLOSED_SPAN,
        EXTRA_DELEGATE,
        STRAY_CLOSE,
        NESTED_OPEN,
        UNKNOWN_CONTROL,
    }
)
"""Every value :attr:`ProtocolError.code` can take."""


@dataclass(frozen=True, slots=True)
class VisibleText:
    """Text that is safe to speak.

    Attributes:
        text: Non-empty text outside every tag, special token and private span.
    """

    text: str


@dataclass(frozen=True, slots=True)
class SpanOpened:
    """An opening tag has just been completed.

    It is emitted at the exact position of the tag's closing ``>``, before any event
    caused by later text, so a caller can fix its evidence cutoff here.  It is not
    emitted for a delegate span rejected as ``extra_delegate``.

    Attributes:
        channel: Channel of the span that opened.
    """

    channel: Channel


@dataclass(frozen=True, slots=True)
class PrivateSpan:
    """A complete, valid private span.

    Attributes:
        channel: Channel of the span.
        text: Content between the tags, verbatim (not stripped), with special tokens
            removed.
    """

    channel: Channel
    text: str


@dataclass(frozen=True, slots=True)
class ControlToken:
    """A known special token found in the text; it is never visible.

    Attributes:
        token: The token text, e.g. ``"<|turn_eos|>"``; a key of :data:`TOKEN_IDS`.
    """

    token: str


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """A violation of the span protocol.  Reported as an event, never raised.

    Attributes:
        code: One of :data:`ERROR_CODES`.
        detail: Human-readable explanation.
        channel: Channel concerned, or ``None`` when no span is involved.
    """

    code: str
    detail: str
    channel: Channel | None


ParseEvent: TypeAlias = VisibleText | SpanOpened | PrivateSpan | ControlToken | ProtocolError
"""Any event produced by :class:`SpanParser`."""

_OPEN_TAGS: Final[Mapping[str, Channel]] = MappingProxyType(
    {"<delegate>": Channel.DELEGATE, "<backend>": Channel.BACKEND}
)
_CLOSE_TAGS: Final[Mapping[str, Channel]] = MappingProxyType(
    {"</delegate>": Channel.DELEGATE, "</backend>": Channel.BACKEND}
)
_TAGS: Final[tuple[str, ...]] = (*_OPEN_TAGS, *_CLOSE_TAGS)
_TOKEN_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz_")
_MAX_TOKEN_NAME: Final = 32
_PARTIAL: Final = -1
_NO_MATCH: Final = 0


def _match_at(text: str, start: int) -> int:
    """Classifies the text at ``start``, where ``text[start] == "<"``.

    Args:
        text: Text being scanned.
        start: Index of a ``<``.

    Returns:
        The end index of a complete tag or special token beginning at ``start``;
        ``_PARTIAL`` if ``text[start:]`` could still grow into one; otherwise
        ``_NO_MATCH``.  Work is bounded by the longest lexeme, not by ``len(text)``.
    """
    n = len(text)
    rest = n - start
    partial = False
    for tag in _TAGS:
        if text.startswith(tag, start):
            return start + len(tag)
        if rest < len(tag) and tag.startswith(text[start:]):
            partial = True
    if partial:
        return _PARTIAL
    if text[start + 1] != "|":  # rest >= 2 here: a lone "<" is a prefix of every tag.
        return _NO_MATCH
    k = start + 2
    limit = min(n, k + _MAX_TOKEN_NAME + 1)
    while k < limit and text[k] in _TOKEN_NAME_CHARS:
        k += 1
    name_len = k - start - 2
    if name_len > _MAX_TOKEN_NAME:
        return _NO_MATCH
    if k == n:
        return _PARTIAL
    if name_len == 0 or text[k] != "|":
        return _NO_MATCH
    if k + 1 == n:
        return _PARTIAL
    return k + 2 if text[k + 1] == ">" else _NO_MATCH


class _Events:
    """Collects events, merging adjacent visible text."""

    __slots__ = ("_events", "_visible")

    def __init__(self) -> None:
        self._events: list[ParseEvent] = []
        self._visible: list[str] = []

    def visible(self, text: str) -> None:
        if text:
            self._visible.append(text)

    def emit(self, event: ParseEvent) -> None:
        self._flush()
        self._events.append(event)

    def result(self) -> list[ParseEvent]:
        self._flush()
        return self._events

    def _flush(self) -> None:
        if self._visible:
            self._events.append(VisibleText("".join(self._visible)))
            self._visible = []


class SpanParser:
    """Incremental parser of the frontend model's streamed text.

    Feed each text delta as it arrives; every returned :class:`VisibleText` may be
    spoken at once.  Text that could still be the start of a tag or special token is
    held back until it is resolved (at most 36 characters); all other visible text is
    released immediately.  Tags are exact and case-sensitive.

    Rules:
        * At most one delegate span per model turn; later ones are reported as
          ``extra_delegate`` and their content is dropped.  Every opened delegate span
          counts, valid or not.
        * A span whose content exceeds ``max_query_chars`` is reported once as
          ``oversized_span``; the rest of it is swallowed unbuffered up to its close tag.
        * A span with empty or whitespace-only content is reported as ``empty_span``.
        * Special tokens are never visible, not even inside a span: they are removed
          from span content and reported as :class:`ControlToken` (known tokens) or
          ``unknown_control`` errors.
        * An opening tag inside an open span (``nested_open``) and a closing tag that
          does not match the open span (``stray_close``) are reported and otherwise
          ignored; the span stays open.
        * ``<|turn_eos|>`` in the text is only reported; the caller ends the turn by
          calling :meth:`end_turn`.
        * A span still open when the turn ends (``unclosed_span``) leaves the parser
          *quarantined*: the model may go on writing that span's content in later
          turns, so text stays private (swallowed, across any number of turn ends)
          until the span's closing tag, an opening tag, or ``max_query_chars`` swallowed
          characters, whichever comes first (the same bound as any span's content).
          Text after the closing tag is visible again. A private character is never
          spoken, at the price of silence when a model never closes a span.

    Feeding costs O(len(delta)) amortised; memory is bounded by ``max_query_chars``
    plus a constant.

    Example:
        >>> parser = SpanParser()
        >>> parser.feed("Sure, <delegate>lights on</delegate> ok")  # doctest: +NORMALIZE_WHITESPACE
        [VisibleText(text='Sure, '), SpanOpened(channel=<Channel.DELEGATE: 'delegate'>),
         PrivateSpan(channel=<Channel.DELEGATE: 'delegate'>, text='lights on'),
         VisibleText(text=' ok')]
    """

    def __init__(self, max_query_chars: int = 4000) -> None:
        """Creates a parser.

        Args:
            max_query_chars: Largest accepted span content, in characters.

        Raises:
            ValueError: If ``max_query_chars`` is smaller than 1.
        """
        if max_query_chars < 1:
            raise ValueError(f"max_query_chars must be >= 1, got {max_query_chars}")
        self._max_chars = max_query_chars
        self._span: Channel | None = None
        self._orphan: Channel | None = None
        self._content_len = 0
        self._pending = ""
        self.reset()

    @property
    def max_query_chars(self) -> int:
        """Largest accepted span content, in characters."""
        return self._max_chars

    @property
    def in_span(self) -> Channel | None:
        """Channel of the currently open span (valid or not), or ``None``."""
        return self._span

    @property
    def quarantined(self) -> Channel | None:
        """Channel of a span cut off by the end of the previous turn, whose continuation is
        being swallowed (see the class rules), or ``None``."""
        return self._orphan

    def reset(self) -> None:
        """Forgets the parser's state without emitting events.

        Except what could still make a private character speakable: a span open at the
        reset is remembered as quarantined (its continuation must stay private), and
        held-back text (a tag perhaps cut in two) is kept, exactly as at a turn end.
        """
        open_span = self._span
        self._orphan = open_span or self._orphan
        self._orphan_chars = self._content_len if open_span else 0
        self._span = None
        self._content: list[str] = []
        self._content_len = 0
        self._discarding = False
        self._delegates = 0

    def feed(self, delta: str) -> list[ParseEvent]:
        """Parses the next text delta.

        Args:
            delta: Newly streamed text; may split tags and tokens anywhere.

        Returns:
            The events completed by this delta, in stream order.  Adjacent visible
            text is merged into a single :class:`VisibleText`.
        """
        text = self._pending + delta
        self._pending = ""
        out = _Events()
        n = len(text)
        i = 0
        while i < n:
            j = text.find("<", i)
            if j < 0:
                self._plain(text[i:], out)
                break
            if j > i:
                self._plain(text[i:j], out)
            end = _match_at(text, j)
            if end == _PARTIAL:
                self._pending = text[j:]
                break
            if end == _NO_MATCH:
                self._plain("<", out)
                i = j + 1
                continue
            self._lexeme(text[j:end], out)
            i = end
        return out.result()

    def end_turn(self) -> list[ParseEvent]:
        """Ends the model turn (after ``<|turn_eos|>``).

        Held-back text (the start of what may still become a tag or special token) is
        kept: the model may complete the tag in its next turn, and a tag cut by a turn
        end must not become speech. It is released as soon as later text shows it is
        not a tag (:meth:`release` releases it at the end of a stream).  An open span
        is reported as ``unclosed_span`` and its content is discarded (see the
        quarantine rule).  The per-turn delegate count is reset.

        Returns:
            The events caused by ending the turn.
        """
        out = _Events()
        if self._span is None and self._orphan is not None:
            out.emit(
                ProtocolError(
                    UNCLOSED_SPAN,
                    f"a cut-off <{self._orphan.value}> span is still not closed; "
                    "the turn's text was withheld",
                    self._orphan,
                )
            )
        elif self._span is not None:
            out.emit(
                ProtocolError(
                    UNCLOSED_SPAN,
                    f"<{self._span.value}> span still open at end of turn; content dropped",
                    self._span,
                )
            )
            self._orphan = self._span
            self._orphan_chars = self._content_len
            self._close_span()
        self._delegates = 0
        return out.result()

    def release(self) -> list[ParseEvent]:
        """Ends the stream: held-back text that never became a tag is visible (outside any
        span), or dropped (inside one); then :meth:`end_turn`."""
        out = _Events()
        pending, self._pending = self._pending, ""
        if self._span is None and self._orphan is None:
            out.visible(pending)
        return out.result() + self.end_turn()

    def _plain(self, text: str, out: _Events) -> None:
        """Routes ordinary text to speech or to the open span's content."""
        if self._span is None:
            if self._orphan is None:
                out.visible(text)
                return
            room = self._max_chars - self._orphan_chars
            self._orphan_chars += len(text)
            if len(text) > room:  # the longest span there can be has ended: speak again
                out.emit(
                    ProtocolError(
                        OVERSIZED_SPAN,
                        f"a cut-off <{self._orphan.value}> span ran past {self._max_chars} "
                        "characters without closing; speaking again",
                        self._orphan,
                    )
                )
                self._orphan = None
                out.visible(text[room:])
            return
        if self._discarding:
            return
        if self._content_len + len(text) > self._max_chars:
            out.emit(
                ProtocolError(
                    OVERSIZED_SPAN,
                    f"<{self._span.value}> content exceeds {self._max_chars} characters",
                    self._span,
                )
            )
            self._content = []
            self._content_len = 0
            self._discarding = True
            return
        self._content.append(text)
        self._content_len += len(text)

    def _lexeme(self, lexeme: str, out: _Events) -> None:
        """Handles a complete tag or special token."""
        if lexeme.startswith("<|"):
            if lexeme in TOKEN_IDS:
                out.emit(ControlToken(lexeme))
            else:
                out.emit(
                    ProtocolError(UNKNOWN_CONTROL, f"unknown special token {lexeme}", self._span)
                )
            return
        opened = _OPEN_TAGS.get(lexeme)
        if opened is not None:
            self._open(opened, lexeme, out)
            return
        closed = _CLOSE_TAGS[lexeme]
        if self._span is None and self._orphan is not None:
            out.emit(
                ProtocolError(
                    UNCLOSED_SPAN,
                    f"{lexeme} closed a span cut off at the previous turn end; its rest dropped",
                    self._orphan,
                )
            )
            self._orphan = None
        elif self._span is None:
            out.emit(ProtocolError(STRAY_CLOSE, f"{lexeme} without an open span", closed))
        elif closed is not self._span:
            out.emit(
                ProtocolError(
                    STRAY_CLOSE,
                    f"{lexeme} inside an open <{self._span.value}> span; ignored",
                    closed,
                )
            )
        else:
            self._finish(out)

    def _open(self, channel: Channel, lexeme: str, out: _Events) -> None:
        if self._span is not None:
            out.emit(
                ProtocolError(
                    NESTED_OPEN,
                    f"{lexeme} inside an open <{self._span.value}> span; ignored",
                    self._span,
                )
            )
            return
        self._orphan = None  # a new span: the model has moved on from the cut-off one
        self._span = channel
        if channel is Channel.DELEGATE:
            self._delegates += 1
            if self._delegates > 1:
                self._discarding = True
                out.emit(
                    ProtocolError(
                        EXTRA_DELEGATE,
                        "only one <delegate> span is allowed per turn; content dropped",
                        channel,
                    )
                )
                return
        out.emit(SpanOpened(channel))

    def _finish(self, out: _Events) -> None:
        channel = self._span
        assert channel is not None
        if not self._discarding:
            content = "".join(self._content)
            if content.strip():
                out.emit(PrivateSpan(channel, content))
            else:
                out.emit(ProtocolError(EMPTY_SPAN, f"empty <{channel.value}> span", channel))
        self._close_span()

    def _close_span(self) -> None:
        self._span = None
        self._content = []
        self._content_len = 0
        self._discarding = False


_ESCAPE: Final = "\u2039"  # "‹"
_ESCAPE_WORDS: Final[tuple[str, ...]] = ("/delegate", "/backend", "delegate", "backend")


def escape_tags(text: str) -> str:
    """Makes untrusted text unable to open or close a span or form a special token.

    Every ``<`` that begins ``<delegate``, ``</delegate``, ``<backend``, ``</backend``
    or ``<|`` is replaced by ``‹`` (U+2039), and so is a trailing ``<`` that begins a
    truncated prefix of one of them (e.g. ``"<dele"`` at the very end), so the text
    stays inert even if more text is appended.  Everything else is unchanged.

    Args:
        text: Arbitrary text, e.g. tool output.

    Returns:
        The escaped text.  Feeding it to a fresh :class:`SpanParser` and ending the
        turn yields only :class:`VisibleText` that concatenates back to it.
    """
    parts: list[str] = []
    i = 0
    n = len(text)
    while True:
        j = text.find("<", i)
        if j < 0:
            break
        rest = text[j + 1 : j + 11]  # longest word checked is 9 chars
        if rest.startswith("|") or any(
            rest.startswith(word) or (j + 1 + len(rest) == n and word.startswith(rest))
            for word in _ESCAPE_WORDS
        ):
            parts.append(text[i:j])
            parts.append(_ESCAPE)
            i = j + 1
        else:
            parts.append(text[i : j + 1])
            i = j + 1
    parts.append(text[i:])
    return "".join(parts)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (``"\\ud800"``...) replaced by U+FFFD.

    A Python string can hold surrogates that no UTF-8 encoder accepts (SQLite, ROS messages,
    files, sockets all raise on them); outside text is cleaned with this where it enters.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def split_visible(text: str, max_query_chars: int = 4000) -> tuple[str, list[ParseEvent]]:
    """Parses one complete model turn in one go.

    Args:
        text: The whole turn's text.
        max_query_chars: Largest accepted span content, in characters.

    Returns:
        The visible text (all :class:`VisibleText` joined) and every event, including
        those from ending the turn.
    """
    parser = SpanParser(max_query_chars)
    events = parser.feed(text) + parser.release()
    visible = "".join(e.text for e in events if isinstance(e, VisibleText))
    return visible, events
