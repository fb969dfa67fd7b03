"""bot.slack.blockkit: every Slack limit, each with a just-valid and a just-invalid payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    InputBlock,
    PlainTextInputElement,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.slack.blockkit import (
    VIEW_MAX_BYTES,
    blocks_text_length,
    check_message,
    check_view,
    text_length,
    validate_message,
    validate_view,
    view_size,
)

Payload = dict[str, Any]


def plain(text: str = "x") -> Payload:
    return {"type": "plain_text", "text": text}


def md(text: str = "x") -> Payload:
    return {"type": "mrkdwn", "text": text}


def section(text: str = "hello") -> Payload:
    return {"type": "section", "text": md(text)}


def option(text: str = "A", value: str = "a", **extra: Any) -> Payload:
    return {"text": plain(text), "value": value, **extra}


def options(n: int) -> list[Payload]:
    return [option(f"Option {i}", str(i)) for i in range(n)]


def button(text: str = "Go", action_id: str = "go", **extra: Any) -> Payload:
    return {"type": "button", "text": plain(text), "action_id": action_id, **extra}


def actions(*elements: Payload) -> Payload:
    return {"type": "actions", "elements": list(elements)}


def input_block(element: Payload, block_id: str = "in", **extra: Any) -> Payload:
    return {"type": "input", "block_id": block_id, "label": plain("Label"), "element": element, **extra}


def text_input(**extra: Any) -> Payload:
    return {"type": "plain_text_input", "action_id": "t", **extra}


def message(*blocks: Payload, text: str = "fallback") -> Payload:
    return {"text": text, "blocks": list(blocks)}


def modal(*blocks: Payload, **extra: Any) -> Payload:
    view: Payload = {
        "type": "modal",
        "title": plain("Title"),
        "submit": plain("Submit"),
        "close": plain("Cancel"),
        "blocks": list(blocks),
    }
    view.update(extra)
    return view


def in_message(block: Payload) -> list[str]:
    return validate_message(message(block))


def in_modal(block: Payload) -> list[str]:
    return validate_view(modal(block))


def confirm(**overrides: Payload) -> Payload:
    base = {"title": plain("Sure?"), "text": plain("Really"), "confirm": plain("Yes"), "deny": plain("No")}
    return {**base, **overrides}


def sized_view(total: int) -> Payload:
    """A modal of 100 sections whose ``view_size`` is exactly ``total`` bytes."""
    view = modal(*[section("a") for _ in range(100)])
    missing = total - view_size(view)
    for block in view["blocks"]:
        extra = min(missing, 2999)
        block["text"]["text"] += "a" * extra
        missing -= extra
    assert view_size(view) == total
    return view


def text_sections(total: int) -> Payload:
    """A message whose blocks hold exactly ``total`` characters of text."""
    full, rest = divmod(total, 3000)
    blocks = [section("x" * 3000) for _ in range(full)] + ([section("y" * rest)] if rest else [])
    return message(*blocks)


# Each case: (name, build(n) -> problems, the largest valid n, a fragment of the problem for n + 1).
Case = tuple[str, Callable[[int], list[str]], int, str]

LIMITS: list[Case] = [
    ("message blocks", lambda n: validate_message(message(*[section() for _ in range(n)])), 50, "at most 50"),
    ("modal blocks", lambda n: validate_view(modal(*[section() for _ in range(n)])), 100, "at most 100"),
    ("section text", lambda n: in_message(section("x" * n)), 3000, "a section allows at most 3000"),
    (
        "section fields count",
        lambda n: in_message({"type": "section", "fields": [md() for _ in range(n)]}),
        10,
        "at most 10",
    ),
    (
        "section field length",
        lambda n: in_message({"type": "section", "fields": [md("x" * n)]}),
        2000,
        "at most 2000",
    ),
    ("header text", lambda n: in_message({"type": "header", "text": plain("x" * n)}), 150, "at most 150"),
    (
        "context elements",
        lambda n: in_message({"type": "context", "elements": [md() for _ in range(n)]}),
        10,
        "a context block allows at most 10",
    ),
    (
        "actions elements",
        lambda n: in_message(actions(*[button(action_id=f"b{i}") for i in range(n)])),
        25,
        "an actions block allows at most 25",
    ),
    (
        "option text",
        lambda n: in_modal(input_block({"type": "radio_buttons", "options": [option("x" * n)]})),
        75,
        "at most 75",
    ),
    (
        "option description",
        lambda n: in_modal(
            input_block({"type": "static_select", "options": [option(description=plain("d" * n))]})
        ),
        75,
        "an option description allows at most 75",
    ),
    (
        "option value",
        lambda n: in_modal(input_block({"type": "checkboxes", "options": [option(value="v" * n)]})),
        150,
        "at most 150 allowed",
    ),
    (
        "radio_buttons options",
        lambda n: in_modal(input_block({"type": "radio_buttons", "options": options(n)})),
        10,
        "radio_buttons allows at most 10",
    ),
    (
        "checkboxes options",
        lambda n: in_modal(input_block({"type": "checkboxes", "options": options(n)})),
        10,
        "checkboxes allows at most 10",
    ),
    (
        "static_select options",
        lambda n: in_modal(input_block({"type": "static_select", "options": options(n)})),
        100,
        "static_select allows at most 100",
    ),
    (
        "multi_static_select options",
        lambda n: in_modal(input_block({"type": "multi_static_select", "options": options(n)})),
        100,
        "multi_static_select allows at most 100",
    ),
    (
        "overflow options",
        lambda n: in_message(
            {"type": "section", "text": md(), "accessory": {"type": "overflow", "options": options(n)}}
        ),
        5,
        "overflow allows at most 5",
    ),
    ("button text", lambda n: in_message(actions(button("x" * n))), 75, "a button allows at most 75"),
    ("button value", lambda n: in_message(actions(button(value="v" * n))), 2000, "at most 2000 allowed"),
    ("button url", lambda n: in_message(actions(button(url="u" * n))), 3000, "at most 3000 allowed"),
    ("action_id", lambda n: in_message(actions(button(action_id="a" * n))), 255, "at most 255 allowed"),
    ("block_id", lambda n: in_message({**section(), "block_id": "b" * n}), 255, "at most 255 allowed"),
    (
        "confirm title",
        lambda n: in_message(actions(button(confirm=confirm(title=plain("t" * n))))),
        100,
        "at most 100",
    ),
    (
        "confirm text",
        lambda n: in_message(actions(button(confirm=confirm(text=md("t" * n))))),
        300,
        "at most 300",
    ),
    (
        "confirm button",
        lambda n: in_message(actions(button(confirm=confirm(confirm=plain("t" * n))))),
        30,
        "at most 30",
    ),
    (
        "deny button",
        lambda n: in_message(actions(button(confirm=confirm(deny=plain("t" * n))))),
        30,
        "at most 30",
    ),
    (
        "input label",
        lambda n: in_modal({**input_block(text_input()), "label": plain("l" * n)}),
        2000,
        "an input label allows at most 2000",
    ),
    (
        "input hint",
        lambda n: in_modal(input_block(text_input(), hint=plain("h" * n))),
        2000,
        "an input hint allows at most 2000",
    ),
    (
        "placeholder",
        lambda n: in_modal(input_block(text_input(placeholder=plain("p" * n)))),
        150,
        "a placeholder allows at most 150",
    ),
    (
        "plain_text_input max_length",
        lambda n: in_modal(input_block(text_input(max_length=n))),
        3000,
        "must be an integer from 1 to 3000",
    ),
    (
        "plain_text_input min_length",
        lambda n: in_modal(input_block(text_input(min_length=n))),
        3000,
        "must be an integer from 0 to 3000",
    ),
    ("modal title", lambda n: validate_view(modal(title=plain("t" * n))), 24, "view.title.text"),
    ("modal submit", lambda n: validate_view(modal(submit=plain("s" * n))), 24, "view.submit.text"),
    ("modal close", lambda n: validate_view(modal(close=plain("c" * n))), 24, "view.close.text"),
    ("private_metadata", lambda n: validate_view(modal(private_metadata="m" * n)), 3000, "at most 3000"),
    ("callback_id", lambda n: validate_view(modal(callback_id="c" * n)), 255, "at most 255"),
    ("message text", lambda n: validate_message({"text": "x" * n}), 40_000, "at most 40000"),
    (
        "text in all message blocks",
        lambda n: validate_message(text_sections(n)),
        12_000,
        "msg_blocks_too_long",
    ),
    ("view size", lambda n: validate_view(sized_view(n)), VIEW_MAX_BYTES, "view_too_large"),
]


@pytest.mark.parametrize(("name", "build", "limit", "fragment"), LIMITS, ids=[c[0] for c in LIMITS])
def test_limit_accepts_the_largest_valid_value(
    name: str, build: Callable[[int], list[str]], limit: int, fragment: str
) -> None:
    """A payload exactly at the limit has no problems."""
    assert build(limit) == []


@pytest.mark.parametrize(("name", "build", "limit", "fragment"), LIMITS, ids=[c[0] for c in LIMITS])
def test_limit_rejects_one_past_the_limit(
    name: str, build: Callable[[int], list[str]], limit: int, fragment: str
) -> None:
    """One past the limit gives exactly one problem, naming the rule."""
    problems = build(limit + 1)
    assert len(problems) == 1, problems
    assert fragment in problems[0]


def test_problem_names_the_path_the_count_and_the_rule() -> None:
    """Problems read like ``blocks[3].elements[0].options: 11 options, radio_buttons allows at most 10``."""
    radio = {"type": "radio_buttons", "action_id": "r", "options": options(11)}
    payload = message(section(), section(), section(), actions(radio))
    assert validate_message(payload) == [
        "blocks[3].elements[0].options: 11 options, radio_buttons allows at most 10"
    ]


def test_message_text_past_4000_is_only_advice() -> None:
    """Slack advises 4000 characters of top-level text; that is not an error."""
    assert validate_message(message(section(), text="x" * 4001)) == []


def test_message_needs_text_or_blocks() -> None:
    assert validate_message({"text": "  "}) == ["payload: a message needs a non-empty text or blocks"]
    assert validate_message({"text": "", "blocks": []}) != []
    assert validate_message({"text": "hi"}) == []


def test_non_object_payloads_are_problems_not_crashes() -> None:
    assert validate_message([]) == ["payload: not an object"]  # type: ignore[arg-type]
    assert validate_view("x") == ["view: not an object"]  # type: ignore[arg-type]
    assert validate_message({"blocks": "nope"}) == ["blocks: not a list"]
    assert validate_message({"blocks": [1]}) == ["blocks[0]: not an object"]


class TestTextObjects:
    def test_empty_text_is_rejected(self) -> None:
        assert in_message(section("")) == [
            "blocks[0].text.text: empty, at least 1 non-blank character required"
        ]

    def test_blank_text_is_rejected(self) -> None:
        assert in_message(section(" \n ")) != []

    def test_one_character_is_enough(self) -> None:
        assert in_message(section("x")) == []

    def test_unknown_text_type_is_rejected(self) -> None:
        assert in_message({"type": "section", "text": {"type": "html", "text": "x"}}) != []

    def test_header_takes_only_plain_text(self) -> None:
        assert in_message({"type": "header", "text": md("Title")}) == [
            "blocks[0].text.type: mrkdwn, a header allows only plain_text"
        ]

    def test_button_takes_only_plain_text(self) -> None:
        assert in_message(actions({**button(), "text": md("Go")})) != []

    def test_input_label_takes_only_plain_text(self) -> None:
        assert in_modal({**input_block(text_input()), "label": md("Label")}) != []

    def test_modal_title_takes_only_plain_text(self) -> None:
        assert validate_view(modal(title=md("Title"))) != []

    def test_radio_options_may_use_mrkdwn(self) -> None:
        radio = {"type": "radio_buttons", "options": [{"text": md("*A*"), "value": "a"}]}
        assert in_modal(input_block(radio)) == []

    def test_select_options_take_only_plain_text(self) -> None:
        select = {"type": "static_select", "options": [{"text": md("*A*"), "value": "a"}]}
        assert in_modal(input_block(select)) != []

    def test_emoji_belongs_to_plain_text_and_verbatim_to_mrkdwn(self) -> None:
        assert in_message({"type": "section", "text": {**md(), "emoji": True}}) != []
        assert in_message({"type": "header", "text": {**plain(), "verbatim": True}}) != []
        assert in_message({"type": "section", "text": {**md(), "verbatim": True}}) == []

    def test_text_length_counts_utf16_units(self) -> None:
        """An emoji outside the BMP counts two units, like Slack's JavaScript clients count it."""
        assert text_length("a😀") == 3
        assert in_message({"type": "header", "text": plain("😀" * 75)}) == []
        assert in_message({"type": "header", "text": plain("😀" * 76)}) != []


