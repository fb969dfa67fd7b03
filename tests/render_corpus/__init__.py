"""A corpus of asks rendered through the public `bot.render` API, for byte-identical snapshots.

Each case is a name and a function that renders one payload (a message, a modal or a refusal text) with
fixed times and ids, so the output depends on nothing but the rendering code. `tests/test_render_corpus.py`
compares every case with its committed JSON file here; after a deliberate change to what the bot draws,
regenerate them with ``python -m tests.render_corpus --update`` and review the diff.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.ids import AskRef, FormMeta
from bot.model import AskRecord
from bot.render import (
    render_ask_message,
    render_decline_modal,
    render_ended_message,
    render_form_modal,
    render_other_modal,
    render_refusal,
    render_reminder,
)
from contract.envelopes import Approval, Requester, ResultResponder, ResultVote
from contract.question import AskRequest, Option, Question, QuestionAnswer
from contract.rich import NormalizedQuestion, RichAnswer, RichForm, RichFormResult, RichOption

__all__ = ["CASES", "HERE", "render_case", "snapshot_path", "snapshot_text"]

HERE = Path(__file__).parent
NOW = 1_700_000_000_000
HOUR = 3_600_000
META = FormMeta(ref=AskRef(tag="tag1", ask_id="ask-1"), channel="C0123", ts="1700000000.000100")

# Everything an agent could smuggle in: broadcasts, mentions, links, Markdown, entities, emoji.
HOSTILE = (
    "<!channel> <@U1> <http://x|y> @here <!here> <#C1> <!subteam^S1> *bold* **bolder** _it_ "
    "[link](http://evil.example) `code` & < > www.evil.example 😀 "
)


def hostile(n: int) -> str:
    return (HOSTILE * (n // len(HOSTILE) + 1))[:n]


def question(
    text: str = "Which database should we use?",
    labels: tuple[str, ...] = ("Postgres", "SQLite"),
    **fields: Any,
) -> Question:
    return Question(
        id=fields.pop("id", "q1"), question=text, options=[Option(label=x) for x in labels], **fields
    )


def pi_ask(*questions: Question, **fields: Any) -> AskRecord:
    fields.setdefault("deadline_ms", NOW + HOUR)
    return AskRecord(
        ask_id="ask-1",
        tag="tag1",
        reply_to="replies",
        request=AskRequest(questions=list(questions or [question()])),
        created_ms=NOW,
        **fields,
    )


def rich_ask(*questions: NormalizedQuestion, **form: Any) -> AskRecord:
    return AskRecord(
        ask_id="ask-1",
        tag="tag1",
        reply_to="replies",
        format="rich",
        form=RichForm(questions=list(questions), **form),
        created_ms=NOW,
        deadline_ms=NOW + HOUR,
    )


def rich_question(i: int = 0, kind: str = "radio", n: int = 3, **fields: Any) -> NormalizedQuestion:
    fields.setdefault(
        "options",
        [RichOption(label=f"Choice {j}", value=f"v{j}", recommended=j == 1) for j in range(n)]
        if kind != "text"
        else [],
    )
    fields.setdefault("allow_other", kind != "text")
    return NormalizedQuestion(
        id=f"q{i + 1}", type=kind, prompt=f"Prompt {i + 1}?", label=f"Q{i + 1}", **fields
    )


def labels(n: int) -> tuple[str, ...]:
    return tuple(f"Option {chr(65 + i)}" for i in range(n))


def form_ask() -> AskRecord:
    """Several questions: multi, single, no custom text, a recommendation, every category."""
    return pi_ask(
        question(id="db", description="We need **one** of:\n\n- fast\n- cheap", recommended=0),
        question(
            "Which regions?",
            ("eu-west", "us-east", "ap-south"),
            id="regions",
            multi=True,
            category="scope-product",
        ),
        question("Ship it?", ("Yes", "No"), id="ship", allow_custom=False, category="implementation"),
        question("Grant admin?", ("Grant", "Deny"), id="admin", category="security-permission"),
        requester=Requester(name="build-bot", session="s-42", title="Fix CI", url="https://ci.example/run/1"),
    )


def worst_case_ask() -> AskRecord:
    """The contract's limits: 8 questions x 12 options, 4000-unit hostile texts, a 5000-unit label."""
    return pi_ask(
        *[
            Question(
                id=f"q{i}",
                question=hostile(4000),
                description=hostile(4000),
                options=[
                    Option(
                        label=hostile(5000) if j == 0 else f"{j} " + hostile(4000), description=hostile(4000)
                    )
                    for j in range(12)
                ],
                recommended=i % 12,
                multi=i % 2 == 1,
                category="security-permission",
            )
            for i in range(8)
        ],
        requester=Requester(
            name=hostile(200),
            session=hostile(200),
            title=hostile(500),
            url="https://ex.example/" + "a" * 1900,
        ),
    )


