"""Playback accounting: which assistant samples have actually been played, and when.

The speaker plays queued speech chunks back to back in real time. Only what it has played counts
as heard. :class:`PlaybackQueue` models exactly that on a session clock, so that offline replay,
the evaluation runner and the speaker node share one definition of "played".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SpeechChunk:
    """One unit's worth of assistant speech, as sent to the speaker.

    Attributes:
        unit_index: the input unit whose output this is.
        turn_id: the assistant turn it belongs to.
        first_sample: position of its first sample in the assistant's output stream.
        audio: mono float32 samples at ``sample_rate``.
        sample_rate: playback rate.
        text: the visible text this audio speaks.
    """

    unit_index: int
    turn_id: int
    first_sample: int
    audio: np.ndarray
    sample_rate: int
    text: str

    @property
    def samples(self) -> int:
        """Number of samples in the chunk."""
        return int(self.audio.shape[0])


@dataclass(frozen=True)
class PlaybackAck:
    """The speaker's report of how much of a chunk has been played.

    ``samples_played`` is cumulative for the chunk; ``flushed`` means the rest was discarded.
    """

    unit_index: int
    samples_played: int
    samples_total: int
    flushed: bool = False

    @property
    def complete(self) -> bool:
        """The chunk is finished: fully played or flushed."""
        return self.flushed or self.samples_played >= self.samples_total


@dataclass
class _Playing:
    chunk: SpeechChunk
    start_t: float
    played: int = 0


class PlaybackQueue:
    """A real-time speaker model: chunks play back to back from when they are enqueued.

    Args:
        sample_rate: the speaker's rate; chunks must match it.
        record: keep every played piece as ``(start_time, samples)`` in :attr:`played_audio`
            (offline replay writes them out; a long-running speaker leaves this off).
    """

    def __init__(self, sample_rate: int, record: bool = False) -> None:
        if sample_rate <= 0:
            raise ValueError(f"speech.sample_rate must be > 0, got {sample_rate}")
        self.sample_rate = int(sample_rate)
        self._queue: deque[_Playing] = deque()
        self._free_at = 0.0
        self._record_audio = record
        self.played_audio: list[tuple[float, np.ndarray]] = []

    def enqueue(self, chunk: SpeechChunk, t: float) -> None:
        """Queue ``chunk`` at session time ``t``; it starts when the speaker is free."""
        if chunk.sample_rate != self.sample_rate:
            raise ValueError(
                f"speech.sample_rate: chunk is {chunk.sample_rate} Hz, speaker plays "
                f"{self.sample_rate} Hz"
            )
        if chunk.samples == 0:
            return
        start = max(t, self._free_at)
        self._free_at = start + chunk.samples / self.sample_rate
        self._queue.append(_Playing(chunk, start))

    def advance(self, t: float) -> list[PlaybackAck]:
        """Play everything due by time ``t``; one ack per chunk that made progress."""
        acks: list[PlaybackAck] = []
        while self._queue:
            item = self._queue[0]
            due = round((t - item.start_t) * self.sample_rate)
            due = min(max(due, 0), item.chunk.samples)
            if due > item.played:
                self._record(item, due)
                acks.append(PlaybackAck(item.chunk.unit_index, due, item.chunk.samples))
            if due < item.chunk.samples:
                break
            self._queue.popleft()
        return acks

    def flush(self, t: float) -> list[PlaybackAck]:
        """Stop at time ``t``: play what is due, discard the rest, ack every discarded chunk."""
        acks = self.advance(t)
        for item in self._queue:
            acks.append(
                PlaybackAck(item.chunk.unit_index, item.played, item.chunk.samples, flushed=True)
            )
        self._queue.clear()
        self._free_at = t
        return acks

    @property
    def idle_at(self) -> float:
        """Session time at which everything queued will have played."""
        return self._free_at

    def scheduled(self) -> list[tuple[float, np.ndarray]]:
        """What is queued and not yet played, as ``(start_time, samples)`` in playing order.

        Each piece starts where its chunk's playback has got to; together with
        :attr:`played_audio` it is what the speaker will have played if nothing is flushed.
        Read-only: nothing is played or acknowledged.
        """
        return [
            (item.start_t + item.played / self.sample_rate, item.chunk.audio[item.played :])
            for item in self._queue
        ]

    @property
    def pending_samples(self) -> int:
        """Samples queued and not yet played."""
        return sum(item.chunk.samples - item.played for item in self._queue)

    def _record(self, item: _Playing, due: int) -> None:
        if self._record_audio:
            start = item.start_t + item.played / self.sample_rate
            self.played_audio.append((start, item.chunk.audio[item.played : due]))
        item.played = due


def render_played(pieces: Sequence[tuple[float, np.ndarray]], rate: int) -> np.ndarray:
    """Place played pieces ``(start_time, samples)`` (:attr:`PlaybackQueue.played_audio`) at
    their session time: what a listener in the room heard; index 0 is t = 0."""
    end = max((round(t * rate) + len(a) for t, a in pieces), default=0)
    track = np.zeros(end, dtype=np.float32)
    for t, samples in pieces:
        start = round(t * rate)
        track[start : start + len(samples)] += samples
    return track