class TestIds:
    def test_block_ids_are_unique_within_a_message(self) -> None:
        payload = message({**section(), "block_id": "same"}, {**section(), "block_id": "same"})
        assert validate_message(payload) == ["blocks[1].block_id: 'same' repeats blocks[0]"]

    def test_block_ids_are_unique_within_a_view(self) -> None:
        view = modal(input_block(text_input(), block_id="b"), input_block(text_input(), block_id="b"))
        assert validate_view(view) == ["view.blocks[1].block_id: 'b' repeats view.blocks[0]"]

    def test_empty_block_id_is_rejected(self) -> None:
        assert in_message({**section(), "block_id": ""}) != []

    def test_action_ids_are_unique_within_a_block(self) -> None:
        problems = in_message(actions(button(action_id="a"), button(action_id="a")))
        assert problems == [
            "blocks[0].elements[1].action_id: 'a' repeats blocks[0].elements[0] in the same block"
        ]

    def test_the_same_action_id_in_two_blocks_is_fine(self) -> None:
        assert validate_message(message(actions(button(action_id="a")), actions(button(action_id="a")))) == []


class TestPlacement:
    @pytest.mark.parametrize("kind", ["radio_buttons", "checkboxes"])
    def test_radio_and_checkboxes_work_in_section_actions_and_input(self, kind: str) -> None:
        element = {"type": kind, "action_id": "c", "options": options(3)}
        assert in_message({"type": "section", "text": md(), "accessory": element}) == []
        assert in_message(actions(element)) == []
        assert in_modal(input_block(element)) == []

    def test_plain_text_input_only_in_input_blocks(self) -> None:
        assert in_message(actions(text_input())) == [
            "blocks[0].elements[0]: plain_text_input is not allowed in actions blocks (only in: input)"
        ]
        assert in_message({"type": "section", "text": md(), "accessory": text_input()}) != []
        assert in_modal(input_block(text_input())) == []

    def test_multi_static_select_is_not_allowed_in_actions(self) -> None:
        """A live test saw Slack reject it there (product-anchors.md); section and input work."""
        element = {"type": "multi_static_select", "action_id": "m", "options": options(3)}
        assert in_message(actions(element)) != []
        assert in_modal(input_block(element)) == []
        assert in_message({"type": "section", "text": md(), "accessory": element}) == []

    def test_button_is_not_an_input_element(self) -> None:
        assert in_modal(input_block(button())) != []

    def test_unknown_element_type_is_rejected(self) -> None:
        assert in_message(actions({"type": "teleporter", "action_id": "x"})) == [
            "blocks[0].elements[0].type: unknown element type 'teleporter'"
        ]

    def test_unknown_block_type_is_rejected(self) -> None:
        problems = in_message({"type": "carousel"})
        assert len(problems) == 1
        assert problems[0].startswith("blocks[0].type: unknown block type 'carousel'")

    def test_markdown_blocks_only_in_messages(self) -> None:
        block = {"type": "markdown", "text": "**hi**"}
        assert in_message(block) == []
        assert in_modal(block) == ["view.blocks[0].type: markdown blocks are not allowed in a modal"]

    def test_context_takes_text_and_images_only(self) -> None:
        image = {"type": "image", "image_url": "https://x/y.png", "alt_text": "y"}
        assert in_message({"type": "context", "elements": [md(), plain(), image]}) == []
        assert in_message({"type": "context", "elements": [button()]}) != []

    def test_modal_only_inputs_are_rejected_in_messages(self) -> None:
        email = {"type": "email_text_input", "action_id": "e"}
        assert in_message(input_block(email, dispatch_action=True)) == [
            "blocks[0].element: email_text_input is only allowed in modals"
        ]
        assert in_modal(input_block(email)) == []

    def test_input_in_a_message_must_dispatch_its_value(self) -> None:
        """Without a submit button, only dispatch_action gets a message input's value to the app."""
        assert in_message(input_block(text_input())) == [
            "blocks[0].dispatch_action: an input block in a message needs dispatch_action: true"
        ]
        assert in_message(input_block(text_input(), dispatch_action=True)) == []

    def test_file_input_cannot_dispatch(self) -> None:
        file_input = {"type": "file_input", "action_id": "f"}
        assert in_modal(input_block(file_input, dispatch_action=True)) == [
            "view.blocks[0].dispatch_action: file_input cannot dispatch actions"
        ]

    def test_dispatch_action_must_be_a_boolean(self) -> None:
        assert in_modal(input_block(text_input(), dispatch_action="yes")) != []

    def test_input_needs_an_element_and_a_label(self) -> None:
        assert in_modal({"type": "input", "label": plain("L")}) == ["view.blocks[0].element: required"]
        assert in_modal({"type": "input", "element": text_input()}) == ["view.blocks[0].label: required"]


