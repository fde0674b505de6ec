"""Resettable per-session state objects for the policy and cascade frontends.

Everything a :class:`~venus_ros.frontends.policy.PolicyFrontend` learns during a session lives
in one :class:`SessionState`; ``prepare`` replaces it with a fresh one, so nothing of a previous
session can leak into the next (models and their settings live on the frontend itself). Each
of the cascade's session parts (:class:`~venus_ros.frontends.policy.SessionPart`) keeps its
own in one object here (:class:`AddresseeState`, :class:`OverlapState`), replaced by the
part's ``reset`` when ``prepare`` starts a session.
Positions are in microphone samples at 16 kHz (the unit timeline).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AddresseeState", "OverlapState", "SessionState"]


@dataclass
class SessionState:
    """What one session of a policy frontend has seen and done so far.

    Attributes:
        units_seen: Units taken in.
        next_scheduled: Index of the next scheduled turn not yet started.
        mic_pos: Microphone samples taken in (the unit timeline).
        offset: Microphone sample = stream sample + offset (grows over dropped units).
        frame_buf: Samples waiting for a whole VAD frame.
        frames_done: VAD frames analysed.
        frames_end: Microphone sample at the end of the newest frame.
        last_voiced_end: End of the user's latest voiced frame (None before any).
        user_turn_speech: Voiced frames since the assistant last took the floor.
        user_turn_start: Where that speech began (None when there is none).
        user_texts: Its final transcripts.
        user_confidence: The recogniser's confidence in each of ``user_texts``, by its text:
            the mean of Whisper's word probabilities (texts without words have none).
        user_turn_aside: That speech stopped the assistant but was judged, once its words were
            made out, not said to it (:attr:`~venus_ros.frontends.policy.UserRequest.aside`).
        turn: The assistant's turn in progress (None while listening).
        turn_overlap: Voiced user frames over that turn's audio.
        play_end: Microphone sample where the emitted audio stops playing.
        stopped_at: Microphone sample where the assistant last stopped for the user (a
            yield; None before any).
        ref_end: Echo canceller stream sample just past the reference given.
        intervals: Where the assistant's audio plays, microphone samples ``[start, end)``.
        said: The assistant's visible words as scheduled to play, ``(start, end, text)`` per
            piece in microphone samples: what an echo of it would say
            (:func:`venus_ros.text.echo.strip_echo`).
        backend: Backend replies received and not yet spoken.
        unit: The unit taken in by ``prefill`` and not yet answered by ``generate``.
        last_obs: The observation of the latest boundary.
        action: The policy's answer for the latest boundary.
        steps: What happened at every boundary.
        observations: Every observation (when the frontend records them).
        compute: Wall-clock seconds of ``prefill`` + ``generate`` per unit.
        wall: Wall-clock seconds of the latest ``prefill``.
    """

    action: Any
    units_seen: int = 0
    next_scheduled: int = 0
    mic_pos: int = 0
    offset: int = 0
    frame_buf: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    frames_done: int = 0
    frames_end: float = 0.0
    last_voiced_end: float | None = None
    user_turn_speech: int = 0
    user_turn_start: float | None = None
    user_texts: list[str] = field(default_factory=list)
    user_confidence: dict[str, float] = field(default_factory=dict)
    user_turn_aside: bool = False
    turn: Any = None
    turn_overlap: int = 0
    play_end: float = 0.0
    stopped_at: float | None = None
    ref_end: float = 0.0
    intervals: deque[list[float]] = field(default_factory=deque)
    said: deque[list[Any]] = field(default_factory=deque)
    backend: deque[str] = field(default_factory=deque)
    unit: Any = None
    last_obs: Any = None
    steps: list[Any] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    compute: list[float] = field(default_factory=list)
    wall: float = 0.0

    def forget_user_turn(self) -> None:
        """Drop the user's speech since the assistant last took the floor (answered or ignored)."""
        self.user_turn_speech = 0
        self.user_turn_start = None
        self.user_texts = []
        self.user_confidence = {}
        self.user_turn_aside = False


@dataclass
class AddresseeState:
    """What the addressee gate of one session has seen: the utterance in progress (its voiced
    frames' energy and start), the verdicts on the user texts pending, and the latest assistant
    turn that ended.

    Attributes:
        unit: The unit whose frames were accounted so far.
        seen: Frames of that unit accounted.
        energy: Sum of 10^(dB/10) over the utterance's voiced frames (assistant silent).
        voiced: Those frames.
        start_s: Session time of the first voiced frame since the last judged utterance.
        end_s: Session time just past the latest voiced frame.
        texts: The ``user_texts`` list the verdicts belong to.
        verdicts: One verdict per text of ``texts``.
        spans: Per text of ``texts``, ``(start_s, end_s)`` of its utterance (``end_s`` None:
            unknown).
        question_end_s: Where the latest turn ended, if it played out and asked something.
        yielded_to: The floor policy yielded to the user's speech since the assistant last
            took the floor: that speech is for the assistant, whatever its words.
        turn_start_s: Session time the assistant last took the floor (None before it did).
        yielded_from_s: Where the speech the floor policy yielded to began (None: unknown, or
            no yield since the assistant last took the floor).
        voicing: Per frame from the utterance's first voiced frame, whether it was voiced
            (None once the assistant's audio played over it: its opening is not judged).
        dropped: Utterances dropped as not addressed, this session.
        turn_dropped: Texts of the pending user turn (``texts``) dropped as not addressed: once
            none is left, the turn is forgotten, not answered.
        talked_through: Utterances dropped, this session, as talked through before the speech
            the floor policy yielded to.
    """

    unit: int = -1
    seen: int = 0
    energy: float = 0.0
    voiced: int = 0
    start_s: float | None = None
    end_s: float = 0.0
    texts: list[str] | None = None
    verdicts: list[Any] = field(default_factory=list)
    spans: list[tuple[float, float | None]] = field(default_factory=list)
    question_end_s: float | None = None
    yielded_to: bool = False
    turn_start_s: float | None = None
    yielded_from_s: float | None = None
    voicing: list[bool] | None = field(default_factory=list)
    dropped: int = 0
    turn_dropped: int = 0
    talked_through: int = 0


@dataclass
class OverlapState:
    """What the overlap rule of one session has seen (microphone samples).

    Attributes:
        turn_began: Where the current (or last) turn began.
        finished_turn: ``(began, ended)`` of a turn that finished by playing out (not a yield),
            until the speech that overlapped it has been judged.
        ignored_overlaps: How often overlapped speech was forgotten at the end of a turn.
    """

    turn_began: float = 0.0
    finished_turn: tuple[float, float] | None = None
    ignored_overlaps: int = 0
