"""Pure: a reply typed in an ask's thread (or its DM) -> what the bot reads in it.

Deterministic, no model: an option's number as shown (1 = the first), its label (case and
surrounding punctuation ignored), several numbers or labels for a multi-choice question, and a few
keywords. A reading is ``exact`` only when every question matched a number or a whole label with no
doubt; a prefix, a keyword or custom text makes it ``confirm`` (the person confirms the bot's reading
before it counts); anything else is ``unreadable``, with what was not understood. docs/thread-answers.md
has the rules with examples.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import ValidationError

from bot.ids import decode_object
from contract import QuestionAnswer
from contract.question import Question

__all__ = [
    "APPROVING_LABELS",
    "DEFAULT_APPROVE_WORDS",
    "DEFAULT_DECLINE_WORDS",
    "Pending",
    "Reading",
    "ReadingKind",
    "Words",
    "approving_option",
    "normalize",
    "read_reply",
    "still_fits",
]

ReadingKind = Literal["exact", "confirm", "unreadable"]

DEFAULT_APPROVE_WORDS = ("approve", "approved", "lgtm", "yes")
DEFAULT_DECLINE_WORDS = ("decline", "declined", "deny", "denied", "reject", "rejected")
APPROVING_LABELS = frozenset(
    {"yes", "approve", "approved", "allow", "accept", "ok", "proceed", "confirm", "go"}
)
"""An option is *approving* when its label, normalized, is one of these or starts with one of them
as its first word ("Yes, deploy"). An approve keyword maps to the approving option only when the
question has exactly one."""

MIN_PREFIX = 3
_STRIP = string.whitespace + string.punctuation + "“”‘’«»…"
_QUOTES = string.whitespace + "\"'`“”‘’«»"
_NUMBERS = re.compile(r"\d+(?:[\s,]+\d+)*")
_NOTE_SPLITS = (" - ", ": ", " — ")
_KEYED = re.compile(r"^\s*([^:\n]{1,80}?)\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Words:
    """The keyword lists (``SLACK_ASK_APPROVE_WORDS`` / ``SLACK_ASK_DECLINE_WORDS``), normalized."""

    approve: frozenset[str] = frozenset(DEFAULT_APPROVE_WORDS)
    decline: frozenset[str] = frozenset(DEFAULT_DECLINE_WORDS)

    @classmethod
    def of(cls, approve: Iterable[str], decline: Iterable[str]) -> Words:
        return cls(
            frozenset(n for n in (normalize(w) for w in approve) if n),
            frozenset(n for n in (normalize(w) for w in decline) if n),
        )


@dataclass(frozen=True, slots=True)
class Reading:
    """What the bot read in a reply.

    ``exact``: apply at once. ``confirm``: apply only after the person confirms (``guesses`` says what
    was guessed). ``unreadable``: nothing to apply (``problems`` says what was not understood). A
    Decline reading has ``declined`` set and its ``reason``; an answer reading has one answer per
    question, in question order."""

    kind: ReadingKind
    answers: tuple[QuestionAnswer, ...] = ()
    declined: bool = False
    reason: str | None = None
    guesses: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    missing: tuple[str, ...] = field(default=())
    """The ids of the questions the reply did not answer (several questions)."""


@dataclass(frozen=True, slots=True)
class _Part:
    """One question's reading."""

    selected: tuple[int, ...] = ()
    custom: str | None = None
    note: str | None = None
    guess: str | None = None


def normalize(text: str) -> str:
    """Case folded, inner whitespace collapsed, surrounding whitespace and punctuation dropped (a
    label of punctuation only, such as "?", keeps its punctuation)."""
    folded = " ".join(text.casefold().split())
    return folded.strip(_STRIP) or folded.strip(_QUOTES) or folded


def approving_option(question: Question) -> int | None:
    """The one option an approve keyword stands for, or None when there is not exactly one."""
    found = [
        i
        for i, option in enumerate(question.options)
        if (label := normalize(option.label)) in APPROVING_LABELS
        or re.split(r"[\W_]+", label, maxsplit=1)[0] in APPROVING_LABELS
    ]
    return found[0] if len(found) == 1 else None


def _label_matches(question: Question, text: str) -> tuple[list[int], list[int]]:
    """Options whose label equals ``text`` (normalized), and those it is a prefix of."""
    wanted = normalize(text)
    if not wanted:
        return [], []
    labels = [normalize(o.label) for o in question.options]
    exact = [i for i, label in enumerate(labels) if label == wanted]
    prefix = [i for i, label in enumerate(labels) if len(wanted) >= MIN_PREFIX and label.startswith(wanted)]
    return exact, prefix


