"""The frontend contract: what the duplex loop asks of a model, once per unit.

It mirrors the MiniCPM-o 4.5 duplex API (``prepare``, ``streaming_prefill``,
``streaming_generate``) so that a real checkpoint, a compiled engine, a remote server, the
embedded cascade and the scripted test frontend all plug into the same loop.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from venus_ros.core.units import InputUnit, PartialUnit

#: MiniCPM-o 4.5 speaks at 24 kHz.
DEFAULT_OUTPUT_RATE = 24000


class Decision(str, enum.Enum):
    """The decision taken at a unit boundary: ``<|listen|>`` or ``<|speak|>``."""

    LISTEN = "listen"
    SPEAK = "speak"


def _empty_audio() -> np.ndarray:
    return np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class UnitOutput:
    """What a frontend produced for one unit.

    Attributes:
        decision: listen or speak for this unit.
        text: the text delta generated in this unit (may contain private spans and tokens).
        audio: mono float32 speech for this unit at the frontend's ``output_sample_rate``.
        end_of_turn: the model emitted ``<|turn_eos|>`` in this unit. With ``LISTEN`` (or with
            no speech in the unit) it means the model yielded the floor; with speech it means the
            turn finished after this unit's audio.
    """

    decision: Decision
    text: str = ""
    audio: np.ndarray = field(default_factory=_empty_audio)
    end_of_turn: bool = False


class FrontendError(RuntimeError):
    """A frontend failed in a way the caller should report (bad model path, dead server...)."""


class Frontend(abc.ABC):
    """A full-duplex model driven one unit at a time.

    Implementations are called from the foreground thread only, strictly in the order
    ``prepare`` once, then ``prefill(unit)`` / ``generate()`` once per unit. A frontend that
    :attr:`hears_audio` is also given the microphone audio of the unit in progress as it
    arrives (:meth:`hear`, any number of times between two boundaries) and may ask for the
    assistant's speech to stop at once, or start a turn at once (:meth:`speak_now`); the
    decision of the unit in progress stays its boundary's.
    """

    #: Sample rate of :attr:`UnitOutput.audio`.
    output_sample_rate: int = DEFAULT_OUTPUT_RATE
    #: Whether :meth:`hear` is implemented (sub-unit stops). Off by default: the loop then
    #: gives the frontend audio only at boundaries.
    hears_audio: bool = False

    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        """Start a session (``duplex.prepare``). The default keeps no state."""

    @abc.abstractmethod
    def prefill(self, unit: InputUnit) -> None:
        """Feed one input unit (``streaming_prefill``)."""

    @abc.abstractmethod
    def generate(self) -> UnitOutput:
        """Decide and generate for the unit just prefilled (``streaming_generate``)."""

    def hear(self, piece: PartialUnit) -> bool:
        """Take microphone audio of the unit in progress as it arrives (before its boundary).

        Pieces of one unit come in order and without gaps (``piece.offset`` continues where the
        previous piece ended); the unit's ``prefill`` follows with the whole unit, whose samples
        at those positions are the same, and must then process only what ``hear`` has not.

        Returns:
            True to stop the assistant's speech now: the caller flushes the speaker at once, and
            the frontend ends its turn at the next boundary with a yield (``LISTEN`` and
            ``end_of_turn``). Ignored while the assistant is not speaking.

        Raises:
            NotImplementedError: a frontend that does not hear audio early (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} takes audio at unit boundaries only")

    def speak_now(self) -> UnitOutput | None:
        """After :meth:`hear`, while the assistant is silent: a turn to start at once,
        between boundaries, or None (the default: turns start at boundaries only).

        A ``SPEAK`` output is the turn's first unit of text and audio; its audio plays from
        now, and the turn goes on at the next boundary as if it had started at the last one
        (its ``generate`` gives the next unit's speech, or ends the turn). Anything else is
        ignored.
        """
        return None

    def schedule_turns(self, turns: Sequence[tuple[float, str]]) -> None:
        """Make the assistant speak ``text`` from session time ``start`` for each ``(start, text)``.

        Evaluation uses it (scenario ``assistant_turns``) so that overlap behaviour is measured
        independently of what the frontend would have said and when: at the first unit boundary
        at or after ``start`` the frontend starts (or continues) a turn voicing ``text``, and its
        own floor policy then decides whether to keep speaking or yield when the user overlaps.
        Call before the first unit.

        Raises:
            NotImplementedError: a frontend that cannot be made to speak (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot be made to speak given turns")

    def close(self) -> None:
        """Release resources. The default has none."""
