"""The rules of each Block Kit block and element, checked in one walk (:class:`Validator`).

The public entry points, and the limits a whole message or view must keep, are in
:mod:`bot.slack.blockkit`; this module holds the per-field rules they apply. Sources and the stricter
readings chosen are described there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

__all__ = ["MESSAGE_BLOCKS_TEXT_MAX", "TEXT_TYPES", "Container", "Surface", "Validator", "text_length"]

MESSAGE_BLOCKS_TEXT_MAX: Final = 12_000
"""Undocumented cumulative limit on the text in a message's blocks (``msg_blocks_too_long``): Slack staff
quoted "12,000 text characters" (slackapi/bolt-js#2509, #2867); it applies to every block type."""

Surface = Literal["message", "modal", "home"]
Container = Literal["section", "actions", "input"]

TEXT_TYPES: Final = frozenset({"plain_text", "mrkdwn"})
_STYLES: Final = frozenset({"primary", "danger"})
_SELECTS: Final = frozenset(
    {"static_select", "external_select", "users_select", "conversations_select", "channels_select"}
)
_MULTI_SELECTS: Final = frozenset(
    {
        "multi_static_select",
        "multi_external_select",
        "multi_users_select",
        "multi_conversations_select",
        "multi_channels_select",
    }
)
_ALL_CONTAINERS: Final[frozenset[Container]] = frozenset({"section", "actions", "input"})
_PLACES: Final[dict[str, frozenset[Container]]] = {
    "button": frozenset({"section", "actions"}),
    "overflow": frozenset({"section", "actions"}),
    "workflow_button": frozenset({"section", "actions"}),
    "radio_buttons": _ALL_CONTAINERS,
    "checkboxes": _ALL_CONTAINERS,
    "datepicker": _ALL_CONTAINERS,
    "timepicker": _ALL_CONTAINERS,
    "datetimepicker": frozenset({"actions", "input"}),
    **dict.fromkeys(_SELECTS, _ALL_CONTAINERS),
    # Slack's element table lists multi-selects for section and input only; the actions-block page is
    # ambiguous and a live test saw actions blocks reject multi_static_select (product-anchors.md, item 7).
    **dict.fromkeys(_MULTI_SELECTS, frozenset({"section", "input"})),
    "plain_text_input": frozenset({"input"}),
    "email_text_input": frozenset({"input"}),
    "url_text_input": frozenset({"input"}),
    "number_input": frozenset({"input"}),
    "file_input": frozenset({"input"}),
    "rich_text_input": frozenset({"input"}),
    "image": frozenset({"section"}),
}
_MODAL_ONLY_ELEMENTS: Final = frozenset({"email_text_input", "url_text_input", "number_input", "file_input"})
_BLOCKS: Final[dict[Surface, frozenset[str]]] = {
    "message": frozenset(
        {"section", "header", "context", "actions", "divider", "image", "input", "rich_text", "markdown"}
    ),
    "modal": frozenset({"section", "header", "context", "actions", "divider", "image", "input", "rich_text"}),
    "home": frozenset({"section", "header", "context", "actions", "divider", "image", "input", "rich_text"}),
}
_KNOWN_BLOCKS: Final[frozenset[str]] = frozenset().union(*_BLOCKS.values())
_TRIGGERS: Final = frozenset({"on_enter_pressed", "on_character_entered"})


def text_length(text: str) -> int:
    """Length in UTF-16 code units (an emoji outside the BMP counts 2): never less than Slack's count."""
    if text.isascii():  # most texts: one unit a character, without encoding them
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _n(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class Validator:
    def __init__(self, surface: Surface) -> None:
        self.surface: Surface = surface
        self.problems: list[str] = []
        self.block_ids: dict[str, str] = {}
        self.markdown_total = 0

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    # -- primitives ----------------------------------------------------------------------------------

    def string(self, obj: Mapping[str, Any], key: str, path: str, max_len: int, *, min_len: int = 1) -> None:
        if key not in obj:
            return
        value = obj[key]
        where = f"{path}.{key}"
        if not isinstance(value, str):
            self.add(where, "not a string")
        elif text_length(value) > max_len:
            self.add(where, f"{text_length(value)} characters, at most {max_len} allowed")
        elif text_length(value) < min_len:
            self.add(where, f"empty, at least {_n(min_len, 'character')} required")

    def boolean(self, obj: Mapping[str, Any], key: str, path: str) -> None:
        if key in obj and not isinstance(obj[key], bool):
            self.add(f"{path}.{key}", "not a boolean")

    def text_object(
        self, obj: Any, path: str, max_len: int, *, plain_only: bool = False, what: str = "this field"
    ) -> None:
        if obj is None:
            self.add(path, "required")
            return
        if not isinstance(obj, Mapping):
            self.add(path, "not a text object")
            return
        kind = obj.get("type")
        if kind not in TEXT_TYPES:
            self.add(f"{path}.type", f"{kind!r}, a text object is plain_text or mrkdwn")
            return
        if plain_only and kind != "plain_text":
            self.add(f"{path}.type", f"mrkdwn, {what} allows only plain_text")
        if kind == "mrkdwn" and "emoji" in obj:
            self.add(f"{path}.emoji", "only plain_text text objects take emoji")
        if kind == "plain_text" and "verbatim" in obj:
            self.add(f"{path}.verbatim", "only mrkdwn text objects take verbatim")
        self.boolean(obj, "emoji", path)
        self.boolean(obj, "verbatim", path)
        text = obj.get("text")
        if not isinstance(text, str):
            self.add(f"{path}.text", "required string")
        elif not text.strip():
            # Slack needs at least one character; whitespace alone is treated as empty (stricter reading).
            self.add(f"{path}.text", "empty, at least 1 non-blank character required")
        elif text_length(text) > max_len:
            self.add(f"{path}.text", f"{text_length(text)} characters, {what} allows at most {max_len}")

    def action_id(self, el: Mapping[str, Any], path: str, *, seen: dict[str, str] | None = None) -> None:
        self.string(el, "action_id", path, 255)
        action_id = el.get("action_id")
        if seen is not None and isinstance(action_id, str):
            if action_id in seen:
                self.add(f"{path}.action_id", f"{action_id!r} repeats {seen[action_id]} in the same block")
            else:
                seen[action_id] = path

    # -- blocks --------------------------------------------------------------------------------------

    def blocks(self, blocks: Any, path: str, max_blocks: int) -> None:
        if not isinstance(blocks, list):
            self.add(path, "not a list")
            return
        if len(blocks) > max_blocks:
            where = "a message" if self.surface == "message" else "a view"
            self.add(path, f"{_n(len(blocks), 'block')}, {where} allows at most {max_blocks}")
        for i, block in enumerate(blocks):
            self.block(block, f"{path}[{i}]")
        if self.markdown_total > MESSAGE_BLOCKS_TEXT_MAX:
            self.add(
                path,
                f"{self.markdown_total} characters in markdown blocks, "
                f"at most {MESSAGE_BLOCKS_TEXT_MAX} in all",
            )

    def block(self, block: Any, path: str) -> None:
        if not isinstance(block, Mapping):
            self.add(path, "not an object")
            return
        kind = block.get("type")
        allowed = _BLOCKS[self.surface]
        if not isinstance(kind, str) or kind not in _KNOWN_BLOCKS:
            self.add(
                f"{path}.type", f"unknown block type {kind!r} (known here: {', '.join(sorted(allowed))})"
            )
            return
        if kind not in allowed:
            self.add(f"{path}.type", f"{kind} blocks are not allowed in a {self.surface}")
            return
        if "block_id" in block:
            block_id = block["block_id"]
            self.string(block, "block_id", path, 255)
            if isinstance(block_id, str):
                if block_id in self.block_ids:
                    self.add(f"{path}.block_id", f"{block_id!r} repeats {self.block_ids[block_id]}")
                else:
                    self.block_ids[block_id] = path
        getattr(self, f"_block_{kind}")(block, path)

    def _block_section(self, block: Mapping[str, Any], path: str) -> None:
        has_text = "text" in block
        fields = block.get("fields")
        if not has_text and fields is None:
            self.add(path, "a section needs text or fields")
        if has_text:
            self.text_object(block["text"], f"{path}.text", 3000, what="a section")
        if fields is not None:
            if not isinstance(fields, list) or not fields:
                self.add(f"{path}.fields", "must be a non-empty list")
            else:
                if len(fields) > 10:
                    self.add(f"{path}.fields", f"{len(fields)} fields, a section allows at most 10")
                for i, field in enumerate(fields):
                    self.text_object(field, f"{path}.fields[{i}]", 2000, what="a section field")
        if "accessory" in block:
            self.element(block["accessory"], f"{path}.accessory", "section")
        self.boolean(block, "expand", path)

    def _block_header(self, block: Mapping[str, Any], path: str) -> None:
        self.text_object(block.get("text"), f"{path}.text", 150, plain_only=True, what="a header")

    def _block_divider(self, block: Mapping[str, Any], path: str) -> None:
        return

    def _block_context(self, block: Mapping[str, Any], path: str) -> None:
        elements = block.get("elements")
        if not isinstance(elements, list) or not elements:
            self.add(f"{path}.elements", "must be a non-empty list")
            return
        if len(elements) > 10:
            self.add(f"{path}.elements", f"{len(elements)} elements, a context block allows at most 10")
        for i, el in enumerate(elements):
            where = f"{path}.elements[{i}]"
            if isinstance(el, Mapping) and el.get("type") == "image":
                self._image_element(el, where)
            elif isinstance(el, Mapping) and el.get("type") in TEXT_TYPES:
                self.text_object(el, where, 3000, what="a context element")
            else:
                kind = el.get("type") if isinstance(el, Mapping) else None
                self.add(where, f"{kind!r} is not allowed in a context block (text objects and images only)")

    def _block_actions(self, block: Mapping[str, Any], path: str) -> None:
        elements = block.get("elements")
        if not isinstance(elements, list) or not elements:
            self.add(f"{path}.elements", "must be a non-empty list")
            return
        if len(elements) > 25:
            self.add(f"{path}.elements", f"{len(elements)} elements, an actions block allows at most 25")
        seen: dict[str, str] = {}
        for i, el in enumerate(elements):
            self.element(el, f"{path}.elements[{i}]", "actions", seen=seen)

    def _block_input(self, block: Mapping[str, Any], path: str) -> None:
        self.text_object(block.get("label"), f"{path}.label", 2000, plain_only=True, what="an input label")
        if "hint" in block:
            self.text_object(block["hint"], f"{path}.hint", 2000, plain_only=True, what="an input hint")
        self.boolean(block, "optional", path)
        self.boolean(block, "dispatch_action", path)
        element = block.get("element")
        if element is None:
            self.add(f"{path}.element", "required")
            return
        self.element(element, f"{path}.element", "input")
        kind = element.get("type") if isinstance(element, Mapping) else None
        dispatch = block.get("dispatch_action") is True
        if dispatch and kind == "file_input":
            self.add(f"{path}.dispatch_action", "file_input cannot dispatch actions")
        if self.surface != "modal" and not dispatch:
            # Slack accepts this, but with no submit button outside modals the value never reaches the app.
            self.add(
                f"{path}.dispatch_action", f"an input block in a {self.surface} needs dispatch_action: true"
            )

    def _block_image(self, block: Mapping[str, Any], path: str) -> None:
        self._image_element(block, path)
        if "title" in block:
            self.text_object(block["title"], f"{path}.title", 2000, plain_only=True, what="an image title")

    def _block_rich_text(self, block: Mapping[str, Any], path: str) -> None:
        if not isinstance(block.get("elements"), list):
            self.add(f"{path}.elements", "must be a list")

    def _block_markdown(self, block: Mapping[str, Any], path: str) -> None:
        text = block.get("text")
        if not isinstance(text, str) or not text:
            self.add(f"{path}.text", "required non-empty string")
        else:
            self.markdown_total += text_length(text)

    # -- elements ------------------------------------------------------------------------------------

    def element(
        self, el: Any, path: str, container: Container, *, seen: dict[str, str] | None = None
    ) -> None:
        if not isinstance(el, Mapping):
            self.add(path, "not an object")
            return
        kind = el.get("type")
        if not isinstance(kind, str) or kind not in _PLACES:
            self.add(f"{path}.type", f"unknown element type {kind!r}")
            return
        if container not in _PLACES[kind]:
            places = ", ".join(sorted(_PLACES[kind]))
            self.add(path, f"{kind} is not allowed in {container} blocks (only in: {places})")
            return
        if kind in _MODAL_ONLY_ELEMENTS and self.surface != "modal":
            self.add(path, f"{kind} is only allowed in modals")
        if kind == "image":
            self._image_element(el, path)
            return
        self.action_id(el, path, seen=seen)
        if "placeholder" in el:
            self.text_object(
                el["placeholder"], f"{path}.placeholder", 150, plain_only=True, what="a placeholder"
            )
        if "confirm" in el:
            self._confirm(el["confirm"], f"{path}.confirm")
        self.boolean(el, "focus_on_load", path)
        handler = getattr(self, f"_el_{kind}", None)
        if handler is not None:
            handler(el, path)
        elif kind in _MULTI_SELECTS:
            self._max_selected(el, path)

    def _image_element(self, el: Mapping[str, Any], path: str) -> None:
        if "image_url" not in el and "slack_file" not in el:
            self.add(path, "an image needs image_url or slack_file")
        self.string(el, "image_url", path, 3000)
        if not isinstance(el.get("alt_text"), str) or not el["alt_text"]:
            self.add(f"{path}.alt_text", "required non-empty string")
        else:
            self.string(el, "alt_text", path, 2000)

    def _confirm(self, confirm: Any, path: str) -> None:
        if not isinstance(confirm, Mapping):
            self.add(path, "not a confirm object")
            return
        self.text_object(confirm.get("title"), f"{path}.title", 100, plain_only=True, what="a confirm title")
        self.text_object(confirm.get("text"), f"{path}.text", 300, what="a confirm text")
        self.text_object(
            confirm.get("confirm"), f"{path}.confirm", 30, plain_only=True, what="a confirm button"
        )
        self.text_object(confirm.get("deny"), f"{path}.deny", 30, plain_only=True, what="a deny button")
        if "style" in confirm and confirm["style"] not in _STYLES:
            self.add(f"{path}.style", f"{confirm['style']!r}, expected 'primary' or 'danger'")

    def _el_button(self, el: Mapping[str, Any], path: str) -> None:
        self.text_object(el.get("text"), f"{path}.text", 75, plain_only=True, what="a button")
        self.string(el, "value", path, 2000, min_len=0)
        self.string(el, "url", path, 3000)
        self.string(el, "accessibility_label", path, 75)
        if "style" in el and el["style"] not in _STYLES:
            self.add(f"{path}.style", f"{el['style']!r}, expected 'primary' or 'danger'")

    def _el_radio_buttons(self, el: Mapping[str, Any], path: str) -> None:
        self._options(el, path, "radio_buttons", max_count=10, mrkdwn=True, multi=False)

    def _el_checkboxes(self, el: Mapping[str, Any], path: str) -> None:
        self._options(el, path, "checkboxes", max_count=10, mrkdwn=True, multi=True)

    def _el_static_select(self, el: Mapping[str, Any], path: str) -> None:
        self._options(el, path, "static_select", max_count=100, mrkdwn=False, multi=False, groups=True)

    def _el_multi_static_select(self, el: Mapping[str, Any], path: str) -> None:
        self._options(el, path, "multi_static_select", max_count=100, mrkdwn=False, multi=True, groups=True)
        self._max_selected(el, path)

    def _el_overflow(self, el: Mapping[str, Any], path: str) -> None:
        self._options(el, path, "overflow", max_count=5, mrkdwn=False, multi=False, urls=True)

    def _max_selected(self, el: Mapping[str, Any], path: str) -> None:
        if "max_selected_items" in el:
            value = el["max_selected_items"]
            if type(value) is not int or value < 1:
                self.add(f"{path}.max_selected_items", f"{value!r}, must be an integer of at least 1")

    def _el_plain_text_input(self, el: Mapping[str, Any], path: str) -> None:
        bounds = {"max_length": (1, 3000), "min_length": (0, 3000)}
        for key, (low, high) in bounds.items():
            if key in el:
                value = el[key]
                if type(value) is not int or not low <= value <= high:
                    self.add(f"{path}.{key}", f"{value!r}, must be an integer from {low} to {high}")
        low_v, high_v = el.get("min_length"), el.get("max_length")
        if type(low_v) is int and type(high_v) is int and low_v > high_v:
            self.add(f"{path}.min_length", f"{low_v} is more than max_length {high_v}")
        if "initial_value" in el:
            initial = el["initial_value"]
            if not isinstance(initial, str):
                self.add(f"{path}.initial_value", "not a string")
            elif type(high_v) is int and text_length(initial) > high_v:
                self.add(
                    f"{path}.initial_value", f"{text_length(initial)} characters, longer than max_length"
                )
        self.boolean(el, "multiline", path)
        config = el.get("dispatch_action_config")
        if config is not None:
            triggers = config.get("trigger_actions_on") if isinstance(config, Mapping) else None
            if not isinstance(triggers, list) or not triggers or not set(triggers) <= _TRIGGERS:
                self.add(
                    f"{path}.dispatch_action_config.trigger_actions_on",
                    "must list on_enter_pressed and/or on_character_entered",
                )

    def _options(
        self,
        el: Mapping[str, Any],
        path: str,
        kind: str,
        *,
        max_count: int,
        mrkdwn: bool,
        multi: bool,
        groups: bool = False,
        urls: bool = False,
    ) -> None:
        options = el.get("options")
        option_groups = el.get("option_groups") if groups else None
        if options is not None and option_groups is not None:
            self.add(path, "give options or option_groups, not both")
        collected: list[tuple[Mapping[str, Any], str]] = []
        if option_groups is not None:
            if not isinstance(option_groups, list) or not option_groups:
                self.add(f"{path}.option_groups", "must be a non-empty list")
            else:
                if len(option_groups) > 100:
                    self.add(
                        f"{path}.option_groups", f"{len(option_groups)} groups, {kind} allows at most 100"
                    )
                for g, group in enumerate(option_groups):
                    where = f"{path}.option_groups[{g}]"
                    if not isinstance(group, Mapping):
                        self.add(where, "not an object")
                        continue
                    self.text_object(
                        group.get("label"), f"{where}.label", 75, plain_only=True, what="a group"
                    )
                    collected += self._option_list(group.get("options"), f"{where}.options", kind, 100)
        elif options is None:
            self.add(f"{path}.options", "required")
        else:
            collected = self._option_list(options, f"{path}.options", kind, max_count)
        values: dict[str, str] = {}
        for option, where in collected:
            self._option(option, where, mrkdwn=mrkdwn, url=urls)
            value = option.get("value")
            if isinstance(value, str):
                if value in values:
                    self.add(f"{where}.value", f"{value!r} repeats {values[value]}")
                else:
                    values[value] = where
        known = [option for option, _ in collected]
        key = "initial_options" if multi else "initial_option"
        if key in el:
            initial = el[key]
            chosen = initial if multi else [initial]
            if not isinstance(chosen, list):
                self.add(f"{path}.{key}", "must be a list of options")
                return
            for i, option in enumerate(chosen):
                if option not in known:
                    where = f"{path}.{key}[{i}]" if multi else f"{path}.{key}"
                    self.add(
                        where, "must exactly match one of the options (same text, value and description)"
                    )

    def _option_list(
        self, options: Any, path: str, kind: str, max_count: int
    ) -> list[tuple[Mapping[str, Any], str]]:
        if not isinstance(options, list) or not options:
            self.add(path, "must be a non-empty list")
            return []
        if len(options) > max_count:
            self.add(path, f"{len(options)} options, {kind} allows at most {max_count}")
        found: list[tuple[Mapping[str, Any], str]] = []
        for i, option in enumerate(options):
            if isinstance(option, Mapping):
                found.append((option, f"{path}[{i}]"))
            else:
                self.add(f"{path}[{i}]", "not an option object")
        return found

    def _option(self, option: Mapping[str, Any], path: str, *, mrkdwn: bool, url: bool) -> None:
        what = "an option" if mrkdwn else "an option of this element"
        self.text_object(option.get("text"), f"{path}.text", 75, plain_only=not mrkdwn, what=what)
        if "description" in option:
            self.text_object(
                option["description"],
                f"{path}.description",
                75,
                plain_only=not mrkdwn,
                what="an option description",
            )
        value = option.get("value")
        if not isinstance(value, str) or not value:
            self.add(f"{path}.value", "required non-empty string")
        else:
            self.string(option, "value", path, 150)
        if "url" in option:
            if url:
                self.string(option, "url", path, 3000)
            else:
                self.add(f"{path}.url", "only overflow menu options take a url")