def _one_choice(question: Question, text: str, words: Words) -> _Part | None:
    """One option from ``text``: a number, a label, a unique prefix or an approve keyword."""
    wanted = normalize(text)
    exact, prefix = _label_matches(question, text)
    count = len(question.options)
    if wanted.isdigit() and wanted.isascii():
        n = int(wanted)
        if 1 <= n <= count:
            if exact and exact != [n - 1]:
                # A label that is itself a number: which one was meant is the person's to say.
                return _Part(
                    (n - 1,), guess=f"“{wanted}” read as option {n}, not the option labelled “{wanted}”"
                )
            return _Part((n - 1,))
    if len(exact) == 1:
        return _Part((exact[0],))
    if len(exact) > 1:
        return _Part(
            (exact[0],), guess=f"several options are labelled “{text.strip()}”: read as option {exact[0] + 1}"
        )
    if len(prefix) == 1:
        return _Part((prefix[0],), guess=f"“{text.strip()}” read as “{question.options[prefix[0]].label}”")
    if wanted in words.approve:
        approving = approving_option(question)
        if approving is not None:
            return _Part(
                (approving,), guess=f"“{text.strip()}” read as “{question.options[approving].label}”"
            )
    return None


def _choices(question: Question, text: str, words: Words) -> _Part | None:
    """The options ``text`` names: one for a single-choice question; several ("1, 3", "1 3", labels
    separated by commas) for a multi-choice one."""
    one = _one_choice(question, text, words)
    if not question.multi:
        return one
    stripped = text.strip().strip(_STRIP.replace(",", ""))
    numbers: _Part | None = None
    if _NUMBERS.fullmatch(stripped) and stripped.isascii():
        picked = sorted({int(n) - 1 for n in re.split(r"[\s,]+", stripped)})
        if all(0 <= i < len(question.options) for i in picked):
            numbers = _Part(tuple(picked))
    parts = [p for p in text.split(",") if p.strip()]
    listed: _Part | None = None
    if len(parts) > 1:
        found = [_one_choice(question, p, words) for p in parts]
        if all(f is not None for f in found):
            chosen = sorted({i for f in found if f is not None for i in f.selected})
            guesses = [f.guess for f in found if f is not None and f.guess]
            listed = _Part(tuple(chosen), guess="; ".join(guesses) or None)
    raw = text.split(",")
    empty = any(not p.strip() for p in raw[:-1])  # "a, ,": commas around nothing
    odd = len(parts) > 1 or empty
    if (
        listed is not None
        and listed.guess is None
        and (empty or any("," in o.label for o in question.options))
    ):
        # A comma may be an option's own label, or part of one (",", "a, b"): the list it splits the
        # text into is a reading, not the answer, so the person says whether that is what they meant.
        shown = ", ".join(question.options[i].label for i in listed.selected)
        listed = _Part(listed.selected, guess=f"“{text.strip()}” read as {shown}")
    if odd and listed is None and numbers is None and one is not None and one.guess is None:
        # Commas that do not separate options: the whole text was read as one label only by dropping
        # what follows them, so the person says whether that is what they meant.
        one = _Part(
            one.selected, guess=f"“{text.strip()}” read as “{question.options[one.selected[0]].label}”"
        )
    readings = [r for r in (one, numbers, listed) if r is not None]
    if not readings:
        return None
    distinct = {r.selected for r in readings}
    if len(distinct) > 1:
        first = readings[0]
        shown = ", ".join(question.options[i].label for i in first.selected)
        return _Part(first.selected, guess=f"“{text.strip()}” can be read more than one way: read as {shown}")
    # Every way of reading it agrees; any doubt one of them had (a number that is also another
    # option's label, a prefix) stays.
    return next((r for r in readings if r.guess is not None), readings[0])


def _note(*parts: str | None) -> str | None:
    text = "\n".join(p.strip() for p in parts if p is not None and p.strip())
    return text or None


def _leading_word(text: str, words: frozenset[str]) -> tuple[str, str] | None:
    """``(keyword, rest)`` when ``text`` starts with one of ``words`` (a whole word)."""
    stripped = text.strip()
    for word in sorted(words, key=len, reverse=True):
        if normalize(stripped[: len(word)]) == word and (
            len(stripped) == len(word) or not stripped[len(word)].isalnum()
        ):
            return stripped[: len(word)], stripped[len(word) :].lstrip(_STRIP)
    return None


