"""Text as plain speech: markdown, HTML and protocol markup out; sentences; word-safe shortening.

One cleaner for everything that is said aloud (TTS, and the harness's spoken replies):

- :func:`to_speech` removes private protocol spans (``<delegate>…</delegate>``,
  ``<backend>…</backend>``, also escaped or unclosed), stray tags and special tokens, fenced
  code, HTML, markdown emphasis, heading, quote, list and table markup; links keep their text,
  a bare URL becomes "a link" (or nothing), headings and list items end as sentences (or
  headings are dropped, for a reply whose title is not speech).
- :func:`split_sentences` cuts cleaned text into sentences (abbreviation-aware), long ones at
  clauses, for streaming synthesis or for keeping the first few.
- :func:`shorten` cuts text to a length at a word boundary, ending with "…".
- :func:`and_list` joins items as spoken: "a, b and c".
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from venus_ros.core.protocol import split_visible

# --------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------

_ESC = "\u2039"  # "‹": how venus_ros.core.protocol.escape_tags neutralises "<".
_TAG_OPEN = f"[<{_ESC}]"
_CODE_FENCE = re.compile(r"(?ms)^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)")
_INLINE_CODE = re.compile(r"`+([^`\n]*)`+")
_PRIVATE_SPAN = re.compile(
    rf"(?s){_TAG_OPEN}(delegate|backend)>.*?(?:{_TAG_OPEN}/\1>|\Z)", re.IGNORECASE
)
_PROTOCOL_TAG = re.compile(rf"{_TAG_OPEN}/?(?:delegate|backend)>", re.IGNORECASE)
_SPECIAL_TOKEN = re.compile(rf"{_TAG_OPEN}\|[^|<>\s]{{0,64}}\|>")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\(\s*[^)\s]+(?:\s+\"[^\"\n]*\")?\s*\)")
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^>\s]+>", re.IGNORECASE)
_URL = re.compile(r"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]", re.IGNORECASE)
_HTML_BLOCK = re.compile(r"(?is)<(script|style)\b[^>]*>.*?</\1\s*>")
_HTML_COMMENT = re.compile(r"(?s)<!--.*?(?:-->|\Z)")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$")
_BULLET = re.compile(r"^[ \t]*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+)(.*)$")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_RULE = re.compile(r"^[ \t]*(?:[-*_=][ \t]*){3,}$")
_TABLE_RULE = re.compile(r"^[ \t|:-]*-{3,}[ \t|:-]*$")
_EMPHASIS = (
    re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*"),
    re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"),
    re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])"),
    re.compile(r"(?<!\w)___(?=\S)(.+?)(?<=\S)___(?!\w)"),
    re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"),
    re.compile(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])"),
    re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"),
)
_TERMINAL = tuple(".!?…:;,")
_SPEAKABLE = re.compile(r"\w")


def to_speech(text: str, *, url: str = "a link", headings: bool = True) -> str:
    """Turns model or tool text into plain words that are safe to speak.

    Removed, never spoken: private spans (``<delegate>…</delegate>`` and
    ``<backend>…</backend>``, with their content, also when unclosed), stray protocol tags,
    special tokens such as ``<|turn_eos|>``, and the escaped forms of all of these that
    :func:`venus_ros.core.protocol.escape_tags` produces (``‹delegate>``, ``‹|turn_eos|>``);
    fenced code blocks (with their content), HTML tags and comments, markdown emphasis,
    heading and list markers.  Inline code and link texts keep their words; a bare URL
    becomes ``url`` ("a link").  Headings (unless ``headings`` is False: then they are
    dropped, unless nothing else is left) and list items end as sentences; whitespace is
    collapsed.

    Args:
        text: Any text, e.g. one reply of the model.
        url: what a bare URL becomes ("" drops it).
        headings: keep headings as sentences (False: titles are not speech).

    Returns:
        The words to speak; ``""`` when nothing is left (then nothing is said).
    """
    text, _events = split_visible(text)  # real spans and tokens, as the protocol defines them
    text = _PRIVATE_SPAN.sub(" ", text)  # escaped (or stray) spans
    text = _PROTOCOL_TAG.sub(" ", text)
    text = _SPECIAL_TOKEN.sub(" ", text)
    text = text.replace(_ESC, " ")
    text = _CODE_FENCE.sub("\n", text)
    text = _HTML_COMMENT.sub(" ", text)
    text = _HTML_BLOCK.sub(" ", text)
    text = _IMAGE.sub(r"\1", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(f" {url} ", text)
    text = _URL.sub(url, text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _HTML_TAG.sub(" ", text)
    text = html.unescape(text)
    for pattern in _EMPHASIS:
        text = pattern.sub(r"\1", text)

    if not headings and any(
        line.strip() and not _HEADING.match(line) for line in text.splitlines()
    ):
        text = "\n".join(line for line in text.splitlines() if not _HEADING.match(line))
    lines = []
    for raw in text.splitlines():
        line = _QUOTE.sub("", raw)
        if _RULE.match(line) or _TABLE_RULE.match(line):
            continue
        ended = False  # a heading or list item is a sentence of its own
        if match := _HEADING.match(line):
            line, ended = match.group(1), True
        elif match := _BULLET.match(line):
            line, ended = match.group(1), True
        line = line.replace("|", " ").strip()
        if not line:
            continue
        if ended and not line.endswith(_TERMINAL):
            line += "."
        lines.append(line)
    text = " ".join(lines)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([.,!?;:])", r"\1", text)
    # Nothing speakable (only punctuation or symbols) counts as nothing.
    return text if _SPEAKABLE.search(text) else ""


# --------------------------------------------------------------------------------------
# Sentence splitting
# --------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e a.m p.m no approx dept fig inc ltd co".split()
)
_CLAUSE_END = re.compile(r"[,;:—–](?=\s)|\s[—–](?=\s)")


def split_sentences(text: str, max_chars: int = 250, first_chars: int | None = None) -> list[str]:
    """Splits cleaned text into the pieces synthesized one after another.

    Sentences end at ``. ! ? …`` followed by a space (not after a common abbreviation or a
    single initial).  A sentence longer than ``max_chars`` is cut at clauses (``, ; : —``),
    and a clause still longer at spaces.  If ``first_chars`` is given, the first sentence is
    cut at its clauses down to about that length, so the first piece is quick to render.

    Args:
        text: Cleaned text (see :func:`clean_for_speech`).
        max_chars: Longest piece, in characters (a single longer word stays whole).
        first_chars: Target length of the first piece, or ``None`` for ``max_chars``.

    Returns:
        Non-empty pieces, in order; joined with spaces they give back the text's words.
    """
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        word = text[start : match.start()].rsplit(None, 1)
        last = word[-1].lower() if word else ""
        if match.group().startswith(".") and len(match.group()) == 1:
            if last.lstrip("(\"'") in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    sentences = [s for s in sentences if s]

    pieces: list[str] = []
    for index, sentence in enumerate(sentences):
        if index == 0 and first_chars is not None and len(sentence) > first_chars:
            clauses = _clauses(sentence, max_chars)
            head, used = clauses[0], 1
            while used < len(clauses) and len(head) + 1 + len(clauses[used]) <= first_chars:
                head, used = f"{head} {clauses[used]}", used + 1
            pieces.append(head)
            pieces.extend(_pack(clauses[used:], max_chars))
        elif len(sentence) > max_chars:
            pieces.extend(_pack(_clauses(sentence, max_chars), max_chars))
        else:
            pieces.append(sentence)
    return [piece for piece in pieces if _SPEAKABLE.search(piece)]


def _clauses(sentence: str, max_chars: int) -> list[str]:
    """Clauses of a sentence (punctuation kept), each cut at spaces to at most max_chars."""
    clauses, start = [], 0
    for match in _CLAUSE_END.finditer(sentence):
        clauses.append(sentence[start : match.end()].strip())
        start = match.end()
    clauses.append(sentence[start:].strip())
    out: list[str] = []
    for clause in filter(None, clauses):
        while len(clause) > max_chars:
            cut = clause.rfind(" ", 0, max_chars + 1)
            if cut <= 0:
                cut = clause.find(" ")
                if cut < 0:
                    break
            out.append(clause[:cut].strip())
            clause = clause[cut:].strip()
        if clause:
            out.append(clause)
    return out


def _pack(clauses: list[str], limit: int) -> list[str]:
    """Greedily joins consecutive clauses into pieces of at most ``limit`` characters."""
    pieces: list[str] = []
    for clause in clauses:
        if pieces and len(pieces[-1]) + 1 + len(clause) <= limit:
            pieces[-1] = f"{pieces[-1]} {clause}"
        else:
            pieces.append(clause)
    return pieces


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary (when one is in the
    second half), ending with "…"; unchanged when it fits."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def and_list(items: Sequence[str]) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"``; one item stays as it is (``items`` is not
    empty)."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
