"""Which training texts are too close to an evaluation phrase to be trained on.

The trainers learn from hand-written corpora and the synthesizer's training part; the
evaluation part (:mod:`venus_ros.eval.phrases_eval`) must stay unseen. An exact match is easy to
leave out; a line written independently can still come close to an evaluation sentence ("Oops,
I dropped a fork." beside "Whoops, I dropped a fork."), and training on it would make the
held-out figures read better than the frontend is. :class:`HeldOut` says whether a text is
near one: both in the same normal form (the trainers' ``asr_form``), and

* equal, or
* of at least :data:`MIN_WORDS` words, with a character similarity of at least
  :data:`NEAR_RATIO` (:class:`difflib.SequenceMatcher`), or the same content words in a share
  of at least :data:`NEAR_SHARE` of both texts' content words (Jaccard).

Shorter texts ("uh-huh", "hang on") are kept unless equal: back-channels and short commands are
a small closed vocabulary that any corpus and any suite share, and learning them is the point.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from difflib import SequenceMatcher

__all__ = ["MIN_WORDS", "NEAR_RATIO", "NEAR_SHARE", "HeldOut"]

MIN_WORDS = 4
"""Texts shorter than this are held out only when equal to an evaluation phrase."""
NEAR_RATIO = 0.8
"""Least character similarity (SequenceMatcher ratio) of a near text."""
NEAR_SHARE = 0.6
"""Least Jaccard share of content words of a near text."""

_WORD = re.compile(r"[a-z0-9']+")
#: Function words left out of the content-word comparison.
_FUNCTION_WORDS = frozenset(
    "a an the i you he she it we they me my your our his her its their to of and or is are "
    "was were be am in on at for with this that".split()
)


def _content(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS)


class HeldOut:
    """The evaluation phrases, for telling which training texts to leave out.

    Args:
        phrases: The evaluation phrases, in the same normal form as the texts asked about.
    """

    def __init__(self, phrases: Iterable[str]) -> None:
        self.phrases = frozenset(phrases)
        self._long = [(p, _content(p)) for p in self.phrases if len(p.split()) >= MIN_WORDS]
        self._seen: dict[str, bool] = {}

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.near(text)

    def near(self, text: str) -> bool:
        """Whether ``text`` (normal form) equals or comes near an evaluation phrase."""
        found = self._seen.get(text)
        if found is None:
            found = self._seen[text] = self._near(text)
        return found

    def _near(self, text: str) -> bool:
        if text in self.phrases:
            return True
        if len(text.split()) < MIN_WORDS:
            return False
        words = _content(text)
        for phrase, phrase_words in self._long:
            union = words | phrase_words
            if union and len(words & phrase_words) / len(union) >= NEAR_SHARE:
                return True
            matcher = SequenceMatcher(None, text, phrase, autojunk=False)
            if (
                matcher.real_quick_ratio() >= NEAR_RATIO
                and matcher.quick_ratio() >= NEAR_RATIO
                and matcher.ratio() >= NEAR_RATIO
            ):
                return True
        return False
