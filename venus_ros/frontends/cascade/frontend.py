"""The cascade frontend: speech stack + trained floor policy + delegation router + responder.

:func:`make_cascade_frontend` assembles a :class:`~venus_ros.frontends.policy.PolicyFrontend`
(echo cancellation, Silero VAD, Whisper, espeak-ng) around

* the trained floor policy of :mod:`venus_ros.frontends.cascade.floor`
  (``load_floor_policy()``): who holds the floor at every unit boundary;
* the delegation router of :mod:`venus_ros.frontends.cascade.router` (``DelegationRouter``):
  which requests go to the background harness, and the query (the request with fillers and
  false starts removed) that the ``<delegate>`` span carries;
* :class:`CascadeResponder`: short local replies. Greetings, thanks and goodbyes are answered
  from templates; simple questions about the assistant itself ("what's your name", "what can
  you do", "how are you", "say that again") get a local answer; an empty or unintelligible
  transcript gets a clarifying question; a delegated request gets ``"Let me check."``; a
  backend reply is spoken as it came; a bare acknowledgement from the user ("okay", "uh-huh")
  is not answered at all.

It implements the frontend contract unchanged, so ``frontend_node``, ``venus-ros replay`` and
the evaluation runner use it like any other frontend; it is the default frontend
(:data:`venus_ros.frontends.DEFAULT_FRONTEND`).

When the trained floor policy or the router's weights are not available (not trained yet, or a
package missing), the frontend falls back to the :class:`~venus_ros.frontends.policy.VadBargeIn`
policy and :func:`~venus_ros.frontends.policy.delegate_all`, and logs one warning line that
names what is missing; :attr:`CascadeParts.fallbacks` lists them.

The packaged small language model is not used for replies: the templates cover the local
reply types the issue lists, cost nothing per unit, and cannot produce an unsafe or
hallucinated promise ("I have turned on the oven") that the harness never made.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from venus_ros.core.frontend import FrontendError
from venus_ros.core.protocol import escape_tags
from venus_ros.frontends.policy import (
    Delegator,
    FloorPolicy,
    NeverYield,
    PolicyFrontend,
    Responder,
    Response,
    UserRequest,
    VadBargeIn,
    delegate_all,
    parse_options,
)
from venus_ros.text.repair import is_filler_only

__all__ = [
    "CLARIFY_PHRASE",
    "LOCAL_ANSWERS",
    "CascadeFrontend",
    "CascadeParts",
    "CascadeResponder",
    "LocalAnswer",
    "load_parts",
    "make_cascade_frontend",
]

log = logging.getLogger("venus_ros.frontends.cascade")

CLARIFY_PHRASE = "Sorry, I didn't catch that. Could you say it again?"
"""What the assistant asks when the user's words could not be made out."""


@dataclass(frozen=True)
class LocalAnswer:
    """A local reply: said when ``pattern`` matches the user's whole request.

    The request is matched lower-cased, without punctuation, and without courtesy words
    around it (``"hey, what's your name please"`` is ``"what's your name"``): a local answer
    never swallows a request that asks for something more.

    Attributes:
        name: Short name of the intent, for logs and tests.
        pattern: Regular expression (case-insensitive) for the whole normalised request.
        reply: What to say (empty: the previous reply again).
    """

    name: str
    pattern: str
    reply: str


_NAME = r"(?: (?:there|robot|venus|again|everyone|buddy)){0,2}"
#: The local replies, tried in order; the first match answers.
LOCAL_ANSWERS: tuple[LocalAnswer, ...] = (
    LocalAnswer(
        "greeting",
        rf"(?:hi|hello|hey|hiya|howdy|good (?:morning|afternoon|evening)){_NAME}",
        "Hi! What can I do for you?",
    ),
    LocalAnswer(
        "thanks",
        rf"(?:thanks|thank you|cheers)(?: (?:very much|so much|a lot))?{_NAME}",
        "You're welcome!",
    ),
    LocalAnswer(
        "goodbye",
        rf"(?:bye|goodbye|bye bye|see you(?: later)?|good night){_NAME}",
        "Goodbye! Talk to you soon.",
    ),
    LocalAnswer(
        "repeat",
        r"(?:can you |could you )?(?:say that again|repeat that|come again|what did you say"
        r"|pardon)",
        "",
    ),
    LocalAnswer(
        "name", r"what(?:'s| is) your name|who are you", "I'm Venus, the assistant of this robot."
    ),
    LocalAnswer(
        "how_are_you",
        r"how are you(?: doing)?(?: today)?",
        "I'm doing well, thank you. How can I help?",
    ),
    LocalAnswer(
        "capabilities",
        r"what (?:can|could) you do|what are you able to do|what do you do",
        "I can talk with you while I listen, drive to places in the house, set timers, "
        "tell you the time, and do quick sums. When something takes a while, I keep "
        "talking with you and tell you when it is done.",
    ),
    LocalAnswer(
        "how_you_work",
        r"how do you work|how does (?:this|that|it) work",
        "I listen and speak in one-second steps, so I can hear you even while I talk. "
        "Small things I answer myself. Bigger jobs, like moving around or looking things "
        "up, go to a helper in the background, and I tell you the result when it is ready.",
    ),
)

