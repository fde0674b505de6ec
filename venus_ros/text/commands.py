"""Commands to stop or wait ("Stop.", "Hold on a second, please.", "Okay, enough."): what a
short request made only of them asks.

Part of the one language toolkit: the floor policy stops the assistant for a whole utterance
that is such a command, and the responder acknowledges it. General English, strongest first;
nothing here is keyed to a sentence of an evaluation suite (the evaluation has its own
lexicons and never imports this).
"""

from __future__ import annotations

import re

from venus_ros.text.repair import FILLER_WORDS
from venus_ros.text.requests import is_question
from venus_ros.text.speech import split_sentences

__all__ = [
    "COMMANDS",
    "COMMAND_PHRASES",
    "command_of",
    "command_then_question",
    "normalise",
    "split_command",
    "wait_with_reason",
]

#: Commands to stop or wait, strongest first: ``(name, pattern)`` over lower-case words.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("quiet", r"(?:be |keep )?quiet|silence|shush|s+h+(?=\s|$)|hush|stop talking|shut up"),
    ("stop", r"let me stop you|stop (?:it|that|please)|stop|enough|that's enough|that is enough"),
    ("never_mind", r"never ?mind|forget (?:it|that)|cancel(?: that)?|scratch that"),
    ("wait", r"wait(?: up)?|hold (?:on|it|up)|hang on"),
    (
        "moment",
        r"(?:just |only )?(?:one|a|1) (?:moment|second|sec|minute|bit)|"
        r"just a (?:moment|second|sec)",
    ),
)
#: The short commands written out, one common spelling each: what a recogniser that misheard a
#: short utterance over the assistant is asked to weigh it against
#: (:class:`~venus_ros.audio.asr.SegmentTranscriber`'s ``expect``). Each is a :data:`COMMANDS`
#: command (a test checks); the longer forms ("hold on a second, please") are left to the
#: recogniser's own reading.
COMMAND_PHRASES: tuple[str, ...] = (
    "Stop.",
    "Stop it.",
    "Enough.",
    "Quiet.",
    "Shush.",
    "Shut up.",
    "Wait.",
    "Wait up.",
    "Hold on.",
    "Hold it.",
    "Hold up.",
    "Hang on.",
    "Never mind.",
    "Forget it.",
    "One second.",
    "Just a second.",
)
#: Words that may come with a command ("okay, stop there", "no no, wait a second, please"),
#: fillers in any spelling ("Err, stop.", "Ah, hold on.": :data:`~venus_ros.text.repair.
#: FILLER_WORDS`) among them.
_COURTESY = (
    r"okay|ok|no|please|sorry|hey|o+h+|so|well|right|just|now|then|there|here|for|"
    rf"actually|again|guys|venus|robot|you|{FILLER_WORDS}"
)
_COMMAND_UNIT = re.compile(
    "|".join(f"(?P<{name}>{pattern})" for name, pattern in COMMANDS)
    + rf"|(?P<courtesy>{_COURTESY})(?=\s|$)"
)
#: Command words a misheard short command is taken for when one letter away ("top" -> "stop").
_COMMAND_WORDS = ("stop", "wait", "quiet", "hold", "hang")
_PUNCT = re.compile(r"[^\w\s'-]+")
#: Where a command may end and its reason begin ("Hold on, I need ...", "One second. Let me ...").
_CLAUSE_END = re.compile(r"\s*[,;:.!\u2014\u2013]+\s*|\s+-+\s+")
#: The speaker's own reason for a wait: something they must do first ("I need to write this
#: down", "let me find a pen", "my phone is ringing"), not a correction ("I meant ...").
_OWN_REASON = re.compile(
    r"(?:i (?:just )?(?:need to|have to|must|gotta|got to)|i've got to|i'm (?:just )?(?:going to|"
    r"gonna)|i'll just|let me|my)\b"
)
#: Most words a call to wait run on into its reason is read from ("just a second, let me ...").
_WAIT_WORDS = 4


