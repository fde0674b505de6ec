"""The assistant's own words heard back: what an echo canceller let through, as a recogniser
wrote it.

On a robot the microphone hears the loudspeaker. An echo canceller takes most of it out, but
while it converges, at the start of a turn or after the room changes, the residue can be loud
enough for the voice detector, and the recogniser then writes the assistant's own sentence,
garbled ("If you want to say man or get home, start with the..." for "If you want to save
energy at home, start with the heating"). Taken for the user's words, that residue is read as
an interruption, answered, or joined to the user's request.

:func:`strip_echo` takes out of a transcript the stretches that follow what the assistant was
playing at the same time: words aligned in order with the played words (difflib's matching
blocks over normalised words), with the garbled words in place of played ones before, between
or just after aligned stretches, when the aligned words are at least :data:`MIN_ECHO_WORDS` and
:data:`MIN_ECHO_SHARE` of the transcript.
What the user said before, between or after such stretches stays, and so does a command to
stop or wait after them. The caller passes only what was played while the transcript's audio was
heard, so a user who quotes an earlier sentence of the assistant ("Wait, ten past eight?") is
not taken for its echo.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from venus_ros.text.commands import command_of
from venus_ros.text.numbers import to_digits

__all__ = ["MIN_ECHO_SHARE", "MIN_ECHO_WORDS", "strip_echo"]

#: Fewest words a transcript must share, in order, with the played words to hold an echo (one
#: or two shared words, "the", "it is", are chance).
MIN_ECHO_WORDS = 3
#: ... and at least this share of its words: a long transcript shares a few words ("on the",
#: "and you") with any long answer by chance.
MIN_ECHO_SHARE = 0.5
#: A garbled stretch between two aligned ones is the echo's when it has at most this many
#: words more than the played words it stands for.
_SLACK_WORDS = 1
#: At most this many garbled words after the last aligned stretch, where the played words go
#: on, are the echo's (the word being heard when a partial was read), unless the recogniser
#: set them off with a break and they make a command to stop or wait: the user's "... Stop!"
#: after the echo stays, the echo's "run a mix" heard as "run a minute" does not.
_TAIL_WORDS = 2
_BREAK = re.compile(r"[.!?,;:\u2026\u2014-]")
_WORD = re.compile(r"[\w']+")


def _normalised(text: str) -> list[str]:
    return [w.strip("'") for w in _WORD.findall(to_digits(text).lower()) if w.strip("'")]


def strip_echo(heard: str, played: str) -> str:
    """``heard`` without the stretches that are the assistant's own ``played`` words.

    Args:
        heard: A transcript of the microphone (partial or final), as the recogniser wrote it.
        played: The assistant's words played while that audio was heard (with a margin for
            the echo's delay); empty: nothing is stripped.

    Returns:
        The user's words of ``heard``, its own spelling and punctuation kept ("" when all of it
        was echo); ``heard`` itself when it holds no echo.
    """
    spans = [(m.start(), m.end()) for m in _WORD.finditer(heard)]
    if len(spans) < MIN_ECHO_WORDS or not played.strip():
        return heard
    ours = _normalised(played)
    # One normalised form per token of ``heard``: a number word becomes digits like the
    # played side's ("ten" -> "10"), and a token that normalises to nothing matches nothing.
    theirs = [(_normalised(heard[a:b]) or [""])[0] for a, b in spans]
    matcher = SequenceMatcher(None, theirs, ours, autojunk=False)
    shared = sum(size for _, _, size in matcher.get_matching_blocks())
    if shared < max(MIN_ECHO_WORDS, MIN_ECHO_SHARE * len(theirs)):
        return heard
    echo = [False] * len(theirs)
    opcodes = matcher.get_opcodes()
    for k, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            echo[i1:i2] = [True] * (i2 - i1)
        elif tag == "replace":
            aligned_after = k + 1 < len(opcodes) and opcodes[k + 1][0] == "equal"
            aligned_before = k > 0 and opcodes[k - 1][0] == "equal"
            if aligned_after and (aligned_before or k == 0) and i2 - i1 <= j2 - j1 + _SLACK_WORDS:
                echo[i1:i2] = [True] * (i2 - i1)  # garbled words of the same stretch
            elif aligned_before and k == len(opcodes) - 1 and i2 - i1 <= _TAIL_WORDS:
                tail = heard[spans[i1][0] : spans[i2 - 1][1]]
                set_off = _BREAK.search(heard[spans[i1 - 1][1] : spans[i1][0]])
                if not (set_off and command_of(tail)):
                    echo[i1:i2] = [True] * (i2 - i1)  # the word being heard, garbled
    kept: list[str] = []
    for i, ((a, b), is_echo) in enumerate(zip(spans, echo, strict=True)):
        before = heard[spans[i - 1][1] if i else 0 : a]
        if i and echo[i - 1]:
            before = " "  # what stood between an echo word and the next is the echo's
        if not is_echo:
            kept.append(before + heard[a:b])
        elif i and not echo[i - 1]:
            kept.append(before)  # a user's word keeps the punctuation after it
    if not echo[-1]:
        kept.append(heard[spans[-1][1] :])
    text = " ".join("".join(kept).split())
    return text if _WORD.search(text) else ""