def _read_line(question: Question, line: str, words: Words, *, split_comma: bool) -> _Part | None:
    """One question's answer from one line: the whole line as a choice, else the part before the
    first `` - `` / ``: `` (or ``, `` for a single-choice question) with the rest as the note, else a
    leading approve keyword with the rest as the note."""
    whole = _choices(question, line, words)
    splits = _NOTE_SPLITS + ((", ",) if split_comma and not question.multi else ())
    cuts = sorted((line.find(s), s) for s in splits if line.find(s) > 0)
    found: list[_Part] = [whole] if whole is not None else []
    for at, sep in cuts:
        head, tail = line[:at], line[at + len(sep) :]
        part = _choices(question, head, words)
        if part is not None:
            found.append(_Part(part.selected, note=_note(tail), guess=part.guess))
    if found:
        first = found[0]
        if len({(f.selected, f.note) for f in found}) > 1:
            # "a - b" is an option and also "a" with the note "b", or two separators cut it two ways:
            # the person says which was meant.
            return _Part(
                first.selected, note=first.note, guess=f"“{line.strip()}” can be read more than one way"
            )
        return next((f for f in found if f.guess is not None), first)
    keyword = _leading_word(line, words.approve)
    if keyword is not None:
        part = _one_choice(question, keyword[0], words)
        if part is not None:
            return _Part(part.selected, note=_note(keyword[1]), guess=part.guess)
    return None


def _declined(text: str, words: Words) -> tuple[str, str | None] | None:
    """``(keyword, reason)`` when the reply starts with a decline keyword."""
    first, _, rest = text.strip().partition("\n")
    found = _leading_word(first, words.decline)
    if found is None:
        return None
    return found[0], _note(found[1], rest)


def _answer(question: Question, part: _Part) -> QuestionAnswer:
    return QuestionAnswer(
        id=question.id,
        status="answered",
        selected=list(part.selected),
        custom_text=part.custom,
        note=part.note,
    )


def _understood(questions: Sequence[Question], words: Words) -> str:
    """What the bot understands, for an unreadable reply."""
    approve = ", ".join(sorted(words.approve)) or "none"
    decline = ", ".join(sorted(words.decline)) or "none"
    declines = f"“{decline}” declines, with a reason after it"
    if len(questions) == 1:
        q = questions[0]
        how = (
            "one or more option numbers (1 is the first) or labels, separated by commas"
            if q.multi
            else "an option's number (1 is the first) or its label"
        )
        return (
            f"Reply with {how}; a second line (or text after “ - ”) is a note. {declines}; "
            f"“{approve}” picks the approving option when there is exactly one."
        )
    ids = ", ".join(q.id for q in questions)
    return (
        "Reply with one line per question, `id: answer` or `1: answer` in question order "
        f"(ids: {ids}); {declines}."
    )


def read_reply(
    text: str, questions: Sequence[Question], *, words: Words | None = None, approval: bool = False
) -> Reading:
    """What ``text`` says about ``questions`` (a pi-question ask's normalized questions).

    ``approval``: the ask is a vote (protocol section 13): exactly one option, no custom text, no note."""
    words = words or Words()
    body = text.strip()
    if not questions:
        return Reading("unreadable", problems=("This ask is a form: answer it with its Answer button.",))
    if not body:
        return Reading("unreadable", problems=(_understood(questions, words),))
    declined = _declined(body, words)
    matched_first = len(questions) == 1 and _choices(questions[0], body.partition("\n")[0], words) is not None
    if declined is not None and not matched_first:
        keyword, reason = declined
        return Reading("confirm", declined=True, reason=reason, guesses=(f"“{keyword}” read as Decline",))
    if len(questions) == 1:
        return _read_single(questions[0], body, words, approval=approval)
    return _read_several(questions, body, words, approval=approval)


def _read_single(question: Question, body: str, words: Words, *, approval: bool) -> Reading:
    first, _, rest = body.partition("\n")
    keyed = _KEYED.match(first)
    if (
        keyed is not None
        and normalize(keyed.group(1)) == normalize(question.id)
        and _choices(question, first, words) is None
    ):
        first = keyed.group(2)
    part = _read_line(question, first, words, split_comma=True)
    if part is not None:
        part = _Part(part.selected, note=_note(part.note, rest), guess=part.guess)
    elif question.custom_allowed and not approval:
        part = _Part(
            (), custom=first.strip(), note=_note(rest), guess="your own answer (not one of the options)"
        )
    else:
        return Reading(
            "unreadable",
            problems=(f"“{_shown(first)}” is not one of the options.", _understood([question], words)),
        )
    return _reading([question], [part], approval=approval)