def rich_form() -> AskRecord:
    return rich_ask(
        rich_question(0, "radio", 3, body="Some **body** text", context="Context", recommendation="Take 1"),
        rich_question(1, "checkbox", 12, caveats="Careful", required=False),
        rich_question(2, "text", placeholder="Say it"),
        title="Release plan",
        description="Answer *all* of these.",
    )


def worst_rich_form() -> AskRecord:
    kinds = ["radio", "checkbox", "text", "radio", "checkbox", "text", "radio", "checkbox"]
    return rich_ask(
        *[
            NormalizedQuestion(
                id=f"q{i}",
                type=kind,
                prompt=hostile(4000),
                label=hostile(4000),
                body=hostile(4000),
                context=hostile(4000),
                recommendation=hostile(4000),
                caveats=hostile(4000),
                options=[
                    RichOption(
                        label=hostile(4000),
                        value=f"v{j}",
                        description=hostile(4000),
                        details=hostile(4000),
                        note=hostile(4000),
                        recommended=j == 2,
                    )
                    for j in range(12 if kind != "text" else 0)
                ],
                allow_other=kind != "text",
                required=i % 3 != 0,
                placeholder=hostile(4000),
            )
            for i, kind in enumerate(kinds)
        ],
        title=hostile(4000),
        description=hostile(4000),
    )


def hostile_ask() -> AskRecord:
    return pi_ask(
        question(
            "Deploy <!channel> now? <@U1> said *yes* at <http://x|y>; see [the doc](http://evil.example)",
            ("<!channel> yes", "*no* <@U1>", "[maybe](http://x)"),
            description="**really** <!here> `rm -rf`",
        ),
        requester=Requester(name="<@U1> bot", session="<!channel>", title="*bold* <http://x|y>"),
    )


def _answers(ask: AskRecord, outcome: str) -> list[QuestionAnswer]:
    """What the result would hold: answered asks pick the first option, with the answerer's own text
    and a hostile note on the first question; other endings answer nothing."""
    if ask.request is None:
        return []
    if outcome != "answered":
        return [QuestionAnswer(id=q.id, status="timeout") for q in ask.request.questions]
    return [
        QuestionAnswer(
            id=q.id,
            status="answered",
            selected=[0],
            custom_text="<!here> mine" if i == 0 else None,
            note="<!channel> *ship* it <http://x|y>" if i == 0 else None,
        )
        for i, q in enumerate(ask.request.questions)
    ]


def _rich_answers(ask: AskRecord) -> RichFormResult | None:
    if ask.form is None:
        return None
    answers = [
        RichAnswer(
            id=q.id,
            type=q.type,
            value=q.options[0].value if q.options else "typed <!here> text",
            was_custom=not q.options,
            selected_option_indexes=[0] if q.options else None,
        )
        for q in ask.form.questions
    ]
    return RichFormResult(questions=ask.form.questions, answers=answers, additional_text="Thanks *all*")


def _ended(ask: AskRecord, outcome: str, responder: str | None, reason: str | None = None) -> Any:
    return render_ended_message(
        ask,
        outcome=outcome,
        responder_id=responder,
        resolved_ms=NOW + HOUR // 2,
        answers=_answers(ask, outcome),
        form=_rich_answers(ask) if outcome == "answered" else None,
        reason=reason,
    )


