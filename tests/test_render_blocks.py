"""bot.render: valid Block Kit for every ask, the one-click rules, and no agent markup ever leaks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from bot.ids import (
    ACTION_CHOOSE,
    ACTION_DECLINE,
    ACTION_OPEN,
    ACTION_OTHER,
    VIEW_FORM,
    VIEW_OTHER,
    AskRef,
    FormMeta,
)
from bot.model import AskRecord
from bot.render import (
    WORD_JOINER,
    Message,
    RefusalKind,
    date_token,
    mention_tokens,
    render_ask_message,
    render_ended_message,
    render_form_modal,
    render_other_modal,
    render_refusal,
    render_reminder,
)
from bot.render.ended import ENDED_OUTCOMES
from bot.slack.blockkit import VIEW_MAX_BYTES, text_length, validate_message, validate_view, view_size
from contract.envelopes import Approval, Requester
from contract.question import AskRequest, Option, Question, QuestionAnswer
from contract.rich import NormalizedQuestion, OptionNote, RichAnswer, RichForm, RichFormResult, RichOption

NOW = 1_700_000_000_000
HOUR = 3_600_000
META = FormMeta(ref=AskRef(tag="tag1", ask_id="ask-1"), channel="C0123", ts="1700000000.000100")
ANSWERED_FIRST = QuestionAnswer(id="q1", status="answered", selected=[0])

EVIL = (
    "<!channel> <@U123> <http://x|y> @here <!here> <#C1> <!subteam^S1> **bold** _it_ "
    "[link](http://evil.example) `code` & < > www.evil.example 😀 "
)


def evil(n: int) -> str:
    return (EVIL * (n // len(EVIL) + 1))[:n]


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
        [RichOption(label=f"Choice {j}", value=f"v{j}") for j in range(n)] if kind != "text" else [],
    )
    fields.setdefault("allow_other", kind != "text")
    return NormalizedQuestion(
        id=f"q{i + 1}", type=kind, prompt=f"Prompt {i + 1}?", label=f"Q{i + 1}", **fields
    )


def biggest_hostile_ask() -> AskRecord:
    """The contract's limits: 8 questions x 12 options, 4000-unit texts, a 5000-unit option label."""
    questions = [
        Question(
            id=f"q{i}",
            question=evil(4000),
            description=evil(4000),
            options=[
                Option(label=evil(5000) if j == 0 else f"{j} " + evil(4000), description=evil(4000))
                for j in range(12)
            ],
            recommended=j_rec(i),
            multi=i % 2 == 1,
            category="security-permission",
        )
        for i in range(8)
    ]
    return pi_ask(
        *questions,
        requester=Requester(
            name=evil(200), session=evil(200), title=evil(500), url="https://ex.example/" + "a" * 1900
        ),
    )


def biggest_rich_form() -> AskRecord:
    """A rich form with every text at 4000 units and every optional field set."""
    kinds = ["radio", "checkbox", "text", "radio", "checkbox", "text", "radio", "checkbox"]
    questions = [
        NormalizedQuestion(
            id=f"q{i}",
            type=kind,
            prompt=evil(4000),
            label=evil(4000),
            body=evil(4000),
            context=evil(4000),
            recommendation=evil(4000),
            caveats=evil(4000),
            options=[
                RichOption(
                    label=evil(4000),
                    value=f"v{j}",
                    description=evil(4000),
                    details=evil(4000),
                    note=evil(4000),
                    recommended=j == 2,
                )
                for j in range(12 if kind != "text" else 0)
            ],
            allow_other=kind != "text",
            required=i % 3 != 0,
            placeholder=evil(4000),
        )
        for i, kind in enumerate(kinds)
    ]
    return rich_ask(*questions, title=evil(4000), description=evil(4000))


def j_rec(i: int) -> int:
    return i % 12


def strings(payload: Any) -> Iterator[str]:
    if isinstance(payload, str):
        yield payload
    elif isinstance(payload, dict):
        for value in payload.values():
            yield from strings(value)
    elif isinstance(payload, list):
        for value in payload:
            yield from strings(value)


def buttons(message: Message) -> list[dict[str, Any]]:
    (actions,) = [b for b in message.blocks if b["type"] == "actions"]
    assert actions is message.blocks[-1], "the actions block comes last"
    return list(actions["elements"])


def mrkdwn_text(message: Message) -> str:
    return "\n".join(strings(message.blocks))


_DATE = r"<!date\^\d+\^\{date_short_pretty\} at \{time\}\|[0-9: -]+UTC>"


def assert_only_bot_tokens(
    payload: Any, *, users: tuple[str, ...] = (), groups: tuple[str, ...] = ()
) -> None:
    """Every ``<…>`` sequence is the bot's own: a date, or a mention the test asked for."""
    allowed = [_DATE, *(re.escape(f"<@{u}>") for u in users), *(re.escape(f"<!subteam^{g}>") for g in groups)]
    for text in strings(payload):
        rest = re.sub("|".join(allowed), "", text)
        assert "<" not in rest, text
        assert ">" not in rest, text
        assert "&lt;!channel&gt;" in text or "<!channel>" not in text