#: A bare acknowledgement or back-channel: nothing to answer.
_ACK_ONLY = re.compile(
    r"(?:okay|ok|alright|all right|yeah|yes|yep|uh[- ]?huh|mm[- ]?hmm|mhm|right|sure|got it|"
    r"i see|cool|great|nice|good)(?: (?:okay|ok|yeah|right))*"
)
_PUNCT = re.compile(r"[^\w\s'-]+")
_HAS_WORD = re.compile(r"[A-Za-z]{2,}")
_LEAD = re.compile(
    r"^(?:(?:so|well|okay|ok|um|uh|hey|and|oh|yeah|yes|right|uh-huh|uh huh|mm-hmm|mhm) )+"
)
_TRAIL = re.compile(r"(?: (?:please|then|now|for me))+$")


def _normalise(text: str) -> str:
    """Lower-case words and single spaces, without punctuation (Whisper adds its own)."""
    return " ".join(_PUNCT.sub(" ", text).lower().split())


def _core(text: str) -> str:
    """The normalised request without courtesy words around it."""
    norm = _normalise(text)
    core = _TRAIL.sub("", _LEAD.sub("", norm))
    return core or norm


class CascadeResponder(Responder):
    """Local replies from templates; delegation by the router; backend replies spoken.

    Order for a user request: a transcript with no intelligible word (with ASR on) gets
    :data:`CLARIFY_PHRASE`; a bare acknowledgement or filler ("uh...") is not answered
    (None); a request that is wholly a greeting, thanks, goodbye or a simple question about the
    assistant gets its local answer (:data:`LOCAL_ANSWERS`); a request the delegator sends to
    the harness gets ``check_phrase`` and a ``<delegate>`` span (query cleaned by
    ``query_of``); anything else an acknowledgement (round robin). A waiting backend reply
    always comes first, spoken as it came.

    Args:
        delegator: transcript -> delegate? (the router's ``needs_delegation``).
        query_of: transcript -> query (the router's disfluency cleaning).
        answers: The local replies, tried in order.
        clarify_phrase: What to ask when nothing intelligible was heard.
        **kwargs: Passed to :class:`~venus_ros.frontends.policy.Responder`.
    """

    def __init__(
        self,
        delegator: Delegator = delegate_all,
        *,
        query_of: Callable[[str], str] | None = None,
        answers: Sequence[LocalAnswer] = LOCAL_ANSWERS,
        clarify_phrase: str = CLARIFY_PHRASE,
        **kwargs: Any,
    ) -> None:
        super().__init__(delegator, query_of=query_of, **kwargs)
        if not clarify_phrase.strip():
            raise ValueError("clarify_phrase: must not be empty")
        self.clarify_phrase = clarify_phrase.strip()
        compiled = []
        for answer in answers:
            try:
                regex = re.compile(answer.pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"local answer {answer.name!r}: bad pattern: {exc}") from exc
            compiled.append((answer, regex))
        self._answers = tuple(compiled)
        self._last_spoken = ""
        #: The intent of the latest response (``"clarify"``, ``"delegate"``, a
        #: :class:`LocalAnswer` name, ``"ack"``, ``"backend"``), for logs and tests.
        self.last_intent = ""

    def reset(self) -> None:
        """Start over: acknowledgement rotation and the remembered last reply."""
        super().reset()
        self._last_spoken = ""
        self.last_intent = ""

    def local_answer(self, transcript: str) -> tuple[str, str] | None:
        """``(intent, reply)`` of the first local answer matching ``transcript``, or None."""
        text = _core(transcript)
        if not text:
            return None
        for answer, regex in self._answers:
            if regex.fullmatch(text) is None:
                continue
            reply = answer.reply or self._last_spoken
            if not reply:  # "say that again" before anything was said
                reply = "I haven't said anything yet. What can I do for you?"
            return answer.name, reply
        return None

    def respond(self, request: UserRequest | None, backend: str | None = None) -> Response | None:
        """The response to a backend reply or a user request; None when there is none to give."""
        response = self._choose(request, backend)
        if response is not None:
            self._last_spoken = response.spoken
        return response

    def _choose(self, request: UserRequest | None, backend: str | None) -> Response | None:
        if backend is not None:
            response = super().respond(None, backend)
            if response is not None:
                self.last_intent = "backend"
                return response
        if request is None:
            return None
        transcript = " ".join(request.transcript.split())
        if request.asr and not _HAS_WORD.search(transcript):
            self.last_intent = "clarify"
            return Response(self.clarify_phrase, "ack")
        words = _normalise(transcript)
        if transcript and (_ACK_ONLY.fullmatch(words) or is_filler_only(words)):
            self.last_intent = "user_ack"
            return None
        local = self.local_answer(transcript)
        if local is not None:
            self.last_intent = local[0]
            return Response(local[1], "ack")
        if (transcript or not request.asr) and self.delegator(transcript):
            self.last_intent = "delegate"
            return Response(self.check_phrase, "delegate", self._query(request, transcript))
        self.last_intent = "ack"
        ack = self.acknowledgements[self._next_ack % len(self.acknowledgements)]
        self._next_ack += 1
        return Response(ack, "ack")

    def _query(self, request: UserRequest, transcript: str) -> str:
        """The delegated query: the cleaned transcript, cut at a word, escaped."""
        query = transcript
        if self.query_of is not None and transcript:
            query = self.query_of(transcript) or transcript
        query = " ".join(query.split())
        if len(query) > self.max_query_chars:
            cut = query.rfind(" ", 0, self.max_query_chars + 1)
            query = query[: cut if cut > 0 else self.max_query_chars]
        query = escape_tags(query)
        if not query:
            query = (
                f"the user's request from {request.start_s:.2f} s to {request.end_s:.2f} s "
                "(no transcript)"
            )
        return query