class TestOptions:
    def test_initial_option_must_match_an_option_exactly(self) -> None:
        radio = {"type": "radio_buttons", "options": options(3), "initial_option": option("Option 1", "1")}
        assert in_modal(input_block(radio)) == []
        radio["initial_option"] = option("Option 1 ", "1")
        assert in_modal(input_block(radio)) == [
            "view.blocks[0].element.initial_option: must exactly match one of the options "
            "(same text, value and description)"
        ]

    def test_initial_options_must_each_match(self) -> None:
        boxes = {"type": "checkboxes", "options": options(3), "initial_options": [option("Option 0", "0")]}
        assert in_modal(input_block(boxes)) == []
        boxes["initial_options"] = [option("Option 0", "0"), option("Option 9", "9")]
        assert in_modal(input_block(boxes)) == [
            "view.blocks[0].element.initial_options[1]: must exactly match one of the options "
            "(same text, value and description)"
        ]

    def test_option_values_are_unique(self) -> None:
        radio = {"type": "radio_buttons", "options": [option("A", "x"), option("B", "x")]}
        assert in_modal(input_block(radio)) == [
            "view.blocks[0].element.options[1].value: 'x' repeats view.blocks[0].element.options[0]"
        ]

    def test_options_are_required_and_non_empty(self) -> None:
        assert in_modal(input_block({"type": "radio_buttons", "options": []})) != []
        assert in_modal(input_block({"type": "radio_buttons"})) != []

    def test_empty_option_value_is_rejected(self) -> None:
        assert in_modal(input_block({"type": "radio_buttons", "options": [option(value="")]})) != []

    def test_option_groups_are_checked_like_options(self) -> None:
        group = {"label": plain("G"), "options": options(2)}
        select = {"type": "static_select", "option_groups": [group]}
        assert in_modal(input_block(select)) == []
        select["option_groups"] = [{"label": plain("g" * 76), "options": options(2)}]
        assert in_modal(input_block(select)) != []

    def test_only_overflow_options_take_a_url(self) -> None:
        radio = {"type": "radio_buttons", "options": [option(url="https://x")]}
        assert in_modal(input_block(radio)) == [
            "view.blocks[0].element.options[0].url: only overflow menu options take a url"
        ]

    def test_multi_select_max_selected_items_is_at_least_one(self) -> None:
        select = {"type": "multi_static_select", "options": options(2), "max_selected_items": 0}
        assert in_modal(input_block(select)) != []
        select["max_selected_items"] = 1
        assert in_modal(input_block(select)) == []


