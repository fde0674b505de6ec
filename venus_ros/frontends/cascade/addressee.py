"""Addressee evidence: was a finished user utterance said to the assistant?

Robots live with other people, televisions and radios. Speech that is not for the assistant
must not be answered, delegated, or merged into the next real request, whether the assistant
is speaking or silent. :class:`Addressee` judges one finished utterance (:class:`Utterance`:
its final transcript, where it was, how loud it was) from general evidence, in this order:

1. **The assistant's name** as a vocative at the start or the end ("Venus, ...", "..., Venus?",
   "hey Venus") -> addressed.
2. **An answer to the assistant's question**: the utterance starts within
   :data:`ANSWER_WINDOW_S` of the end of an assistant turn that ended with a question ->
   addressed ("Paris, please." answers "Which city?").
3. **Another vocative** at the start or the end: a capitalised word that is not a common
   English word (a name, "Hey Oliver, ...") or a term of address ("mum", "guys") -> not
   addressed.
4. **Level**: speech from farther away (a television, a second talker across the room) is
   quieter than the user. Its voiced level is compared with the user's running level (the
   mean of the utterances judged addressed, starting from :data:`PRIOR_USER_DB`); at least
   :data:`QUIET_MARGIN_DB` below it, and not phrased clearly as a request (text score below
   :data:`CLEAR_REQUEST`), -> not addressed.
5. **Phrasing**: a tiny logistic head on the all-MiniLM-L6-v2 sentence embedding next to
   hashed words and word pairs (the router's
   :func:`~venus_ros.frontends.cascade.router.lexical_features`; ``models/addressee.npz``,
   trained by :mod:`venus_ros.training.addressee` on the training part of the synthesizer's
   phrase families and the router's corpus only) scores how much the
   words read as something said to an assistant (a question, a request, a command, chit-chat
   with it) rather than a remark to someone else, a TV or radio line. The head is weak on its
   own (on held-out training phrases it keeps 97 % of requests but catches only about 40 % of
   remarks, ``models/addressee_report.md``), so it never drops speech at the user's level:
   below its calibrated threshold *and* at least :data:`SOFTER_DB` below the user's level
   (turned away, farther) -> not addressed.

Nothing here is keyed to a sentence of an evaluation suite; the lexicons are general English
(discourse words that start sentences, terms of address).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from venus_ros.frontends.cascade.texthead import TextHead

if TYPE_CHECKING:
    from venus_ros.frontends.cascade.embed import Embedder

__all__ = [
    "ANSWER_WINDOW_S",
    "CLEAR_REQUEST",
    "MODEL_PATH",
    "PRIOR_USER_DB",
    "QUIET_MARGIN_DB",
    "SOFTER_DB",
    "Addressee",
    "Utterance",
    "Verdict",
    "vocative",
]

MODEL_PATH = Path(__file__).resolve().parent / "models" / "addressee.npz"
"""The committed text head (weights, threshold, embedder name)."""
ANSWER_WINDOW_S = 6.0
"""Speech starting this soon after an assistant question finished playing answers it."""
PRIOR_USER_DB = -26.0
"""The user's voiced level (dBFS of the 32 ms VAD frames) assumed before any utterance was judged
addressed: normal speech near the robot's microphone (the training part of the synthesizer
speaks at -23 dBFS, +-3 dB)."""
QUIET_MARGIN_DB = 7.0
"""Speech this far below the user's running level is from farther away (TV, another talker)."""
SOFTER_DB = 3.0
"""Speech this far below the user's level may be dropped on its phrasing alone."""
CLEAR_REQUEST = 0.9
"""A text score at or above this overrides the level evidence (a quiet user still asking)."""
LEVEL_WEIGHT = 0.3
"""Weight of a new addressed utterance's level in the user's running level."""