# ---------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CascadeParts:
    """The policy and router a cascade frontend was built with.

    Attributes:
        policy: The floor policy.
        delegator: transcript -> delegate?
        query_of: transcript -> delegated query (None: the transcript as it is).
        policy_name: ``"trained"`` or the baseline's name.
        router_name: ``"trained"`` or ``"delegate-all"``.
        fallbacks: What could not be loaded, one line each (empty when nothing fell back).
    """

    policy: FloorPolicy
    delegator: Delegator
    query_of: Callable[[str], str] | None
    policy_name: str
    router_name: str
    fallbacks: tuple[str, ...] = ()


def load_parts(policy: str = "trained", router: str = "trained") -> CascadeParts:
    """The floor policy and the delegation router, with fallbacks when the trained ones are missing.

    Args:
        policy: ``"trained"`` (:func:`venus_ros.frontends.cascade.floor.load_floor_policy`),
            ``"vad-bargein"`` or ``"never-yield"``.
        router: ``"trained"`` (:class:`~venus_ros.frontends.cascade.router.DelegationRouter`)
            or ``"all"`` (:func:`~venus_ros.frontends.policy.delegate_all`).

    Raises:
        FrontendError: an unknown policy or router name.
    """
    fallbacks: list[str] = []
    floor: FloorPolicy
    if policy == "trained":
        try:
            from venus_ros.frontends.cascade.floor import load_floor_policy

            floor = load_floor_policy()
            policy_name = "trained"
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            fallbacks.append(f"trained floor policy unavailable ({exc}); using vad-bargein")
            floor, policy_name = VadBargeIn(), "vad-bargein"
    elif policy == "vad-bargein":
        floor, policy_name = VadBargeIn(), policy
    elif policy == "never-yield":
        floor, policy_name = NeverYield(), policy
    else:
        raise FrontendError(
            f"cascade: unknown policy {policy!r}; choose trained, vad-bargein or never-yield"
        )
    delegator: Delegator = delegate_all
    router_name = "delegate-all"
    try:  # the query cleaning is plain text rules: it needs no trained weights
        from venus_ros.frontends.cascade.router import clean_disfluencies

        query_of: Callable[[str], str] | None = clean_disfluencies
    except ImportError as exc:
        query_of = None
        fallbacks.append(f"query cleaning unavailable ({exc}); delegating transcripts as heard")
    if router == "trained":
        try:
            from venus_ros.frontends.cascade.router import DelegationRouter

            delegator, router_name = DelegationRouter().needs_delegation, router
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            fallbacks.append(f"delegation router unavailable ({exc}); delegating every request")
    elif router != "all":
        raise FrontendError(f"cascade: unknown router {router!r}; choose trained or all")
    for line in fallbacks:
        log.warning("cascade frontend: %s", line)
    return CascadeParts(floor, delegator, query_of, policy_name, router_name, tuple(fallbacks))


