"""Turning a raw tool result into a short spoken reply, deterministically.

A reply is spoken by the frontend inside ``<backend>…</backend>``, so it must be speech, not
text: at most two sentences, no markdown, URLs or code, at most :data:`MAX_REPLY_CHARS`
characters, and unable to form a protocol tag whatever the tool returned. (An LLM polisher can
come later; this template is the fallback and the reference.)
"""

from __future__ import annotations

import re

from venus_ros.core.protocol import escape_tags
from venus_ros.harness.tasks import Task, TaskState

#: Replies are cut (at a word boundary) to at most this many characters.
MAX_REPLY_CHARS = 300
#: Replies hold at most this many sentences.
MAX_SENTENCES = 2

_FENCED = re.compile(r"```.*?(?:```|$)|~~~.*?(?:~~~|$)", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`]*)`")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.IGNORECASE)
_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]+.*$", re.MULTILINE)
_LINE_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>+\s*|[-*+•]\s+|\d+[.)]\s+)", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|\*|(?<!\w)__|(?<!\w)_)(?=\S)(.+?)(?<=\S)\1(?!\w)")
_LEFTOVER = re.compile(r"[*#`|~]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")


def polish(text: str) -> str:
    """A tool's raw text as a short spoken reply.

    Removes code, headings, markdown and URLs, keeps the first two sentences, caps the length at
    :data:`MAX_REPLY_CHARS` (cutting at a word boundary, ending with "…") and escapes protocol
    tags with :func:`~venus_ros.core.protocol.escape_tags`. The same input always gives the
    same output.
    """
    text = _CONTROL.sub(" ", text)
    text = _FENCED.sub(" ", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _INLINE_CODE.sub(r"\1", text)
    if _HEADING.sub("", text).strip():  # headings are titles, not speech (unless alone)
        text = _HEADING.sub("", text)
    text = _LINE_MARKUP.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _LEFTOVER.sub(" ", text)
    text = " ".join(text.split())
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    sentences = [s for s in _SENTENCE_END.split(text) if s]
    text = " ".join(sentences[:MAX_SENTENCES])
    return escape_tags(_cap(text, MAX_REPLY_CHARS))


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def reply_text(task: Task) -> str:
    """What the frontend should say about a settled task ("" when nothing should be said).

    COMPLETED: the polished result, prefixed with the task's note when it has one (e.g. a
    cancel that came after a side-effecting tool had already acted). FAILED: an apology with
    the reason. CANCELLED and unsettled tasks: nothing.
    """
    if task.state in (TaskState.COMPLETED, TaskState.DELIVERING, TaskState.DELIVERED):
        if task.note:
            return polish(f"{task.note.rstrip('.')}. {task.result_text}")
        return polish(task.result_text)
    if task.state is TaskState.FAILED:
        reason = task.error or "something went wrong"
        return polish(f"Sorry, I could not do that: {reason}.")
    return ""