#: Words that start (or end) a sentence followed by a comma without naming anyone; general
#: English discourse markers, interjections and politeness words.
_DISCOURSE = frozenset(
    """okay ok alright right well so now then yes yeah yep yup no nope nah sure oh ah aha uh um
    er erm hm hmm mm mhm huh wow oops whoops ouch ugh oh gosh goodness god jeez sorry please
    thanks thank cheers hello hi hey oi listen look see wait hold hang stop actually anyway
    besides also and but or because though although however still first second next finally
    honestly seriously basically really perfect great good fine lovely brilliant nice cool
    excellent awesome true exactly indeed maybe perhaps probably definitely absolutely
    apparently sadly luckily unfortunately fortunately meanwhile otherwise instead plus
    today tomorrow yesterday tonight morning evening afternoon later earlier recently lately
    once twice here there what why how when where who which whose whatever anyway just
    quick quickly again enough fair agreed done careful quiet silence shh sh psst excuse pardon
    i you he she it we they me him her us them my your his its our their this that these those
    the a an if in on at for with from by to of as about after before since until while like
    one two three four five six seven eight nine ten mister sir madam monday tuesday wednesday
    thursday friday saturday sunday january february march april may june july august
    september october november december""".split()
)
#: Terms of address for people (general English): a vocative even when not capitalised.
_TERMS_OF_ADDRESS = frozenset(
    """mum mom mummy mommy mama dad daddy papa grandma granny nan nana grandpa grandad gramps
    honey darling sweetheart sweetie love babe baby dear mate buddy pal dude guys kids folks
    everyone everybody son sweetpea""".split()
)
#: Ways of calling the assistant itself other than by its name.
_SELF_TERMS = frozenset({"robot", "assistant", "computer"})
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _is_name_like(word: str, assistant: str) -> bool:
    """A word that can name someone: the assistant's name, a term of address, or a
    capitalised word that is not a common discourse word."""
    low = word.lower().strip("'-")
    if not low:
        return False
    if low == assistant or low in _TERMS_OF_ADDRESS:
        return True
    return word[0].isupper() and low not in _DISCOURSE and len(low) >= 2


def vocative(text: str, assistant: str = "venus") -> str | None:
    """The person ``text`` addresses by name at its start or end, lower case, or None.

    A vocative is a name-like word set off from the rest of the sentence by a comma:
    "Sam, ...", "Hey Sam, ...", "Okay, Sam, ...", "... please, Sam." or "Thanks, Sam!" (not
    "... mountain? Africa?"). The assistant's name
    counts wherever it is set off like that (also "hey Venus" without a comma), and so do
    "robot", "assistant" and "computer" set off by a comma (the assistant's name is returned).

    Args:
        text: A final transcript.
        assistant: The assistant's name (compared in lower case).
    """
    assistant = assistant.lower()
    words = _TOKEN.findall(text)
    if any(w.lower() == assistant for w in words[:3] + words[-2:]):
        return assistant
    pieces = re.split(r"([,.!?;:]+)", text)
    # (clause, delimiter before it, delimiter after it), empty clauses left out
    clauses = [
        (
            pieces[i].strip(),
            pieces[i - 1] if i else "",
            pieces[i + 1] if i + 1 < len(pieces) else "",
        )
        for i in range(0, len(pieces), 2)
        if pieces[i].strip()
    ]
    if len(clauses) < 2:
        return None  # one clause ("Thanks.", "Sam!"): no vocative set off from the rest
    # A vocative is set off by a comma: "Sam, ..." / "..., Sam." ("...? Africa?" is not one).
    candidates = [(c, "," in after) for c, _, after in clauses[:2]]
    candidates.append((clauses[-1][0], "," in clauses[-1][1]))
    for clause, comma in candidates:
        tokens = _TOKEN.findall(clause)
        if tokens and tokens[0].lower() in ("hey", "oi", "hi", "hello", "thanks", "cheers", "ok"):
            tokens = tokens[1:]
        if not comma or len(tokens) != 1:
            continue
        if tokens[0].lower() in _SELF_TERMS:
            return assistant  # "Hi there, robot!"
        if _is_name_like(tokens[0], assistant):
            return tokens[0].lower()
    return None
    candidates = clauses[:2] + clauses[-1:]
    for clause in candidates:
        tokens = _TOKEN.findall(clause)
        if tokens and tokens[0].lower() in ("hey", "oi", "hi", "hello", "thanks", "cheers", "ok"):
            tokens = tokens[1:]
        if len(tokens) != 1 or len(clauses) == 1:
            continue  # the whole sentence is one word ("Thanks."): no vocative
        if tokens[0].lower() in _SELF_TERMS:
            return assistant  # "Hi there, robot!"
        if _is_name_like(tokens[0], assistant):
            return tokens[0].lower()
    return None


@dataclass(frozen=True)
class Utterance:
    """One finished user utterance, as the frontend heard it.

    Attributes:
        text: Its final transcript (may be empty when nothing was made out).
        start_s: Session time of its first voiced frame.
        speech_db: Mean voiced level, dBFS of the 32 ms VAD frames (None: unknown, e.g. all of it
            over the assistant's own audio).
        after_question_s: Seconds from the end of the latest assistant turn to ``start_s``
            when that turn ended with a question; None otherwise.
    """

    text: str
    start_s: float = 0.0
    speech_db: float | None = None
    after_question_s: float | None = None