class CascadeFrontend(PolicyFrontend):
    """A :class:`~venus_ros.frontends.policy.PolicyFrontend` built from :class:`CascadeParts`.

    One rule on top of the policy frontend: user speech that *began while the assistant's own
    turn was playing*, and that the floor policy let the turn talk through (no yield), was
    judged not to be for the assistant (a back-channel, a remark to someone else, the TV).
    When that turn's audio has finished and the user is no longer speaking, it is forgotten
    instead of being answered as a request. Speech that continues past the end of the turn,
    and speech the policy yielded to, is kept and answered as usual.

    Args:
        parts: The floor policy and router (:func:`load_parts`).
        **kwargs: Passed to :class:`~venus_ros.frontends.policy.PolicyFrontend` (``asr``,
            ``aec``, ``tts``, ``substeps``, ...); the responder is a :class:`CascadeResponder`
            over the parts' router unless ``responder`` is given.
    """

    def __init__(self, parts: CascadeParts, **kwargs: Any) -> None:
        kwargs.setdefault("responder", CascadeResponder(parts.delegator, query_of=parts.query_of))
        self._turn_began = 0.0
        self._finished_turn: tuple[float, float] | None = None
        #: How many times overlapped speech was forgotten at the end of a turn.
        self.ignored_overlaps = 0
        super().__init__(parts.policy, **kwargs)
        #: What the frontend was built with (and what fell back).
        self.parts = parts

    def prepare(self, system_prompt: str = "", ref_audio: Any = None) -> None:
        """Start a session (see :meth:`PolicyFrontend.prepare`)."""
        super().prepare(system_prompt, ref_audio)
        self._turn_began = 0.0
        self._finished_turn = None
        self.ignored_overlaps = 0

    def _begin(self, text: str, *, forced: bool, answers_user: bool) -> None:
        if self._turn is None:
            self._turn_began = float(self._mic_pos)
        super()._begin(text, forced=forced, answers_user=answers_user)

    def _emit(self, boundary: int, unit: Any) -> Any:
        out = super()._emit(boundary, unit)
        if self._turn is None:  # the turn finished with this audio (not a yield)
            self._finished_turn = (self._turn_began, self._play_end)
        return out

    def _yield(self, boundary: int) -> Any:
        self._finished_turn = None
        return super()._yield(boundary)

    def _prefill(self, unit: Any) -> None:
        super()._prefill(unit)
        finished = self._finished_turn
        if finished is None or self._turn is not None or self._frames_end < finished[1]:
            return
        self._finished_turn = None
        began, ended = finished
        start = self._user_turn_start
        transcribing = self._transcriber is not None and self._transcriber.in_utterance
        if start is None or not began <= start < ended or self._vad.speaking or transcribing:
            return
        self._user_turn_speech = 0
        self._user_turn_start = None
        self._user_texts = []
        self.ignored_overlaps += 1


def make_cascade_frontend(options: str = "") -> CascadeFrontend:
    """Build the cascade frontend from ``OPTION[,OPTION...]`` (the part after ``cascade:``).

    Options: ``asr``/``noasr`` (Whisper transcripts, on), ``aec``/``noaec`` (echo
    cancellation, off: turn it on where the microphone hears the speaker), ``partials``,
    ``tts=ENGINE`` (``espeak``, ``piper``, ``auto``), ``substeps=N`` (default: what the trained
    policy asks for, else 1), ``policy=trained|vad-bargein|never-yield``,
    ``router=trained|all``.

    The frontend's ``parts`` attribute holds the :class:`CascadeParts` it was built with.

    Raises:
        FrontendError: an unknown option or value.
    """
    kwargs, choice = parse_options("cascade", options, values={"policy": str, "router": str})
    parts = load_parts(choice.get("policy", "trained"), choice.get("router", "trained"))
    policy_substeps = getattr(parts.policy, "substeps", None)
    if "substeps" not in kwargs and isinstance(policy_substeps, int) and policy_substeps >= 1:
        kwargs["substeps"] = policy_substeps
    # The trained policy reads the overlapping speech's words as they come (partials).
    if "asr_partials" not in kwargs and getattr(parts.policy, "wants_partials", False):
        kwargs["asr_partials"] = kwargs.get("asr", True) is not False
    try:
        return CascadeFrontend(parts, **kwargs)
    except ValueError as exc:
        raise FrontendError(f"frontend 'cascade': {exc}") from exc