def normalise(text: str) -> str:
    """``text`` in lower case, punctuation (but apostrophes and hyphens) turned to spaces, its
    words single-spaced: the form the command grammar reads."""
    return " ".join(_PUNCT.sub(" ", text).lower().split())


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by at most one inserted, deleted or replaced letter."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) <= 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def command_of(text: str, tolerant: bool = False) -> str | None:
    """The strongest command (a :data:`COMMANDS` name) ``text`` is made of, or None when it
    holds anything else.

    ``tolerant``: a short request (three words at most) may hold a word one letter away from a
    command word (the recogniser's "Top." for a clipped "Stop."), and two words opening with
    a command to stop or be quiet are that command whatever the second ("Stop mirror." for
    "Stop there."); for use right after the user cut the assistant off, where a command is
    what a short request most likely is.
    """
    words = normalise(text).split()
    if tolerant and len(words) <= 3:
        words = [
            next((c for c in _COMMAND_WORDS if len(w) >= 3 and _one_edit(w, c)), w) for w in words
        ]
    found = _commands_in(" ".join(words))
    if found is None and tolerant and len(words) == 2:
        found = _commands_in(words[0])
        if found is not None and not found & {"stop", "quiet"}:
            found = None
    return None if found is None else next((name for name, _ in COMMANDS if name in found), None)


def _commands_in(norm: str) -> set[str] | None:
    """The :data:`COMMANDS` names (and ``"courtesy"``) ``norm`` (:func:`normalise`) is made of,
    or None when it holds anything else."""
    pos, found = 0, set()
    while pos < len(norm):
        match = _COMMAND_UNIT.match(norm, pos)
        if match is None or (match.end() < len(norm) and norm[match.end()] != " "):
            return None
        found.add(str(match.lastgroup))
        pos = match.end() + 1
    return found


def split_command(text: str) -> tuple[str, str] | None:
    """``(command, rest)`` when ``text`` opens with clauses that make a command
    (:data:`COMMANDS`) and goes on, else None. One word set off before the command is passed
    over: a name or an interjection the command grammar does not know, often a filler the
    recogniser wrote as a word ("Home, hold on, can we ...?" for "Hmm, hold on, ...")."""
    parts = [p for p in _CLAUSE_END.split(text.strip()) if p]
    firsts = (0, 1) if len(parts) > 2 and len(parts[0].split()) == 1 else (0,)
    for first in firsts:
        for k in range(first + 1, len(parts)):
            command = command_of(" ".join(parts[first:k]))
            if command is not None:
                return command, " ".join(parts[k:])
    return None


def command_then_question(text: str) -> str | None:
    """The command (:data:`COMMANDS`: to stop, be quiet, wait or hold on a moment) when
    ``text``, from one of its sentences on, makes one and then asks a question of its own
    (:func:`~venus_ros.text.requests.is_question`: "Hang on, is there parking?", "Wait a
    moment. Is that in Celsius?", "Yeah. Stop, does it work in the rain?", the partial "Hang
    on, can I"), not after the speaker's own reason ("Hang on, let me find a pen, what was the
    address?" is said into a phone); else None.

    Said over the assistant, such an utterance cuts it off to ask it something: in the
    training corpora every such line is an interruption and none a remark to someone else
    (a question to another person names them first, which the floor reads before this).
    """
    sentences = split_sentences(text)
    for i in range(len(sentences)):
        found = split_command(" ".join(sentences[i:]))
        if found is None or found[0] == "never_mind" or not is_question(found[1]):
            continue
        if not _OWN_REASON.match(normalise(found[1])):
            return found[0]
    return None


def wait_with_reason(text: str) -> str | None:
    """``"wait"`` or ``"moment"`` (:data:`COMMANDS`) when ``text`` asks to wait and then gives
    only the speaker's own reason ("Hold on, I need to write this down.", "One second. Let me
    sit down."), else None. The reason is a statement about the speaker, not a question or a
    request ("Hold on, can you go slower?" is neither): what such an utterance asks of the
    listener is the wait. The recogniser often leaves out the comma after the call to wait
    ("Hold on my phone is ringing."): the reason is then found after the call's first words."""
    if "?" in text:
        return None
    found = split_command(text)
    if found is not None:
        command, rest = found
        waits = command in ("wait", "moment") and _OWN_REASON.match(normalise(rest))
        return command if waits else None
    words = normalise(text).split()
    for k in range(1, min(_WAIT_WORDS, len(words) - 1) + 1):
        command = command_of(" ".join(words[:k]))
        if command in ("wait", "moment") and _OWN_REASON.match(" ".join(words[k:])):
            return command
    return None