@dataclass(frozen=True)
class Verdict:
    """Whether an utterance was said to the assistant, and why.

    Attributes:
        addressed: The decision.
        reason: ``"own_name"``, ``"other_name"``, ``"answer"``, ``"quiet"``, ``"text"``
            (the text head decided) or ``"no_text"`` (nothing to judge: kept).
        score: The text head's probability of being addressed (None when not computed).
        level_delta_db: ``speech_db`` minus the user's running level (None when unknown).
    """

    addressed: bool
    reason: str
    score: float | None = None
    level_delta_db: float | None = None


class Addressee:
    """Judges finished utterances (see the module docstring for the evidence and its order).

    Args:
        name: The assistant's name (``CascadeConfig.name``).
        head: The text head (None: :data:`MODEL_PATH`, loaded on first use; without it the
            phrasing evidence is skipped and the rest still applies).
        embedder: Sentence embedder for the head (None: a new fp32 all-MiniLM-L6-v2, on first
            use).
        prior_user_db: The user's level before any utterance was judged addressed.
        quiet_margin_db: How far below the user's level speech counts as from afar.
        answer_window_s: How soon after an assistant question speech answers it.

    Attributes:
        user_db: The user's running voiced level, dBFS.
        verdicts: Every verdict of the session, in order.
    """

    def __init__(
        self,
        name: str = "Venus",
        head: TextHead | None = None,
        embedder: Embedder | Any | None = None,
        *,
        prior_user_db: float = PRIOR_USER_DB,
        quiet_margin_db: float = QUIET_MARGIN_DB,
        answer_window_s: float = ANSWER_WINDOW_S,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("addressee: name must be a non-empty string")
        for label, value in (
            ("prior_user_db", prior_user_db),
            ("quiet_margin_db", quiet_margin_db),
            ("answer_window_s", answer_window_s),
        ):
            if not math.isfinite(value):
                raise ValueError(f"addressee: {label} must be finite, got {value!r}")
        if quiet_margin_db <= 0 or answer_window_s < 0:
            raise ValueError("addressee: quiet_margin_db must be > 0, answer_window_s >= 0")
        self.name = name.strip()
        self._head = head
        self._head_tried = head is not None
        self._embedder = embedder
        self.prior_user_db = float(prior_user_db)
        self.quiet_margin_db = float(quiet_margin_db)
        self.answer_window_s = float(answer_window_s)
        self.user_db = self.prior_user_db
        self.verdicts: list[Verdict] = []

    def reset(self) -> None:
        """Start a new session: the user's level goes back to the prior; verdicts cleared."""
        self.user_db = self.prior_user_db
        self.verdicts = []

    @property
    def head(self) -> TextHead | None:
        """The text head (loaded on first use; None when it cannot be loaded)."""
        if not self._head_tried:
            self._head_tried = True
            try:
                self._head = TextHead.load(MODEL_PATH)
            except (OSError, ValueError):
                self._head = None
        return self._head

    def score(self, texts: Sequence[str]) -> npt.NDArray[np.float64] | None:
        """The text head's probabilities for ``texts`` (None without a head)."""
        head = self.head
        if head is None:
            return None
        if self._embedder is None:
            from venus_ros.frontends.cascade.embed import Embedder

            self._embedder = Embedder()
        texts = list(texts)
        return head.scores(self._embedder.embed(texts), texts)

    def judge(self, utterance: Utterance) -> Verdict:
        """Decide one utterance and update the user's running level when it was addressed."""
        verdict = self._decide(utterance)
        self.verdicts.append(verdict)
        if verdict.addressed and utterance.speech_db is not None and verdict.reason != "no_text":
            self.user_db += LEVEL_WEIGHT * (utterance.speech_db - self.user_db)
        return verdict

    def _decide(self, u: Utterance) -> Verdict:
        delta = None if u.speech_db is None else u.speech_db - self.user_db
        quiet = delta is not None and delta <= -self.quiet_margin_db
        text = " ".join(u.text.split())
        if not text:
            # Nothing was made out: only the level can tell (a quiet murmur is not for us).
            return Verdict(not quiet, "quiet" if quiet else "no_text", None, delta)
        called = vocative(text, self.name)
        if called == self.name.lower():
            return Verdict(True, "own_name", None, delta)
        if u.after_question_s is not None and 0.0 <= u.after_question_s <= self.answer_window_s:
            return Verdict(True, "answer", None, delta)
        if called is not None:
            return Verdict(False, "other_name", None, delta)
        scores = self.score([text])
        score = None if scores is None else float(scores[0])
        if quiet and (score is None or score < CLEAR_REQUEST):
            return Verdict(False, "quiet", score, delta)
        head = self.head
        softer = delta is not None and delta <= -SOFTER_DB
        if softer and score is not None and head is not None and score < head.threshold:
            return Verdict(False, "text", score, delta)
        return Verdict(True, "text", score, delta)
