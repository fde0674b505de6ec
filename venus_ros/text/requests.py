"""The user's request in the assistant's words: content words, the request named back
("if you can park there"), and a lead-in naming what was asked ("Which day?").

Used by the cascade's responder to acknowledge and ground its replies; part of the one language
toolkit (the evaluation has its own stop list and never imports this).
"""

from __future__ import annotations

import re

__all__ = [
    "STOP_WORDS",
    "SUBJECT_WORDS",
    "base_form",
    "content_words",
    "is_question",
    "lead_in",
    "request_phrase",
]

#: Function words: what is left of a text without them are its content words.
STOP_WORDS = frozenset(
    "a an the and or but if so to of in on at for from with by about as into onto off up down "
    "out over under than then too very also just only even still really quite is are was were "
    "be been being am do does did doing done have has had having will would shall should can "
    "could may might must i you he she it we they me him her us them my your his its our their "
    "mine yours this that these those there here what which who whom whose when where why how "
    "not no yes okay ok please sorry wait hold hang excuse moment second sec minute one some "
    "any all more most much many um uh oh well hey hi thanks thank again now let lets say said "
    "tell told mean meant ask asking know think i'm you're it's that's there's what's i'll "
    "you'll i've i'd don't doesn't didn't can't isn't aren't wasn't thing things way get got "
    "go going make like want need sure right yeah".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_WH = frozenset("what when where which who whom whose why how".split())
_AUX = frozenset(
    "is are was were am can could will would shall should do does did has have had may might "
    "must".split()
)
#: Discourse words a question may open with before its question word ("so is it ...").
_QUESTION_LEAD = frozenset("so but and then um uh er okay ok oh".split())
#: Negated auxiliaries that open a question ("isn't it ...", "can't you ...").
_NEG_AUX = frozenset(
    "isn't aren't wasn't weren't can't couldn't won't wouldn't shouldn't don't doesn't didn't "
    "hasn't haven't".split()
)
#: Words that can be the subject opening a statement ("I can't ...", "it's ...", "there is ...").
SUBJECT_WORDS = frozenset("i you we they he she it that this there these those".split())
_SECOND_PERSON = {
    "i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself",
    "i'm": "you're", "i've": "you've", "i'll": "you'll", "i'd": "you'd", "am": "are",
    "you": "I", "your": "my", "yours": "mine", "yourself": "myself", "you're": "I'm",
    "you've": "I've", "you'll": "I'll", "you'd": "I'd",
}  # fmt: skip
_CONTRACTIONS = {"what's": "what is", "where's": "where is", "when's": "when is",
                 "how's": "how is", "who's": "who is", "that's": "that is",
                 "there's": "there is", "it's": "it is"}  # fmt: skip
#: Openers that only take the floor ("sorry,", "wait,", "hold on a second,") before a request.
_OPENER = re.compile(
    r"^(?:(?:sorry(?: to interrupt(?: you)?)?|excuse me|pardon me|"
    r"(?:wait|hold on|hang on|stop)(?: (?:for )?(?:a|one) (?:second|moment|minute|sec))?|"
    r"just a (?:second|moment|minute|sec)|one (?:second|moment|sec)|actually|hey|so|well|"
    r"okay|ok|um|uh|oh|no|and|but|quick question|i mean)(?:[\s,.!;:-]+|$))+",
    re.IGNORECASE,
)
#: A polite frame around a request ("can you tell me ...", "do you know ...").
_FRAME = re.compile(
    r"^(?:please |(?:can|could|would|will) you (?:please )?(?:tell me |let me know |check |"
    r"find out |look up |see )?|(?:please )?(?:tell me|let me know|check|find out|look up) |"
    r"do you know |i (?:want|would like|'d like|wanted) to know |i wonder |i'm wondering )",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether ``text`` asks a question: it holds a "?", or its first word after discourse
    words ("so", "but", "um") is a question word or an auxiliary ("can I ...", "how long ...",
    "isn't it ..."; a partial transcript often has no "?" yet)."""
    if "?" in text:
        return True
    words = _WORD.findall(text.lower().replace("\u2019", "'"))
    while words and words[0] in _QUESTION_LEAD:
        words = words[1:]
    if not words:
        return False
    first = _CONTRACTIONS.get(words[0], words[0]).split()[0]
    return first in _WH or first in _AUX or first in _NEG_AUX


def content_words(text: str) -> set[str]:
    """The content words of ``text``: lower case, crude stems, function words dropped."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in STOP_WORDS or len(word) < 2:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


def _third_singular(verb: str) -> str:
    if verb in ("have", "do", "go"):
        return {"have": "has", "do": "does", "go": "goes"}[verb]
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def base_form(verb: str) -> str:
    """A third-person verb without its -s ("tells" -> "tell", "carries" -> "carry", "fixes" ->
    "fix"): general English endings, the inverse of the third singular used here."""
    if re.search(r"[^aeiou]ies$", verb):
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z|o)es$", verb):
        return verb[:-2]
    if verb.endswith("s") and not verb.endswith("ss"):
        return verb[:-1]
    return verb


_IRREGULAR_PAST = dict(
    pair.split(":")
    for pair in (
        "say:said do:did go:went have:had make:made tell:told mean:meant put:put get:got "
        "see:saw leave:left come:came take:took give:gave know:knew find:found think:thought "
        "buy:bought bring:brought pay:paid send:sent write:wrote speak:spoke read:read "
        "set:set leave:left lose:lost forget:forgot hear:heard eat:ate drink:drank"
    ).split()
)
#: Words after which "you" is an object ("for you", "tell you"), not a subject.
_OBJECT_CONTEXT = frozenset(
    "to for with at from about of on by tell give show help let ask call thank see hear "
    "send bring take remind".split()
)


def _past(verb: str) -> str:
    if verb in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[verb]
    return verb + ("d" if verb.endswith("e") else "ed")


def _embed(tokens: list[str]) -> list[str]:
    """A direct question as an indirect one: "where is it" -> "where it is", "can I go" ->
    "if I can go", "what time does it close" -> "what time it closes"; else unchanged."""
    if not tokens:
        return tokens
    if tokens[0] in _AUX:
        head, rest = ["if"], tokens
    elif tokens[0] in _WH:
        k = next((i for i, t in enumerate(tokens[:4]) if t in _AUX), None)
        if k is None:
            return tokens
        head, rest = tokens[:k], tokens[k:]
    else:
        return tokens
    if len(rest) < 2 or rest[1] not in SUBJECT_WORDS:
        return tokens
    aux, subject, tail = rest[0], rest[1], rest[2:]
    if aux in ("do", "does", "did"):
        if aux == "does" and tail:
            tail = [_third_singular(tail[0]), *tail[1:]]
        elif aux == "did" and tail:
            tail = [_past(tail[0]), *tail[1:]]
        return [*head, subject, *tail]
    return [*head, subject, aux, *tail]


def _asked(request: str) -> str:
    """The part of a request that asks: its last question ("Sorry to interrupt. Where is
    it?" -> "Where is it?"), else all of it; a trailing cut-off fragment ("Do you...") is
    dropped."""
    text = " ".join(request.split())
    sentences = [t for t in re.split(r"(?<=[.!?])\s+", text) if t.strip()]
    whole = [t for t in sentences if not t.endswith("...")] or sentences
    for sentence in reversed(whole):
        if sentence.endswith("?") and len(sentence.split()) >= 2:
            return sentence
    return " ".join(whole)


def request_phrase(request: str, max_words: int = 12) -> tuple[str, bool]:
    """What the user asked for, in the assistant's words, and whether it is a question.

    Openers ("sorry, wait,") and polite frames ("can you tell me") are dropped, a direct
    question becomes an indirect one and pronouns turn around ("can I park there" -> "if you
    can park there"). At most ``max_words`` words; '' when nothing is left.
    """
    text = _OPENER.sub("", _asked(request)).strip()
    question = text.endswith("?")
    text = re.sub(r"\s*,\s*", " ", text)
    framed = _FRAME.sub("", text).strip()
    question = question and framed == text  # "could you go ...?" asks for an act
    text = framed
    cased: dict[str, str] = {}
    words: list[str] = []
    previous = "."
    for raw in text.split():
        token = re.sub(r"[?!.;:]+", "", raw)
        start, previous = previous[-1:] in ".!?", raw
        if not token:
            continue
        low = token.lower()
        if token[:1].isupper() and low != "i" and not start:
            cased[low] = token  # names keep their capitals ("Paris")
        words.extend(_CONTRACTIONS.get(low, low).split())
    if words and (words[0] in _WH or words[0] in _AUX):
        question = True
    while words and words[-1] in ("please", "thanks", "now", "then"):
        words.pop()  # courtesy and fillers at the end
    words = _embed(words)
    spoken = []
    for i, word in enumerate(words):
        swapped = _SECOND_PERSON.get(word, cased.get(word, word))
        if word == "you" and i > 0 and words[i - 1] in _OBJECT_CONTEXT:
            swapped = "you" if words[i - 1] in SUBJECT_WORDS else "me"
        if word == "are" and i > 0 and words[i - 1] == "you":
            swapped = "am"  # "you are" -> "I am"
        if word in ("was", "were") and i > 0 and words[i - 1] in ("i", "you"):
            swapped = "were" if words[i - 1] == "i" else "was"
        spoken.append(swapped)
    phrase = " ".join(spoken[:max_words]).strip(" ,")
    return phrase, question


#: A correction naming what the user meant ("I meant the blue one"); its object is group 1.
_ASKING_ABOUT = re.compile(
    r"\b(?:i mean|i meant|i'm asking about|i was asking about|i'm talking about|"
    r"i was talking about)\s+([^,.;!?]+)",
    re.IGNORECASE,
)


def lead_in(request: str, max_words: int = 5) -> str:
    """What the assistant can say at once while its answer is generated, naming what was
    asked: a question's wh-phrase ("Which day?", "How long?") or a correction's object
    ("The blue one?"); '' when there is none (a bare "What?" would sound like not hearing)."""
    match = _ASKING_ABOUT.search(request)
    text = _OPENER.sub("", " ".join(request.split())).strip()
    text = _FRAME.sub("", re.sub(r"\s*,\s*", " ", text)).strip()
    if match:
        words = match.group(1).split()
        if 0 < len(words) <= max_words:
            phrase, _ = request_phrase(" ".join(words))
            return phrase[:1].upper() + phrase[1:] + "?" if phrase else ""
        return ""
    words = [_CONTRACTIONS.get(w.lower(), w.lower()).split()[0] for w in text.split()]
    if not words or words[0] not in _WH:
        return ""
    k = next((i for i, w in enumerate(words[:4]) if w in _AUX), None)
    if k is None or not (k >= 2 or words[0] in ("where", "when")):
        return ""
    head = " ".join(text.split()[:k]).strip("?.!")
    return head[:1].upper() + head[1:] + "?"