def input_blocks(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


# -- the ask message ------------------------------------------------------------------------------------


class TestOneClick:
    @pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
    def test_one_single_choice_question_with_up_to_five_options_gets_a_button_each(self, n: int) -> None:
        labels = tuple(f"Option {chr(65 + i)}" for i in range(n))
        message = render_ask_message(pi_ask(question(labels=labels)), now_ms=NOW)
        found = buttons(message)
        choose = [b for b in found if b["action_id"].startswith(ACTION_CHOOSE)]
        assert [b["text"]["text"] for b in choose] == list(labels)
        assert [b["action_id"] for b in choose] == [f"{ACTION_CHOOSE}:{i}" for i in range(n)]
        assert [AskRef.decode(b["value"]) for b in choose] == [
            AskRef(tag="tag1", ask_id="ask-1", option=i) for i in range(n)
        ]
        assert validate_message(message.to_payload()) == []

    def test_six_options_open_the_form_instead(self) -> None:
        message = render_ask_message(pi_ask(question(labels=tuple("ABCDEF"))), now_ms=NOW)
        assert [b["action_id"] for b in buttons(message)] == [ACTION_OPEN, ACTION_DECLINE]

    def test_multi_choice_opens_the_form(self) -> None:
        message = render_ask_message(pi_ask(question(multi=True)), now_ms=NOW)
        assert [b["action_id"] for b in buttons(message)] == [ACTION_OPEN, ACTION_DECLINE]

    def test_two_questions_open_the_form(self) -> None:
        ask = pi_ask(question(id="a"), question(id="b"))
        assert [b["action_id"] for b in buttons(render_ask_message(ask, now_ms=NOW))] == [
            ACTION_OPEN,
            ACTION_DECLINE,
        ]

    def test_rich_forms_always_open_the_form(self) -> None:
        message = render_ask_message(rich_ask(rich_question(n=2)), now_ms=NOW)
        assert [b["action_id"] for b in buttons(message)] == [ACTION_OPEN, ACTION_DECLINE]

    def test_other_button_when_custom_text_is_allowed(self) -> None:
        found = buttons(render_ask_message(pi_ask(question()), now_ms=NOW))
        assert [b["action_id"] for b in found][-2:] == [ACTION_OTHER, ACTION_DECLINE]
        assert found[-2]["text"]["text"] == "Other…"
        assert AskRef.decode(found[-2]["value"]) == AskRef(tag="tag1", ask_id="ask-1")

    def test_no_other_button_when_custom_text_is_off(self) -> None:
        found = buttons(render_ask_message(pi_ask(question(allow_custom=False)), now_ms=NOW))
        assert ACTION_OTHER not in [b["action_id"] for b in found]

    def test_recommended_option_is_the_primary_button(self) -> None:
        found = buttons(render_ask_message(pi_ask(question(recommended=1)), now_ms=NOW))
        assert [b.get("style") for b in found[:2]] == [None, "primary"]

    def test_long_labels_are_cut_to_75_characters(self) -> None:
        message = render_ask_message(pi_ask(question(labels=("x" * 5000, "short"))), now_ms=NOW)
        first = buttons(message)[0]["text"]["text"]
        assert text_length(first) == 75
        assert first.endswith("…")

    def test_a_cut_message_offers_the_full_form_too(self) -> None:
        long = Question(
            id="q1",
            question="y" * 4000,
            description="z" * 4000,
            options=[Option(label="A", description="d" * 4000), Option(label="B")],
        )
        found = buttons(render_ask_message(pi_ask(long), now_ms=NOW))
        assert [b["action_id"] for b in found][2:] == [ACTION_OTHER, ACTION_OPEN, ACTION_DECLINE]
        assert found[3]["text"]["text"] == "Read all / answer…"

    def test_an_uncut_message_has_no_form_button(self) -> None:
        ids = [b["action_id"] for b in buttons(render_ask_message(pi_ask(), now_ms=NOW))]
        assert ACTION_OPEN not in ids

    def test_action_ids_are_told_apart_by_id_and_value_not_text(self) -> None:
        found = buttons(render_ask_message(pi_ask(question(labels=("Same", "Same"))), now_ms=NOW))
        assert len({b["action_id"] for b in found}) == len(found)
        assert found[0]["value"] != found[1]["value"]


class TestAskMessage:
    def test_decline_is_dangerous_and_opens_its_modal_instead_of_a_confirmation(self) -> None:
        decline = buttons(render_ask_message(pi_ask(), now_ms=NOW))[-1]
        assert decline["action_id"] == ACTION_DECLINE
        assert decline["style"] == "danger"
        # The modal (an optional reason, then Decline) is the confirmation: no dialog before it.
        assert "confirm" not in decline
        assert AskRef.decode(decline["value"]) == AskRef(tag="tag1", ask_id="ask-1")

    def test_answer_button_is_primary(self) -> None:
        answer = buttons(render_ask_message(pi_ask(question(multi=True)), now_ms=NOW))[0]
        assert (answer["text"]["text"], answer["style"]) == ("Answer…", "primary")

    def test_header_says_who_asks(self) -> None:
        message = render_ask_message(pi_ask(requester=Requester(name="build-bot")), now_ms=NOW)
        assert message.blocks[0] == {
            "type": "header",
            "text": {"type": "plain_text", "text": "Question from build-bot", "emoji": True},
        }

    def test_header_without_a_requester(self) -> None:
        assert render_ask_message(pi_ask(), now_ms=NOW).blocks[0]["text"]["text"] == "A question for you"
        two = pi_ask(question(id="a"), question(id="b"))
        assert render_ask_message(two, now_ms=NOW).blocks[0]["text"]["text"] == "Some questions for you"

    def test_header_uses_the_form_title(self) -> None:
        message = render_ask_message(rich_ask(rich_question(), title="Release plan"), now_ms=NOW)
        assert message.blocks[0]["text"]["text"] == "Release plan"

    def test_requester_context_is_shown_and_the_url_is_not_a_link(self) -> None:
        requester = Requester(
            name="build-bot", session="s-42", title="Fix CI", url="https://ci.example/run/1"
        )
        text = mrkdwn_text(render_ask_message(pi_ask(requester=requester), now_ms=NOW))
        assert "From *build-bot*" in text
        assert "session `s-42`" in text
        assert "“Fix CI”" in text
        assert f"https{WORD_JOINER}://ci.example/run/1" in text
        assert "<http" not in text

    def test_category_is_shown_per_question(self) -> None:
        ask = pi_ask(question(category="security-permission"), question(id="b", category="scope-product"))
        text = mrkdwn_text(render_ask_message(ask, now_ms=NOW))
        assert "Category: *Security / permission*" in text
        assert "Category: *Scope / product*" in text

    def test_deadline_is_a_date_token_in_the_readers_time_zone(self) -> None:
        text = mrkdwn_text(render_ask_message(pi_ask(deadline_ms=NOW + HOUR), now_ms=NOW))
        assert "Answer by <!date^1700003600^{date_short_pretty} at {time}|2023-11-14 23:13 UTC>" in text

    def test_no_deadline_and_past_deadline_are_said_in_words(self) -> None:
        assert "No deadline" in mrkdwn_text(render_ask_message(pi_ask(deadline_ms=None), now_ms=NOW))
        assert "The deadline has passed" in mrkdwn_text(
            render_ask_message(pi_ask(deadline_ms=NOW), now_ms=NOW)
        )
        far = render_ask_message(pi_ask(deadline_ms=10**20), now_ms=NOW)
        assert "No deadline" in mrkdwn_text(far)
        assert validate_message(far.to_payload()) == []

    def test_recommended_option_is_marked_in_the_listing(self) -> None:
        text = mrkdwn_text(render_ask_message(pi_ask(question(recommended=0)), now_ms=NOW))
        assert "• Postgres  ⭐ _recommended_" in text

    def test_single_and_multi_choice_are_noted(self) -> None:
        single = mrkdwn_text(render_ask_message(pi_ask(question(allow_custom=False)), now_ms=NOW))
        multi = mrkdwn_text(render_ask_message(pi_ask(question(multi=True)), now_ms=NOW))
        assert "Choose one" in single
        assert "or write your own" not in single
        assert "Choose one or more, or write your own answer" in multi

    def test_description_markdown_is_converted(self) -> None:
        ask = pi_ask(question(description="We need **one** of:\n\n- fast\n- cheap"))
        assert "We need *one* of:\n\n• fast\n• cheap" in mrkdwn_text(render_ask_message(ask, now_ms=NOW))

    def test_long_question_text_is_split_across_sections(self) -> None:
        text = "\n\n".join(f"Paragraph {i} " + "w" * 900 for i in range(4))
        message = render_ask_message(pi_ask(question(text=text)), now_ms=NOW)
        sections = [b["text"]["text"] for b in message.blocks if b["type"] == "section"]
        assert any(s.startswith("Paragraph 0") for s in sections)
        assert any(s.startswith("Paragraph 3") for s in sections)
        assert all(text_length(s) <= 3000 for s in sections)

    def test_every_mrkdwn_object_is_verbatim(self) -> None:
        message = render_ask_message(biggest_hostile_ask(), now_ms=NOW)
        objects = [
            o
            for b in message.blocks
            for o in [b.get("text"), *b.get("elements", [])]
            if isinstance(o, dict) and o.get("type") == "mrkdwn"
        ]
        assert objects
        assert all(o["verbatim"] is True for o in objects)

    def test_fallback_text_is_plain_and_escaped(self) -> None:
        message = render_ask_message(pi_ask(question(text="Deploy <!channel> now?\n**really**")), now_ms=NOW)
        assert message.text == "A question for you: Deploy &lt;!channel&gt; now? **really**"

    def test_rendering_is_deterministic(self) -> None:
        ask = biggest_hostile_ask()
        assert render_ask_message(ask, now_ms=NOW) == render_ask_message(ask, now_ms=NOW)


class TestMentions:
    def test_step_mentions_are_the_only_mentions(self) -> None:
        message = render_ask_message(pi_ask(), now_ms=NOW, step=1, mentions=["U0ABC", "W0DEF", "S0GHI"])
        assert message.blocks[1]["text"]["text"].startswith("<@U0ABC> <@W0DEF> <!subteam^S0GHI>")
        assert message.text.startswith("<@U0ABC> <@W0DEF> <!subteam^S0GHI> ")
        assert_only_bot_tokens(message.to_payload(), users=("U0ABC", "W0DEF"), groups=("S0GHI",))

    @pytest.mark.parametrize(
        "bad", ["C0123", "u0abc", "U", "<!channel>", "U1>x", "S1|y", "!here", "", "U" + "A" * 40, "U0ABC\n"]
    )
    def test_malformed_mention_ids_are_dropped(self, bad: str) -> None:
        assert mention_tokens([bad]) == []

    def test_duplicate_mentions_appear_once(self) -> None:
        assert mention_tokens(["U0ABC", "U0ABC", "S0X1"]) == ["<@U0ABC>", "<!subteam^S0X1>"]

    def test_no_mentions_no_mention_section(self) -> None:
        message = render_ask_message(pi_ask(), now_ms=NOW)
        assert "<@" not in json.dumps(message.to_payload())

    def test_escalated_messages_say_so_and_where_else_the_ask_went(self) -> None:
        message = render_ask_message(pi_ask(), now_ms=NOW, step=2, elsewhere=["#ops <!here>", "@alice"])
        text = mrkdwn_text(message)
        assert "Escalated here" in text
        assert "Also asked in #ops &lt;!here&gt;, @alice" in text


class TestBiggestHostileAsk:
    def test_message_is_valid_and_within_the_block_budget(self) -> None:
        message = render_ask_message(
            biggest_hostile_ask(), now_ms=NOW, mentions=["U0ABC", "S0GHI"], elsewhere=[evil(300)] * 5
        )
        assert validate_message(message.to_payload()) == []
        assert len(message.blocks) <= 50
        assert [b["action_id"] for b in buttons(message)] == [ACTION_OPEN, ACTION_DECLINE]

    def test_message_shows_every_question_cut_with_a_marker(self) -> None:
        text = mrkdwn_text(render_ask_message(biggest_hostile_ask(), now_ms=NOW))
        for i in range(1, 9):
            assert f"*Q{i}.*" in text
        assert "… (see the form for the full text)" in text

    def test_message_carries_no_agent_markup(self) -> None:
        message = render_ask_message(biggest_hostile_ask(), now_ms=NOW, mentions=["U0ABC"])
        assert_only_bot_tokens(message.to_payload(), users=("U0ABC",))
        blob = json.dumps(message.to_payload(), ensure_ascii=False)
        assert "<!channel>" not in blob
        assert "<@U123>" not in blob
        assert "<http" not in blob
        assert re.search(r"(?i)@(here|channel)\b", blob) is None

    def test_modal_is_valid_and_within_budget(self) -> None:
        view = render_form_modal(biggest_hostile_ask(), META)
        assert validate_view(view) == []
        assert len(view["blocks"]) <= 100
        assert view_size(view) <= VIEW_MAX_BYTES

    def test_modal_keeps_every_input(self) -> None:
        inputs = input_blocks(render_form_modal(biggest_hostile_ask(), META))
        for i in range(8):
            element = inputs[f"answer:{i}"]["element"]
            assert element["type"] == ("multi_static_select" if i % 2 else "static_select")
            assert [o["value"] for o in element["options"]] == [str(j) for j in range(12)]
            assert all(text_length(o["text"]["text"]) <= 75 for o in element["options"])
            assert f"custom:{i}" in inputs
            assert f"note:{i}" in inputs

    def test_modal_carries_no_agent_markup(self) -> None:
        view = render_form_modal(biggest_hostile_ask(), META)
        assert_only_bot_tokens(view)
        blob = json.dumps(view, ensure_ascii=False)
        assert "<!channel>" not in blob
        assert "<http" not in blob

    def test_biggest_rich_form_renders_valid_payloads(self) -> None:
        ask = biggest_rich_form()
        message = render_ask_message(ask, now_ms=NOW, mentions=["U0ABC"])
        assert validate_message(message.to_payload()) == []
        assert_only_bot_tokens(message.to_payload(), users=("U0ABC",))
        view = render_form_modal(ask, META)
        assert validate_view(view) == []
        assert_only_bot_tokens(view)
        inputs = input_blocks(view)
        assert {f"answer:{i}" for i in range(8)} | {"additional"} <= set(inputs)
        for i in range(8):
            assert validate_view(render_other_modal(ask, i, META)) == []

    def test_ended_message_is_valid(self) -> None:
        message = render_ended_message(
            biggest_hostile_ask(),
            outcome="answered",
            responder_id="U0ABC",
            resolved_ms=NOW,
            answers=[
                QuestionAnswer(
                    id=f"q{i}",
                    status="answered",
                    selected=list(range(12)),
                    custom_text=evil(4000),
                    note=evil(4000),
                )
                for i in range(8)
            ],
            reason=evil(2000),
        )
        assert validate_message(message.to_payload()) == []
        assert_only_bot_tokens(message.to_payload(), users=("U0ABC",))


@pytest.mark.parametrize("count", [1, 3, 8])
@pytest.mark.parametrize("n_options", [1, 5, 6, 10, 11, 12])
@pytest.mark.parametrize("size", [1, 3000, 4000])
@pytest.mark.parametrize("multi", [False, True])
def test_every_shape_the_contract_allows_renders_valid_payloads(
    count: int, n_options: int, size: int, multi: bool
) -> None:
    """Whatever the counts, sizes and choice kinds, Slack would accept every payload."""
    questions = [
        Question(
            id=f"q{i}",
            question=f"{i} " + evil(size),
            description=evil(size) if size > 1 else None,
            options=[Option(label=f"{j} " + evil(size), description=evil(size)) for j in range(n_options)],
            multi=multi,
            recommended=n_options - 1,
            allow_custom=i % 2 == 0,
        )
        for i in range(count)
    ]
    ask = pi_ask(*questions, requester=Requester(name=evil(min(200, size))))
    message = render_ask_message(ask, now_ms=NOW, mentions=["U0ABC"], elsewhere=["#ops"])
    assert validate_message(message.to_payload()) == []
    assert_only_bot_tokens(message.to_payload(), users=("U0ABC",))
    view = render_form_modal(ask, META)
    assert validate_view(view) == []
    assert_only_bot_tokens(view)
    other = render_other_modal(ask, 0, META)
    assert validate_view(other) == []


# -- the form modal -------------------------------------------------------------------------------------


class TestFormModal:
    def test_modal_frame(self) -> None:
        view = render_form_modal(pi_ask(), META)
        assert view["type"] == "modal"
        assert view["callback_id"] == VIEW_FORM
        assert view["private_metadata"] == META.encode()
        assert view["title"]["text"] == "Answer the question"
        assert view["submit"]["text"] == "Submit"
        assert view["close"]["text"] == "Cancel"
        assert validate_view(view) == []

    def test_several_questions_title(self) -> None:
        view = render_form_modal(pi_ask(question(id="a"), question(id="b")), META)
        assert view["title"]["text"] == "Answer the questions"

    @pytest.mark.parametrize(
        ("n", "multi", "kind"),
        [
            (2, False, "radio_buttons"),
            (10, False, "radio_buttons"),
            (11, False, "static_select"),
            (12, False, "static_select"),
            (2, True, "checkboxes"),
            (10, True, "checkboxes"),
            (11, True, "multi_static_select"),
            (12, True, "multi_static_select"),
        ],
    )
    def test_choice_element_fits_slacks_option_caps(self, n: int, multi: bool, kind: str) -> None:
        ask = pi_ask(question(labels=tuple(f"L{j}" for j in range(n)), multi=multi))
        view = render_form_modal(ask, META)
        element = input_blocks(view)["answer:0"]["element"]
        assert element["type"] == kind
        assert element["action_id"] == "answer"
        assert [o["value"] for o in element["options"]] == [str(j) for j in range(n)]
        assert validate_view(view) == []

    def test_nothing_is_pre_selected_and_the_recommendation_is_marked(self) -> None:
        ask = pi_ask(question(labels=("A", "B"), recommended=1))
        element = input_blocks(render_form_modal(ask, META))["answer:0"]["element"]
        assert "initial_option" not in element
        assert "initial_options" not in element
        assert element["options"][1]["description"]["text"] == "(recommended)"
        assert "description" not in element["options"][0]

    def test_choice_is_optional_when_custom_text_may_replace_it(self) -> None:
        inputs = input_blocks(render_form_modal(pi_ask(), META))
        assert inputs["answer:0"]["optional"] is True
        assert inputs["custom:0"]["optional"] is True
        assert inputs["custom:0"]["label"]["text"] == "Other (type your own)"
        assert inputs["custom:0"]["element"]["action_id"] == "custom"
        assert inputs["note:0"]["optional"] is True
        assert inputs["note:0"]["element"]["action_id"] == "note"

    def test_choice_is_required_without_custom_text(self) -> None:
        inputs = input_blocks(render_form_modal(pi_ask(question(allow_custom=False)), META))
        assert inputs["answer:0"]["optional"] is False
        assert "custom:0" not in inputs

    def test_cut_labels_are_shown_in_full_above_the_choice(self) -> None:
        label = "A very long option label " * 6
        view = render_form_modal(pi_ask(question(labels=(label.strip(), "B"))), META)
        element = input_blocks(view)["answer:0"]["element"]
        assert element["options"][0]["text"]["text"].endswith("…")
        assert label.strip() in json.dumps(view)

    def test_category_is_shown(self) -> None:
        view = render_form_modal(pi_ask(question(category="implementation")), META)
        assert "Category: *Implementation*" in json.dumps(view)

    def test_text_inputs_accept_at_most_3000_characters(self) -> None:
        for block in input_blocks(render_form_modal(pi_ask(), META)).values():
            if block["element"]["type"] == "plain_text_input":
                assert block["element"]["max_length"] == 3000

    def test_pi_question_has_no_additional_notes(self) -> None:
        assert "additional" not in input_blocks(render_form_modal(pi_ask(), META))


class TestRichForm:
    def test_rich_form_fields(self) -> None:
        ask = rich_ask(
            rich_question(0, "radio", 3),
            rich_question(1, "checkbox", 12),
            rich_question(2, "text", placeholder="Tell us <!here>"),
            title="Release plan",
            description="Read **this** first.",
        )
        view = render_form_modal(ask, META)
        assert validate_view(view) == []
        inputs = input_blocks(view)
        assert inputs["answer:0"]["element"]["type"] == "radio_buttons"
        assert inputs["answer:1"]["element"]["type"] == "multi_static_select"
        text = inputs["answer:2"]["element"]
        assert (text["type"], text["multiline"], text["placeholder"]["text"]) == (
            "plain_text_input",
            True,
            "Tell us &lt;!here&gt;",
        )
        assert {"custom:0", "custom:1", "note:0", "note:1", "additional"} <= set(inputs)
        assert "custom:2" not in inputs
        assert "note:2" not in inputs
        assert inputs["additional"]["element"]["action_id"] == "additional"
        assert inputs["additional"]["optional"] is True
        assert view["blocks"][0]["text"]["text"] == "Release plan"
        assert "Read *this* first." in json.dumps(view)

    def test_required_and_allow_other_decide_optional(self) -> None:
        ask = rich_ask(
            rich_question(0, "radio", required=True, allow_other=False),
            rich_question(1, "radio", required=True, allow_other=True),
            rich_question(2, "checkbox", required=False, allow_other=False),
            rich_question(3, "text", required=True),
            rich_question(4, "text", required=False),
        )
        inputs = input_blocks(render_form_modal(ask, META))
        assert [inputs[f"answer:{i}"]["optional"] for i in range(5)] == [False, True, True, False, True]

    def test_rich_details_are_shown(self) -> None:
        question = rich_question(
            body="The **body**",
            context="Some context",
            recommendation="Pick B",
            caveats="Costs money",
            options=[
                RichOption(label="A", value="a", description="desc A", details="details A", note="note A"),
                RichOption(label="B", value="b", recommended=True),
            ],
        )
        ask = rich_ask(question)
        view = render_form_modal(ask, META)
        blob = json.dumps(view, ensure_ascii=False)
        for expected in (
            "The *body*",
            "*Context:* Some context",
            "*Recommendation:* Pick B",
            "*Caveats:* Costs",
        ):
            assert expected in blob
        for expected in ("desc A", "details A", "note A"):
            assert expected in blob
        options = input_blocks(view)["answer:0"]["element"]["options"]
        assert options[1]["description"]["text"] == "(recommended)"
        message = mrkdwn_text(render_ask_message(ask, now_ms=NOW))
        assert "• B  ⭐ _recommended_" in message
        assert "The *body*" in message

    def test_rich_message_notes_text_questions(self) -> None:
        message = render_ask_message(rich_ask(rich_question(0, "text", required=False)), now_ms=NOW)
        assert "Answer in your own words (optional)" in mrkdwn_text(message)
        assert validate_message(message.to_payload()) == []

    def test_a_choice_without_options_is_refused(self) -> None:
        ask = rich_ask(rich_question(0, "radio", 0))
        with pytest.raises(ValueError, match="no options"):
            render_form_modal(ask, META)


class TestOtherModal:
    def test_other_modal_asks_for_one_required_text(self) -> None:
        meta = FormMeta(ref=META.ref, channel="C0123", ts="1.2", question=0)
        view = render_other_modal(pi_ask(question(text="Which <!channel>?")), 0, meta)
        assert view["callback_id"] == VIEW_OTHER
        assert view["private_metadata"] == meta.encode()
        inputs = input_blocks(view)
        assert inputs["custom:0"]["optional"] is False
        assert inputs["custom:0"]["element"]["action_id"] == "custom"
        assert inputs["note:0"]["optional"] is True
        assert "Which &lt;!channel&gt;?" in json.dumps(view)
        assert validate_view(view) == []

    def test_other_modal_for_a_later_question(self) -> None:
        view = render_other_modal(pi_ask(question(id="a"), question(id="b")), 1, META)
        assert "custom:1" in input_blocks(view)

    def test_other_modal_refuses_a_question_that_does_not_exist(self) -> None:
        with pytest.raises(ValueError, match="out of range"):
            render_other_modal(pi_ask(), 1, META)


# -- after the ask --------------------------------------------------------------------------------------


def has_interactive_element(payload: Any) -> bool:
    if isinstance(payload, dict):
        if "action_id" in payload or payload.get("type") in ("actions", "input") or "accessory" in payload:
            return True
        return any(has_interactive_element(v) for v in payload.values())
    if isinstance(payload, list):
        return any(has_interactive_element(v) for v in payload)
    return False


class TestEndedMessage:
    @pytest.mark.parametrize(
        ("outcome", "responder", "reason", "words"),
        [
            ("answered", "U0ABC", None, "Answered by <@U0ABC>"),
            ("answered", None, None, "Timed out — default applied"),
            ("cancelled", "U0ABC", None, "Declined by <@U0ABC>"),
            ("declined", "W0ABC", None, "Declined by <@W0ABC>"),
            ("cancelled", None, "not needed <!here>", "Withdrawn by the requester: not needed &lt;!here&gt;"),
            ("cancelled", None, None, "Withdrawn by the requester"),
            ("timeout", None, None, "Timed out — nobody answered"),
            ("defaulted", None, None, "Timed out — default applied"),
            ("dismissed", None, None, "Dismissed"),
            ("dismissed", "operator <@U1>", None, "Dismissed by operator &lt;@U1&gt;"),
            ("unavailable", None, None, "Could not be delivered"),
            ("error", None, None, "Timed out — no default allowed"),
            ("weird<!here>", None, None, "Ended (weird&lt;!here&gt;)"),
        ],
    )
    def test_outcome_in_words(
        self, outcome: str, responder: str | None, reason: str | None, words: str
    ) -> None:
        message = render_ended_message(
            pi_ask(), outcome=outcome, responder_id=responder, resolved_ms=NOW, reason=reason
        )
        context = message.blocks[-1]["elements"][0]["text"]
        assert context.startswith(words + " · <!date^1700000000^")
        assert validate_message(message.to_payload()) == []
        assert "<@" not in message.text

    def test_every_known_outcome_renders(self) -> None:
        for outcome in ENDED_OUTCOMES:
            message = render_ended_message(pi_ask(), outcome=outcome, responder_id=None, resolved_ms=NOW)
            assert "Ended (" not in mrkdwn_text(message)

    @pytest.mark.parametrize("ask", [pi_ask(), pi_ask(question(multi=True)), rich_ask(rich_question(n=12))])
    def test_ended_message_has_no_interactive_element(self, ask: AskRecord) -> None:
        message = render_ended_message(
            ask, outcome="answered", responder_id="U0ABC", resolved_ms=NOW, answers=[ANSWERED_FIRST]
        )
        assert not has_interactive_element(message.blocks)

    def test_questions_and_summary_are_shown_escaped(self) -> None:
        message = render_ended_message(
            pi_ask(question(text="Deploy <!channel>?")),
            outcome="answered",
            responder_id="U0ABC",
            resolved_ms=NOW,
            answers=[
                QuestionAnswer(id="q1", status="answered", custom_text="<@U999> Postgres", note="<!here>")
            ],
        )
        text = mrkdwn_text(message)
        assert "Deploy &lt;!channel&gt;?" in text
        assert "• Deploy &lt;!channel&gt;? → “&lt;@U999&gt; Postgres” · note: &lt;!here&gt;" in text
        assert_only_bot_tokens(message.to_payload(), users=("U0ABC",))

    def test_fallback_text_names_the_outcome_without_a_mention(self) -> None:
        message = render_ended_message(pi_ask(), outcome="answered", responder_id="U0ABC", resolved_ms=NOW)
        assert message.text == "Answered: A question for you"


def summary_of(message: Any) -> list[str]:
    """The ended message's answer lines (the section of bullets)."""
    found = [
        b["text"]["text"] for b in message.blocks if b["type"] == "section" and "• " in b["text"]["text"]
    ]
    return found[0].split("\n") if found else []


class TestEndedSummary:
    def test_it_names_the_question_and_the_option_label_never_ids_and_keeps_the_note(self) -> None:
        answer = QuestionAnswer(id="q1", status="answered", selected=[1], note="ship it")
        message = render_ended_message(
            pi_ask(), outcome="answered", responder_id="U0ABC", resolved_ms=NOW, answers=[answer]
        )
        assert summary_of(message) == ["• Which database should we use? → SQLite · note: ship it"]
        assert "q1" not in mrkdwn_text(message)

    def test_several_choices_and_own_text_in_question_order(self) -> None:
        ask = pi_ask(question(id="a", multi=True), question("Ship it?", ("Yes", "No"), id="b"))
        answers = [
            QuestionAnswer(id="a", status="answered", selected=[0, 1], custom_text="DuckDB"),
            QuestionAnswer(id="b", status="answered", selected=[0]),
        ]
        message = render_ended_message(
            ask, outcome="answered", responder_id="U0ABC", resolved_ms=NOW, answers=answers
        )
        assert summary_of(message) == [
            "• Which database should we use? → Postgres, SQLite, “DuckDB”",
            "• Ship it? → Yes",
        ]

    def test_a_default_says_so_without_the_default_note(self) -> None:
        answer = QuestionAnswer(
            id="q1", status="answered", selected=[0], defaulted=True, note="Default chosen after the timeout"
        )
        message = render_ended_message(
            pi_ask(), outcome="answered", responder_id=None, resolved_ms=NOW, answers=[answer]
        )
        assert summary_of(message) == ["• Which database should we use? → Postgres (the default)"]

    def test_questions_nobody_answered_have_no_line(self) -> None:
        answer = QuestionAnswer(id="q1", status="timeout")
        message = render_ended_message(
            pi_ask(), outcome="timeout", responder_id=None, resolved_ms=NOW, answers=[answer]
        )
        assert summary_of(message) == []

    def test_a_rich_form_shows_labels_not_values_own_text_option_notes_and_review_notes(self) -> None:
        ask = rich_ask(
            rich_question(0, "radio", 3), rich_question(1, "checkbox", 3), rich_question(2, "text")
        )
        assert ask.form is not None
        form = RichFormResult(
            questions=ask.form.questions,
            answers=[
                RichAnswer(id="q1", type="radio", value="v1", was_custom=False, selected_option_indexes=[1]),
                RichAnswer(
                    id="q2",
                    type="checkbox",
                    value=["v0", "v2", "mine"],
                    was_custom=True,
                    selected_option_indexes=[0, 2],
                    custom_value="mine <!here>",
                    option_notes=[OptionNote(option_index=2, value="v2", label="Choice 2", note="careful")],
                ),
                RichAnswer(id="q3", type="text", value="line one\nline *two*", was_custom=True),
            ],
            additional_text="Thanks <@U1>",
        )
        message = render_ended_message(
            ask, outcome="answered", responder_id="U0ABC", resolved_ms=NOW, form=form
        )
        lines = summary_of(message)
        assert lines[:2] == [
            "• Prompt 1? → Choice 1",
            "• Prompt 2? → Choice 0, Choice 2, “mine &lt;!here&gt;” · note: Choice 2: careful",
        ]
        assert lines[2].startswith("• Prompt 3? → “line one") and "two" in lines[2]
        assert lines[3] == "• Notes: Thanks &lt;@U1&gt;"
        assert "v1" not in "\n".join(lines) and "Q1" not in "\n".join(lines)

    def test_a_cancelled_form_has_no_lines(self) -> None:
        ask = rich_ask(rich_question(0, "radio", 3))
        assert ask.form is not None
        form = RichFormResult(questions=ask.form.questions, answers=[], cancelled=True)
        message = render_ended_message(
            ask, outcome="cancelled", responder_id=None, resolved_ms=NOW, form=form
        )
        assert summary_of(message) == []


class TestThreadReplies:
    def test_reminder_says_how_long_is_left(self) -> None:
        message = render_reminder(
            pi_ask(deadline_ms=NOW + 2 * HOUR), number=2, now_ms=NOW, mentions=["U0ABC"]
        )
        text = message.blocks[0]["text"]["text"]
        assert text.startswith("<@U0ABC> :hourglass_flowing_sand: Still waiting for an answer (reminder 2).")
        assert "<!date^1700007200^" in text
        assert "(in about 2 hours)" in text
        assert validate_message(message.to_payload()) == []

    def test_reminder_without_a_deadline(self) -> None:
        message = render_reminder(pi_ask(deadline_ms=None), number=1, now_ms=NOW)
        assert "There is no deadline." in mrkdwn_text(message)
        assert "<" not in json.dumps(message.to_payload())

    def test_reminder_in_minutes(self) -> None:
        message = render_reminder(pi_ask(deadline_ms=NOW + 60_000), number=1, now_ms=NOW)
        assert "(in about 1 minute)" in mrkdwn_text(message)

    def test_refusals_are_distinct_sentences(self) -> None:
        kinds: tuple[RefusalKind, ...] = ("not_allowed", "ended", "late")
        texts = {render_refusal(kind) for kind in kinds}
        assert len(texts) == 3
        assert all(t.endswith(".") and "<" not in t for t in texts)


def test_date_token_has_a_utc_fallback() -> None:
    assert date_token(NOW) == "<!date^1700000000^{date_short_pretty} at {time}|2023-11-14 22:13 UTC>"
    assert date_token(-1000) is None


def test_an_approval_asks_full_form_has_no_other_or_note_input() -> None:
    # A vote is for one of the options (protocol section 13): free text or a note would be dropped.
    ask = AskRecord(
        ask_id="ask-1",
        tag="tag1",
        reply_to="replies",
        request=AskRequest(
            questions=[Question(id="q1", question="Deploy?", options=[Option(label="Yes")] * 2)]
        ),
        created_ms=NOW,
        approval=Approval(count=2),
    )
    assert ask.request is not None and ask.request.questions[0].custom_allowed
    inputs = input_blocks(render_form_modal(ask, META))
    assert sorted(inputs) == ["answer:0"]
    assert "Choose an option, or type your own answer" not in json.dumps(inputs)
