"""Turning a raw tool result into a short spoken reply, deterministically.

A reply is spoken by the frontend inside ``<backend>…</backend>``, so it must be speech, not
text: at most two sentences, no markdown, URLs or code, at most :data:`MAX_REPLY_CHARS`
characters, and unable to form a protocol tag whatever the tool returned. (An LLM polisher can
come later; this template is the fallback and the reference.)
"""

from __future__ import annotations

from venus_ros.core.protocol import escape_tags
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.text.speech import shorten, split_sentences, to_speech

#: Replies are cut (at a word boundary) to at most this many characters.
MAX_REPLY_CHARS = 300
#: Replies hold at most this many sentences.
MAX_SENTENCES = 2


def polish(text: str) -> str:
    """A tool's raw text as a short spoken reply.

    Cleans it with the TTS's own cleaner (:func:`venus_ros.text.speech.to_speech`: code,
    headings, markdown, URLs and protocol markup go), keeps the first two sentences, caps the
    length at :data:`MAX_REPLY_CHARS` (cutting at a word boundary, ending with "…") and escapes
    protocol tags with :func:`~venus_ros.core.protocol.escape_tags`. The same input always
    gives the same output.
    """
    text = to_speech(text, url="", headings=False)
    text = " ".join(split_sentences(text, max_chars=len(text) + 1)[:MAX_SENTENCES])
    return escape_tags(shorten(text, MAX_REPLY_CHARS))


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