def _read_several(questions: Sequence[Question], body: str, words: Words, *, approval: bool) -> Reading:
    parts: dict[int, _Part] = {}
    problems: list[str] = []
    ids = {normalize(q.id): i for i, q in enumerate(questions)}
    for line in (raw for raw in body.splitlines() if raw.strip()):
        keyed = _KEYED.match(line)
        if keyed is None:
            problems.append(f"“{_shown(line)}” names no question (write `id: answer`).")
            continue
        key, value = normalize(keyed.group(1)), keyed.group(2)
        index = ids.get(key)
        if index is None and key.isdigit() and key.isascii() and 1 <= int(key) <= len(questions):
            index = int(key) - 1
        if index is None:
            problems.append(f"“{_shown(keyed.group(1))}” is not a question of this ask.")
            continue
        if index in parts:
            problems.append(f"{questions[index].id} is answered twice.")
            continue
        question = questions[index]
        part = _read_line(question, value, words, split_comma=False)
        if part is None and question.custom_allowed and value.strip():
            part = _Part((), custom=value.strip(), guess=f"{question.id}: your own answer")
        if part is None:
            problems.append(f"{question.id}: “{_shown(value)}” is not one of the options.")
            continue
        parts[index] = part
    missing = tuple(q.id for i, q in enumerate(questions) if i not in parts)
    if missing:
        problems.append("Not answered: " + ", ".join(missing) + ".")
    if problems:
        return Reading("unreadable", problems=(*problems, _understood(questions, words)), missing=missing)
    return _reading(questions, [parts[i] for i in range(len(questions))], approval=approval)


def _reading(questions: Sequence[Question], parts: Sequence[_Part], *, approval: bool) -> Reading:
    for question, part in zip(questions, parts, strict=True):
        if not question.multi and len(part.selected) > 1:
            return Reading("unreadable", problems=(f"{question.id}: pick one option.",))
        if approval and len(part.selected) != 1:
            return Reading("unreadable", problems=("A vote is for one of the options.",))
    answers = tuple(_answer(q, p) for q, p in zip(questions, parts, strict=True))
    if approval:
        answers = tuple(QuestionAnswer(id=a.id, status="answered", selected=a.selected) for a in answers)
    guesses = tuple(p.guess for p in parts if p.guess)
    return Reading("confirm" if guesses else "exact", answers=answers, guesses=guesses)


def _shown(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Pending:
    """What a Confirm button carries: the ask, the message replied to, and the reading to apply."""

    tag: str
    ask_id: str
    channel: str
    ts: str
    """The ask's message the reply was under (the one the answer is recorded on)."""
    answers: tuple[QuestionAnswer, ...] = ()
    declined: bool = False
    reason: str | None = None

    def encode(self) -> str:
        data: dict[str, object] = {"t": self.tag, "a": self.ask_id, "c": self.channel, "s": self.ts}
        if self.declined:
            data["d"] = self.reason or ""
        else:
            data["x"] = [a.to_wire() for a in self.answers]
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, value: str) -> Pending | None:
        """Parse a value the bot wrote; anything else gives None."""
        data = decode_object(value)
        if data is None:
            return None
        fields = [data.get(k) for k in ("t", "a", "c", "s")]
        if not all(isinstance(f, str) and f for f in fields):
            return None
        tag, ask_id, channel, ts = (str(f) for f in fields)
        if "d" in data:
            reason = data["d"]
            return cls(
                tag,
                ask_id,
                channel,
                ts,
                declined=True,
                reason=reason if isinstance(reason, str) and reason else None,
            )
        raw = data.get("x")
        if not isinstance(raw, list):
            return None
        try:
            answers = tuple(QuestionAnswer.model_validate(a) for a in raw)
        except ValidationError:
            return None
        return cls(tag, ask_id, channel, ts, answers=answers)


def still_fits(answers: Sequence[QuestionAnswer], questions: Sequence[Question], *, approval: bool) -> bool:
    """Whether confirmed answers still answer ``questions`` as a form could (checked at Confirm time)."""
    if len(answers) != len(questions):
        return False
    for answer, question in zip(answers, questions, strict=True):
        if answer.id != question.id or answer.status != "answered" or answer.defaulted is not None:
            return False
        if any(not 0 <= s < len(question.options) for s in answer.selected):
            return False
        if len(set(answer.selected)) != len(answer.selected) or (
            not question.multi and len(answer.selected) > 1
        ):
            return False
        if answer.custom_text is not None and (
            not question.custom_allowed or approval or not answer.custom_text.strip()
        ):
            return False
        if not answer.selected and answer.custom_text is None:
            return False
        if approval and (len(answer.selected) != 1 or answer.note is not None):
            return False
    return True
