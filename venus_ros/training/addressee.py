"""Training of the addressee text head (``python -m venus_ros.training.addressee``).

The head (a :class:`~venus_ros.frontends.cascade.texthead.TextHead`) scores whether a
finished utterance reads as said to an assistant. Deterministic for a seed:

1. Data, from training material only: *addressed* are the training part of the synthesizer's
   requests (questions, delegation and chit-chat requests, interruptions, paused sentences:
   :data:`venus_ros.eval.synth.FAMILIES` ``["train"]``) and every text of the delegation
   router's corpus; *not addressed* are the training part's remarks to other people (vocatives
   with every training name, side comments, phone talk), background talk and TV lines, and
   :data:`EXTRA_NOT_ADDRESSED` (more of the same kinds, written for this trainer). The
   evaluation part (:mod:`venus_ros.eval.phrases_eval`) is never read.
2. Each text also as a speech recogniser may write it: lower case without punctuation.
3. Features: the all-MiniLM-L6-v2 sentence embedding next to the router's hashed words and
   word pairs (:func:`~venus_ros.frontends.cascade.router.lexical_features`).
4. :func:`~venus_ros.training.router.fit_logistic` (class-balanced, L2), in 5 folds split by
   phrase (every variant of a phrase in one fold) for held-out scores; the threshold is
   :func:`~venus_ros.training.router.calibrate_threshold` on them with recall of addressed
   speech >= :data:`MIN_RECALL` (a missed request costs more than an answered remark; the other
   evidence catches many remarks).
5. The head is refitted on everything and written with its report.

Outputs: ``addressee.npz`` and ``addressee_report.md`` in ``frontends/cascade/models``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from venus_ros.frontends.cascade.addressee import MODEL_PATH
from venus_ros.frontends.cascade.router import lexical_features
from venus_ros.frontends.cascade.texthead import TextHead
from venus_ros.training.router import (
    TextEmbedder,
    calibrate_threshold,
    fit_logistic,
    load_corpus,
    metrics,
)

__all__ = [
    "EXTRA_NOT_ADDRESSED",
    "MIN_RECALL",
    "evaluation_phrases",
    "main",
    "train_addressee",
    "training_texts",
]

MIN_RECALL = 0.97
"""Least share of addressed speech kept, on held-out folds."""
L2 = 1e-3
FOLDS = 5
LEXICAL_DIMS = 512
LEXICAL_SCALE = 0.5

#: More speech not meant for the assistant (written for this trainer; training data only).
EXTRA_NOT_ADDRESSED: tuple[str, ...] = (
    # one side of a conversation with someone else in the room
    "Did you lock the car when we got back?",
    "I can't find the other sock anywhere.",
    "Your turn to do the dishes tonight.",
    "We're out of milk again, can you pick some up on your way home?",
    "Mind the step, it's slippery.",
    "Put it over there, next to the lamp.",
    "Leave it, I'll sort it out later.",
    "Come and look at this, quick!",
    "Shall we watch the film or go for a walk?",
    "I told you it would rain today.",
    "That's mine, give it back.",
    "Who left the fridge door open?",
    # talking to oneself
    "Now where did I leave the scissors.",
    "Right, what was I doing.",
    "This jar is impossible to open.",
    "I really need to clean this window.",
    "Come on, come on, start.",
    "Hmm, that's odd.",
    # phone calls
    "Hi, yes, it's me, I'm just leaving now.",
    "No, I can't make Thursday, how about Friday?",
    "Okay, love you too, bye.",
    "Sorry, you're breaking up, say that again?",
    "Tell him I said happy birthday.",
    # radio, television, announcements
    "You're listening to the morning show, here's the traffic update.",
    "That was the latest from the charts, up next, the weather.",
    "Scattered showers will clear by the evening, with lows of five degrees.",
    "Police have closed the northbound carriageway after an accident.",
    "He takes it past one defender, then another, and what a save!",
    "Stay with us, more after these messages.",
    "Order today and we'll double your offer, but only for the next hour.",
    "The prime minister is expected to make a statement later this afternoon.",
    "In tonight's episode, the detectives finally close in on the suspect.",
    "Ladies and gentlemen, please welcome to the stage tonight's special guest!",
    "Shares in the car maker fell sharply after the announcement.",
    "The final whistle goes and the home side take all three points.",
    "Welcome back to the programme, before the break we were talking about gardening.",
    "Now over to our correspondent in the capital.",
    "This programme contains scenes that some viewers may find upsetting.",
    "Temperatures will climb into the high twenties by the end of the week.",
    "Thanks for tuning in, we'll see you at the same time tomorrow.",
)


def _asr_form(text: str) -> str:
    """``text`` as a recogniser may write it: lower case, no punctuation."""
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def evaluation_phrases() -> frozenset[str]:
    """Every phrase of the evaluation part (:mod:`venus_ros.eval.phrases_eval`, vocatives with
    every name), in :func:`_asr_form`: never trained on (the router corpus shares a few
    short ones, such as "fair enough", which are left out here)."""
    from venus_ros.eval import phrases_eval

    found: set[str] = set()
    for name in dir(phrases_eval):
        bank = getattr(phrases_eval, name)
        if not isinstance(bank, tuple):
            continue
        for item in bank:
            parts = item if isinstance(item, tuple) else (item,)
            strings = [p for p in parts if isinstance(p, str)]
            found.update(_asr_form(p) for p in strings)
            found.add(_asr_form(" ".join(strings)))
    for template in phrases_eval.VOCATIVES:
        found.update(_asr_form(template.format(name=n)) for n in phrases_eval.OTHER_NAMES)
    return frozenset(found)


def training_texts() -> tuple[list[str], np.ndarray, np.ndarray]:
    """The training texts, their labels (True: addressed) and phrase groups.

    Each phrase comes twice (as written and in :func:`_asr_form`); both share a group, and
    the vocative templates share one group over all names. A text that is also an
    evaluation phrase (:func:`evaluation_phrases`) is left out.
    """
    from venus_ros.eval.synth import FAMILIES

    fam = FAMILIES["train"]
    phrases: list[tuple[list[str], bool]] = []
    addressed = [
        *fam.questions,
        *fam.delegate_yes,
        *fam.delegate_no,
        *fam.interruptions,
        *(f"{a} {b}" for a, b in fam.paused_sentences),
    ]
    phrases += [([t], True) for t in addressed]
    by_group: dict[int, list[str]] = {}
    for item in load_corpus():
        by_group.setdefault(item.group, []).append(item.text)
    phrases += [(texts, True) for _, texts in sorted(by_group.items())]
    phrases += [([v.format(name=n) for n in fam.other_names], False) for v in fam.vocatives]
    others = (
        *fam.side_comments,
        *fam.phone_talk,
        *fam.background_talk,
        *fam.background_tv,
        *EXTRA_NOT_ADDRESSED,
    )
    phrases += [([t], False) for t in others]
    held_out = evaluation_phrases()
    texts: list[str] = []
    labels: list[bool] = []
    groups: list[int] = []
    for group, (variants, label) in enumerate(phrases):
        kept = [t for t in variants if _asr_form(t) not in held_out]
        for text in dict.fromkeys(v for t in kept for v in (t, _asr_form(t))):
            texts.append(text)
            labels.append(label)
            groups.append(group)
    return texts, np.array(labels), np.array(groups)


def _folds(labels: np.ndarray, groups: np.ndarray, seed: int) -> np.ndarray:
    """Fold of every text: whole groups dealt round robin per label after a seeded shuffle."""
    fold = np.zeros(len(groups), dtype=int)
    rng = np.random.default_rng(seed)
    for label in (True, False):
        ids = np.unique(groups[labels == label])
        rng.shuffle(ids)
        for position, group in enumerate(ids):
            fold[groups == group] = position % FOLDS
    return fold


def train_addressee(
    out: str | Path | None = None, *, seed: int = 0, embedder: TextEmbedder | None = None
) -> dict[str, Any]:
    """Train the head, write ``addressee.npz`` and ``addressee_report.md``, return the report.

    Args:
        out: Output folder (default: the package's ``frontends/cascade/models``).
        seed: Fixes the folds.
        embedder: Sentence embedder (default: fp32 all-MiniLM-L6-v2).
    """
    started = time.perf_counter()
    if embedder is None:
        from venus_ros.frontends.cascade.embed import Embedder

        embedder = Embedder()
    texts, y, groups = training_texts()
    x = np.hstack(
        [
            np.asarray(embedder.embed(texts), dtype=np.float64),
            lexical_features(texts, LEXICAL_DIMS, LEXICAL_SCALE),
        ]
    )
    fold = _folds(y, groups, seed)
    held_out = np.zeros(len(texts))
    for k in range(FOLDS):
        test = fold == k
        coef, intercept = fit_logistic(x[~test], y[~test], L2)
        held_out[test] = 0.5 * (1.0 + np.tanh(0.5 * (x[test] @ coef + intercept)))
    threshold = calibrate_threshold(held_out, y, MIN_RECALL)
    cv = metrics(held_out, y, threshold)
    coef, intercept = fit_logistic(x, y, L2)
    head = TextHead(coef, intercept, threshold, embedder.name, LEXICAL_DIMS, LEXICAL_SCALE)
    out_dir = Path(out) if out is not None else MODEL_PATH.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    head.save(out_dir / MODEL_PATH.name)
    misses = sorted(
        ((float(held_out[i]), texts[i], bool(y[i])) for i in range(len(texts))),
        key=lambda r: abs(r[0] - threshold),
    )
    wrong = [r for r in misses if (r[0] >= threshold) != r[2]]
    report = {
        "seed": seed,
        "embedder": embedder.name,
        "texts": len(texts),
        "addressed": int(y.sum()),
        "not_addressed": int((~y).sum()),
        "phrases": len(np.unique(groups)),
        "threshold": threshold,
        "cv_recall": cv.recall,
        "cv_specificity": cv.specificity,
        "cv_accuracy": cv.accuracy,
        "cv_errors": wrong,
        "train_s": round(time.perf_counter() - started, 1),
    }
    (out_dir / "addressee_report.md").write_text(_markdown(report), encoding="utf-8")
    return report


def _markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Addressee text head",
        "",
        "Trained by `python -m venus_ros.training.addressee` (venus_ros/training/addressee.py)"
        " on training material only (the synthesizer's training part and the router corpus).",
        "",
        f"- embedder: `{r['embedder']}`; seed {r['seed']}; {r['train_s']} s",
        f"- texts: {r['texts']} ({r['addressed']} addressed, {r['not_addressed']} not) from "
        f"{r['phrases']} phrases (each also in recogniser form)",
        f"- threshold {r['threshold']:.4f}: held-out ({FOLDS} folds by phrase) recall of "
        f"addressed speech {100 * r['cv_recall']:.1f}% (goal >= {100 * MIN_RECALL:.0f}%), "
        f"specificity {100 * r['cv_specificity']:.1f}%, accuracy {100 * r['cv_accuracy']:.1f}%",
        "",
        f"Held-out errors ({len(r['cv_errors'])}; score, text, addressed):",
        "",
    ]
    lines += [f"- {s:.3f} {'yes' if a else 'no '} {t}" for s, t, a in r["cv_errors"][:40]]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m venus_ros.training.addressee [--out DIR] [--seed N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="fold seed (default 0)")
    args = parser.parse_args(argv)
    report = train_addressee(args.out, seed=args.seed)
    print(
        f"addressee head: {report['texts']} texts, threshold {report['threshold']:.4f}, "
        f"held-out recall {100 * report['cv_recall']:.1f}%, "
        f"specificity {100 * report['cv_specificity']:.1f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