class TestPlainTextInput:
    def test_max_length_must_be_at_least_one(self) -> None:
        assert in_modal(input_block(text_input(max_length=1))) == []
        assert in_modal(input_block(text_input(max_length=0))) != []

    def test_min_length_may_not_exceed_max_length(self) -> None:
        assert in_modal(input_block(text_input(min_length=5, max_length=5))) == []
        assert in_modal(input_block(text_input(min_length=6, max_length=5))) != []

    def test_initial_value_must_fit_max_length(self) -> None:
        assert in_modal(input_block(text_input(max_length=3, initial_value="abc"))) == []
        assert in_modal(input_block(text_input(max_length=3, initial_value="abcd"))) != []

    def test_dispatch_action_config_names_known_triggers(self) -> None:
        good = text_input(dispatch_action_config={"trigger_actions_on": ["on_enter_pressed"]})
        bad = text_input(dispatch_action_config={"trigger_actions_on": ["on_blur"]})
        assert in_modal(input_block(good)) == []
        assert in_modal(input_block(bad)) != []


class TestModal:
    def test_submit_is_required_with_an_input_block(self) -> None:
        view = modal(input_block(text_input()))
        del view["submit"]
        assert validate_view(view) == ["view.submit: required when the view has an input block"]

    def test_submit_is_optional_without_input_blocks(self) -> None:
        view = modal(section())
        del view["submit"]
        assert validate_view(view) == []

    def test_title_is_required(self) -> None:
        view = modal(section())
        del view["title"]
        assert validate_view(view) == ["view.title: required"]

    def test_view_type_must_be_modal_or_home(self) -> None:
        assert validate_view({"type": "popup", "blocks": []}) == [
            "view.type: 'popup', expected 'modal' or 'home'"
        ]

    def test_home_tab_needs_no_title(self) -> None:
        assert validate_view({"type": "home", "blocks": [section()]}) == []