Case = Callable[[], Any]


def _approval_ask() -> AskRecord:
    return pi_ask(
        question("Deploy v2 to production?", labels=("Approve", "Reject")),
        approval=Approval(count=2, veto=[1]),
        requester=Requester(name="deploy-bot", user="U0REQ"),
    )


def _vote(user: str, name: str, option: int) -> ResultVote:
    return ResultVote(
        user=ResultResponder(id=user, name=name), selected=[option], at="2024-01-01T00:00:00.000Z"
    )


# A hostile display name must show as text: no mention, no link.
_VOTES = [_vote("U0ANN", "Ann <@U0BOSS> <!channel>", 0)]

CASES: dict[str, Case] = {
    **{
        f"one_click_{n}_options": (
            lambda n=n: render_ask_message(pi_ask(question(labels=labels(n))), now_ms=NOW)
        )
        for n in range(1, 6)
    },
    "one_click_no_other": lambda: render_ask_message(pi_ask(question(allow_custom=False)), now_ms=NOW),
    "one_click_recommended": lambda: render_ask_message(pi_ask(question(recommended=1)), now_ms=NOW),
    "one_click_no_deadline": lambda: render_ask_message(pi_ask(deadline_ms=None), now_ms=NOW),
    "one_click_deadline_passed": lambda: render_ask_message(pi_ask(deadline_ms=NOW), now_ms=NOW),
    "one_click_long_cut": lambda: render_ask_message(
        pi_ask(
            Question(
                id="q1",
                question="y" * 4000,
                description="z" * 4000,
                options=[Option(label="A", description="d" * 4000), Option(label="B" * 200)],
            )
        ),
        now_ms=NOW,
    ),
    "six_options_form": lambda: render_ask_message(pi_ask(question(labels=labels(6))), now_ms=NOW),
    "form_message": lambda: render_ask_message(form_ask(), now_ms=NOW),
    "form_modal": lambda: render_form_modal(form_ask(), META),
    "form_modal_12_options": lambda: render_form_modal(pi_ask(question(labels=labels(12), multi=True)), META),
    "one_click_form_modal": lambda: render_form_modal(pi_ask(), META),
    "other_modal": lambda: render_other_modal(pi_ask(), 0, META),
    "other_modal_hostile": lambda: render_other_modal(hostile_ask(), 0, META),
    "worst_case_message": lambda: render_ask_message(
        worst_case_ask(), now_ms=NOW, mentions=["U0ABC", "S0GHI"], elsewhere=[hostile(300)] * 5
    ),
    "worst_case_modal": lambda: render_form_modal(worst_case_ask(), META),
    "worst_case_ended": lambda: render_ended_message(
        worst_case_ask(),
        outcome="answered",
        responder_id="U0ABC",
        resolved_ms=NOW,
        answers=[
            QuestionAnswer(
                id=f"q{i}",
                status="answered",
                selected=list(range(12)),
                custom_text=hostile(4000),
                note=hostile(4000),
            )
            for i in range(8)
        ],
        reason=hostile(2000),
    ),
    "rich_message": lambda: render_ask_message(rich_form(), now_ms=NOW),
    "rich_modal": lambda: render_form_modal(rich_form(), META),
    "rich_other_modal": lambda: render_other_modal(rich_form(), 1, META),
    "worst_rich_message": lambda: render_ask_message(worst_rich_form(), now_ms=NOW, mentions=["U0ABC"]),
    "worst_rich_modal": lambda: render_form_modal(worst_rich_form(), META),
    "hostile_message": lambda: render_ask_message(
        hostile_ask(), now_ms=NOW, mentions=["U0ABC", "<!channel>", "W0DEF"], elsewhere=["#ops <!here>"]
    ),
    "hostile_modal": lambda: render_form_modal(hostile_ask(), META),
    "hostile_ended": lambda: _ended(hostile_ask(), "dismissed", "U0ABC", "<!channel> deleted *it*"),
    "escalation_step_1": lambda: render_ask_message(
        pi_ask(), now_ms=NOW + HOUR // 4, step=1, mentions=["U0ABC", "W0DEF", "S0GHI"]
    ),
    "escalation_step_2_elsewhere": lambda: render_ask_message(
        form_ask(), now_ms=NOW + HOUR // 2, step=2, mentions=["S0GHI"], elsewhere=["#ops", "@alice", "#eng"]
    ),
    "ended_answered": lambda: _ended(pi_ask(), "answered", "U0ABC"),
    "ended_answered_by_operator": lambda: _ended(form_ask(), "answered", "ops-alice"),
    "ended_defaulted": lambda: _ended(pi_ask(), "defaulted", None),
    "ended_answered_no_responder": lambda: _ended(pi_ask(), "answered", None),
    "ended_declined": lambda: _ended(pi_ask(), "declined", "U0ABC"),
    "ended_cancelled": lambda: _ended(pi_ask(), "cancelled", None, "agent stopped"),
    "ended_cancelled_by_person": lambda: _ended(pi_ask(), "cancelled", "U0ABC"),
    "ended_withdrawn": lambda: _ended(form_ask(), "withdrawn", None, "no longer needed"),
    "ended_timeout": lambda: _ended(pi_ask(), "timeout", None),
    "ended_dismissed": lambda: _ended(pi_ask(), "dismissed", "U0ABC", "message deleted"),
    "ended_unavailable": lambda: _ended(pi_ask(), "unavailable", None, "channel_not_found"),
    "ended_error": lambda: _ended(pi_ask(), "error", None, "no default allowed"),
    "ended_unknown_outcome": lambda: _ended(pi_ask(), "exploded", None),
    "ended_rich": lambda: _ended(rich_form(), "answered", "U0ABC"),
    "reminder": lambda: render_reminder(pi_ask(), number=1, now_ms=NOW + HOUR // 4),
    "reminder_mentions": lambda: render_reminder(
        form_ask(), number=3, now_ms=NOW + HOUR // 2, mentions=["U0ABC", "S0GHI"]
    ),
    "reminder_no_deadline": lambda: render_reminder(pi_ask(deadline_ms=None), number=0, now_ms=NOW),
    "reminder_deadline_passed": lambda: render_reminder(pi_ask(), number=2, now_ms=NOW + 2 * HOUR),
    "reminder_days_left": lambda: render_reminder(pi_ask(deadline_ms=NOW + 50 * HOUR), number=1, now_ms=NOW),
    "refusal_not_allowed": lambda: render_refusal("not_allowed"),
    "refusal_ended": lambda: render_refusal("ended"),
    "refusal_late": lambda: render_refusal("late"),
    "refusal_requester": lambda: render_refusal("requester"),
    "approval_no_votes": lambda: render_ask_message(_approval_ask(), now_ms=NOW),
    "approval_tally": lambda: render_ask_message(_approval_ask(), now_ms=NOW, votes=_VOTES),
    "approval_ended": lambda: render_ended_message(
        _approval_ask(),
        outcome="answered",
        responder_id="U0BOB",
        resolved_ms=NOW,
        answers=[QuestionAnswer(id="q1", status="answered", selected=[0])],
        votes=[*_VOTES, _vote("U0BOB", "Bob", 0)],
    ),
    "approval_form_modal": lambda: render_form_modal(_approval_ask(), META),
    "decline_modal": lambda: render_decline_modal(pi_ask(), META),
    "ended_declined_with_reason": lambda: _ended(
        pi_ask(), "cancelled", "U0ABC", "<!here> freeze *until* Monday"
    ),
}


def render_case(name: str) -> Any:
    """The case's payload as plain JSON values (a `Message` becomes its chat.postMessage payload)."""
    rendered = CASES[name]()
    return rendered.to_payload() if hasattr(rendered, "to_payload") else rendered


def snapshot_text(name: str) -> str:
    # Key order is kept (not sorted): it is part of what the bot sends.
    return json.dumps(render_case(name), indent=1, ensure_ascii=False) + "\n"


def snapshot_path(name: str) -> Path:
    return HERE / f"{name}.json"
