"""The turn player: an assistant turn as per-unit pieces of words and audio.

A :class:`Turn` holds what is left to say as pieces of at most one unit of audio each
(:func:`split_turn`), what was handed out so far, and, for a generated reply, the stream its
later phrases come from. :class:`TurnPlayer` voices text (TTS, silence trimmed), starts turns,
takes a stream's finished phrases into the turn (:meth:`TurnPlayer.feed`, waiting a bounded
time) and hands out the next piece (:meth:`TurnPlayer.next_piece`). Playback scheduling and the
echo canceller's reference stay with the frontend; nothing here knows about the unit loop.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from venus_ros.core.protocol import split_visible
from venus_ros.frontends.perception import SAMPLE_RATE

if TYPE_CHECKING:
    from venus_ros.audio.tts import Tts

__all__ = ["Turn", "TurnPlayer", "split_turn", "trim_silence"]

_TOKEN = re.compile(r"\S+\s*")


@dataclass
class Turn:
    """An assistant turn in progress.

    Attributes:
        chunks: What is left to hand out: ``(text, audio)`` pieces, at most a unit each.
        forced: The turn was scheduled (not chosen by the floor policy).
        total16: The turn's audio so far, in 16 kHz samples.
        intervals: Where its audio plays, microphone samples ``[start, end)``.
        source: A reply stream still producing words (``take(wait_s)``, ``cancel()``, and
            optionally ``give_up() -> str`` and ``open() -> str``).
        said: The text handed out so far, piece by piece.
        waited: Units in a row that had nothing to hand out while the stream was producing.
        opened: The turn began with its stream's opener and the reply has said nothing since.
    """

    chunks: deque[tuple[str, np.ndarray]]
    forced: bool
    total16: float
    intervals: list[list[float]] = field(default_factory=list)
    source: Any = None
    said: list[str] = field(default_factory=list)
    waited: int = 0
    opened: bool = False

    def heard_text(self) -> str:
        """The visible words handed out so far (private spans removed)."""
        return " ".join(split_visible("".join(self.said))[0].split())

    def unheard_text(self) -> str:
        """The visible words the turn still held: pieces not handed out, then the words its
        stream generated but had not yet handed over (what the assistant was about to say)."""
        rest = "".join(t for t, _ in self.chunks)
        pending = getattr(self.source, "pending", None) if self.source is not None else None
        if callable(pending):
            rest += " " + str(pending())
        return " ".join(split_visible(rest)[0].split())


class TurnPlayer:
    """Voices turns and hands them out one unit's piece at a time.

    Args:
        tts: The voice.
        max_unit_audio_s: Most audio per piece, in seconds.
        stream_wait_s: Longest :meth:`feed` waits for a stream's next phrase when nothing of
            the turn is left to hand out.
        max_wait_units: After this many units in a row with nothing to say, the stream gives
            up (``give_up()``): its fallback is said if it said nothing yet, else the turn
            ends, so a slow generation never leaves the user in silence for long.

    A turn whose first piece finds nothing to say (no text given, the stream's first phrase
    not ready after the bounded wait) says the stream's opener instead (``open()``, a short
    acknowledgement), where the stream has one: the turn's audio starts at its first boundary.
    The reply then has one more unit: if that one too finds nothing, the stream gives up at
    once, so its fallback follows the opener without a second pause (the opener counts as
    one of the ``max_wait_units``, so a turn never waits longer than without it).
    """

    def __init__(
        self,
        tts: Tts,
        max_unit_audio_s: float = 1.0,
        stream_wait_s: float = 0.15,
        max_wait_units: int = 3,
    ):
        if max_wait_units < 1:
            raise ValueError(f"max_wait_units: must be >= 1, got {max_wait_units}")
        self.tts = tts
        self.rate = int(tts.output_rate)
        self.max_unit_audio_s = float(max_unit_audio_s)
        self.stream_wait_s = float(stream_wait_s)
        self.max_wait_units = int(max_wait_units)

    @property
    def chunk(self) -> int:
        """Samples (at the voice's rate) in a full piece."""
        return max(1, round(self.max_unit_audio_s * self.rate))

    def voice(self, text: str) -> np.ndarray:
        """The trimmed TTS audio of ``text``'s visible words."""
        visible, _ = split_visible(text)
        blocks = list(self.tts.synthesize(visible)) if visible.strip() else []
        return trim_silence(np.concatenate(blocks) if blocks else np.zeros(0), self.rate)

    def start(
        self, text: str, *, forced: bool, source: Any = None, current: Turn | None = None
    ) -> Turn:
        """A turn voicing ``text`` (then ``source``'s phrases); ``current`` is continued.

        Continuing replaces what is left of ``current`` (its stream is cancelled) and keeps
        what it already played.
        """
        audio = self.voice(text)
        chunks = split_turn(text, audio, self.chunk) if audio.size or source is None else deque()
        total16 = audio.size * SAMPLE_RATE / self.rate
        if current is None:
            return Turn(chunks, forced, total16, [], source)
        if current.source is not None:
            current.source.cancel()
        current.source = source
        current.chunks = chunks
        current.forced = forced
        current.total16 = total16 + sum(e - s for s, e in current.intervals)
        return current

    def feed(self, turn: Turn) -> None:
        """Voice the phrases ``turn``'s stream finished since the last call (bounded wait)."""
        if turn.source is None:
            return
        text, done = turn.source.take(self.stream_wait_s if not turn.chunks else 0.0)
        if not text.strip() and not done and not turn.chunks:
            turn.waited += 1  # a unit the reply kept the user waiting (an opener or not)
            opener = getattr(turn.source, "open", None)
            give_up = getattr(turn.source, "give_up", None)
            if not turn.said and callable(opener):  # the turn's first piece: not a silent one
                text = str(opener())
                turn.opened = bool(text.strip())
            late = turn.opened or turn.waited >= self.max_wait_units
            if not text.strip() and late and callable(give_up):
                text, done = give_up(), True
        elif text.strip():
            turn.waited = 0
            turn.opened = False
        if done:
            turn.source = None
        if not text.strip():
            return
        text = text.strip() + " "  # words of later phrases stay apart
        audio = self.voice(text)
        rest_text = "".join(t for t, _ in turn.chunks)
        if rest_text and not rest_text.endswith(" "):
            rest_text += " "
        rest = [a for _, a in turn.chunks] + [audio]
        turn.chunks = split_turn(rest_text + text, np.concatenate(rest), self.chunk)
        turn.total16 += audio.size * SAMPLE_RATE / self.rate

    def next_piece(self, turn: Turn) -> tuple[str, np.ndarray, bool]:
        """``(text, audio, last)``: the next piece (after :meth:`feed`); ``last`` ends the turn."""
        self.feed(turn)
        if turn.chunks:
            text, audio = turn.chunks.popleft()
        else:
            text, audio = "", np.zeros(0, np.float32)
        turn.said.append(text)
        return text, audio, not turn.chunks and turn.source is None


def trim_silence(
    audio: np.ndarray, rate: int, lead_s: float = 0.01, tail_s: float = 0.04
) -> np.ndarray:
    """Cut the engine's leading and trailing silence (below -50 dBFS), keeping short margins.

    espeak-ng pads every sentence; untrimmed, "Let me check." needs a second unit and every
    turn ends with dead air.
    """
    audio = np.asarray(audio, dtype=np.float32)
    loud = np.flatnonzero(np.abs(audio) > 10 ** (-50 / 20))
    if loud.size == 0:
        return audio[:0].copy()
    start = max(int(loud[0]) - round(lead_s * rate), 0)
    end = min(int(loud[-1]) + 1 + round(tail_s * rate), audio.size)
    return audio[start:end].copy()


def split_turn(text: str, audio: np.ndarray, chunk: int) -> deque[tuple[str, np.ndarray]]:
    """Cut a turn into per-unit ``(text, audio)`` pieces of at most ``chunk`` samples.

    The visible words go to the piece during whose audio they fall, by character position in
    proportion to the audio (whole words); a private span goes with the word before it (or the
    first piece). There is always at least one piece.
    """
    tokens: list[tuple[str, bool]] = []  # (token, is_private)
    pos = 0
    for match in re.finditer(r"<delegate>.*?</delegate>\s*", text, re.DOTALL):
        tokens.extend((t, False) for t in _TOKEN.findall(text[pos : match.start()]))
        tokens.append((match.group(), True))
        pos = match.end()
    tokens.extend((t, False) for t in _TOKEN.findall(text[pos:]))
    count = max(1, math.ceil(audio.size / chunk))
    visible_len = len(split_visible(text)[0]) or 1
    texts = [""] * count
    seen = 0
    piece = 0
    for token, private in tokens:
        if not private:
            piece = min(count - 1, seen * count // visible_len)
            seen += len(token)
        texts[piece] += token
    return deque((texts[i], audio[i * chunk : (i + 1) * chunk].copy()) for i in range(count))