class TestCheck:
    def test_check_message_raises_with_every_problem(self) -> None:
        payload = message({"type": "header", "text": plain("x" * 151)}, section(""))
        with pytest.raises(ValueError, match="invalid Slack message") as info:
            check_message(payload)
        assert "blocks[0].text.text" in str(info.value)
        assert "blocks[1].text.text" in str(info.value)

    def test_check_view_raises_with_every_problem(self) -> None:
        with pytest.raises(ValueError, match=r"view\.title\.text"):
            check_view(modal(title=plain("t" * 25)))

    def test_checks_pass_valid_payloads_silently(self) -> None:
        check_message(message(section()))
        check_view(modal(section()))


def test_slack_sdk_payloads_validate() -> None:
    """What slack_sdk's models serialise is what the validator expects."""
    blocks = [
        SectionBlock(text="*hi*"),
        ActionsBlock(elements=[ButtonElement(text="Go", action_id="go", value="1", style="primary")]),
    ]
    assert validate_message({"text": "t", "blocks": [b.to_dict() for b in blocks]}) == []
    view = View(
        type="modal",
        title="Title",
        submit="Submit",
        blocks=[InputBlock(label="Say", element=PlainTextInputElement(action_id="s"), block_id="s")],
    )
    assert validate_view(view.to_dict()) == []


def test_blocks_text_length_sums_every_text_object() -> None:
    blocks = [section("abc"), {"type": "context", "elements": [md("de"), plain("f")]}, actions(button("gh"))]
    assert blocks_text_length(blocks) == 8
