"""JavaScript semantics: whitespace, trim, UTF-16 cuts, the one-line sanitizer and JSON.stringify.

The last tests compare with a real JavaScript engine when ``node`` is on the PATH.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from typing import Any

import pytest

from contract import to_json
from contract._js import (
    JS_WHITESPACE,
    UNDEFINED,
    as_js_integer,
    cut_utf16,
    is_js_number,
    js_number,
    js_str,
    js_trim,
    js_truthy,
    one_line,
    utf16_len,
)

EXPECTED_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


class TestWhitespace:
    def test_whitespace_class_is_exactly_javascripts(self) -> None:
        """The class holds the 25 characters of ECMAScript WhiteSpace and LineTerminator, nothing else."""
        assert sorted(JS_WHITESPACE) == sorted(EXPECTED_WHITESPACE)

    @pytest.mark.parametrize("char", list(EXPECTED_WHITESPACE), ids=lambda c: f"U+{ord(c):04X}")
    def test_trim_strips_every_javascript_whitespace(self, char: str) -> None:
        """js_trim strips each JavaScript whitespace character at both ends."""
        assert js_trim(f"{char}{char}a{char}b{char}") == f"a{char}b"

    @pytest.mark.parametrize(
        "char", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u180e", "\u200b", "\u2060"], ids=repr
    )
    def test_trim_keeps_what_only_python_or_nobody_calls_whitespace(self, char: str) -> None:
        """U+001C-U+001F and U+0085 (Python whitespace) and zero-width characters survive js_trim."""
        assert js_trim(f"{char}a{char}") == f"{char}a{char}"


class TestUtf16:
    def test_length_counts_astral_characters_twice(self) -> None:
        """An emoji is two UTF-16 code units; a lone surrogate is one."""
        assert utf16_len("a😀\ud83d") == 4

    def test_cut_keeps_short_text_unchanged(self) -> None:
        """Text within the limit comes back as the same string."""
        text = "x" * 3998 + "😀"

        assert cut_utf16(text, 4000) is text

    def test_cut_counts_code_units_not_code_points(self) -> None:
        """2000 emoji are 4000 units; one more is cut."""
        assert cut_utf16("😀" * 2001, 4000) == "😀" * 2000

    def test_cut_through_a_pair_keeps_the_high_surrogate(self) -> None:
        """Cutting inside a surrogate pair leaves the high half as a lone surrogate, as JavaScript does."""
        assert cut_utf16("a" * 3999 + "😀b", 4000) == "a" * 3999 + "\ud83d"

    def test_cut_just_after_a_pair_keeps_it_whole(self) -> None:
        """A pair ending exactly at the limit is kept whole."""
        assert cut_utf16("a" * 3998 + "😀b", 4000) == "a" * 3998 + "😀"


class TestOneLine:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ("a\u00a0b", "a\u00a0b"),
            ("a\u00a0\u00a0b", "a b"),
            ("\u0085a\u0085\u0085b\u0085", "\u0085a\u0085\u0085b\u0085"),
            ("\u2028a\u2028b\u2028", "a\u2028b"),
            ("\ufeffabc\ufeff", "abc"),
            ("a\u000bb\u000cc", "abc"),
            ("be\u0007ll\u0000 x\u001b[0m y\u007f", "bell x[0m y"),
        ],
        ids=["single-nbsp", "double-nbsp", "nel", "line-separator", "bom", "vt-ff", "controls"],
    )
    def test_upstream_examples(self, raw: str, expected: str) -> None:
        """The examples of upstream-contracts.md 2.1 give the documented results."""
        assert one_line(raw) == expected

    def test_c1_controls_are_kept(self) -> None:
        """C1 controls U+0080-U+009F are not deleted."""
        assert one_line("a\x80\x9fb") == "a\x80\x9fb"

    def test_line_breaks_and_tabs_become_one_space_each_then_collapse(self) -> None:
        """CR, LF and TAB turn into spaces and the run collapses to one."""
        assert one_line("a\r\n\tb") == "a b"

    def test_deleted_controls_can_join_a_whitespace_run(self) -> None:
        """Controls are deleted before runs collapse, so the spaces around them merge."""
        assert one_line("a \x00 b") == "a b"

    @pytest.mark.parametrize("pair", ["\u3000\u3000", " \u2003", "\u205f\u202f", "\u1680\ufeff"])
    def test_runs_of_mixed_whitespace_collapse(self, pair: str) -> None:
        """Any run of two or more JavaScript whitespace characters becomes one space."""
        assert one_line(f"a{pair}b") == "a b"


class TestNumbers:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (1.0, "1"),
            (-0.0, "0"),
            (0.5, "0.5"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (1.5e-10, "1.5e-10"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123456789012345680000.0, "123456789012345680000"),
            (2**60, "1152921504606847000"),
            (2**53, "9007199254740992"),
            (-42, "-42"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (float("nan"), "NaN"),
            (float("-inf"), "-Infinity"),
        ],
        ids=repr,
    )
    def test_numbers_are_written_as_javascript_writes_them(self, value: float, expected: str) -> None:
        """js_number follows ECMAScript Number::toString."""
        assert js_number(value) == expected

    @pytest.mark.parametrize("value", [True, False, "1", None, [1]], ids=repr)
    def test_booleans_and_strings_are_not_numbers(self, value: object) -> None:
        """typeof true is "boolean" in JavaScript, although Python's bool is an int."""
        assert not is_js_number(value)

    @pytest.mark.parametrize(
        ("value", "expected"),
        [(1, 1), (1.0, 1), (-0.0, 0), (0.5, None), (True, None), (float("inf"), None), ("1", None)],
        ids=repr,
    )
    def test_integer_reading_follows_number_is_integer(self, value: object, expected: int | None) -> None:
        """as_js_integer accepts what Number.isInteger accepts and reads 1.0 as 1."""
        assert as_js_integer(value) == expected


class TestStringAndTruthiness:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (None, "null"),
            (UNDEFINED, "undefined"),
            (True, "true"),
            (2.0, "2"),
            ([1, None, [2, 3]], "1,,2,3"),
            ({"a": 1}, "[object Object]"),
        ],
        ids=repr,
    )
    def test_string_conversion_follows_javascript(self, value: object, expected: str) -> None:
        """js_str is String(value)."""
        assert js_str(value) == expected

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            *[(None, False), (UNDEFINED, False), (0, False), (float("nan"), False), ("", False)],
            *[([], True), ({}, True), ("0", True), (-1, True)],
        ],
        ids=repr,
    )
    def test_truthiness_follows_javascript(self, value: object, expected: bool) -> None:
        """Empty containers are truthy, NaN is falsy."""
        assert js_truthy(value) is expected


class TestToJson:
    def test_output_is_compact_in_insertion_order(self) -> None:
        """No spaces, keys in the order they were inserted."""
        assert to_json({"b": [1, 2], "a": {"z": None, "y": True}}) == '{"b":[1,2],"a":{"z":null,"y":true}}'

    def test_control_characters_use_short_escapes_else_lowercase_hex(self) -> None:
        """\\b \\t \\n \\f \\r have short escapes; other controls are \\u00xx in lowercase."""
        assert (
            to_json("\x00\x07\b\t\n\x0b\f\r\x1b\x1f")
            == '"\\u0000\\u0007\\b\\t\\n\\u000b\\f\\r\\u001b\\u001f"'
        )

    def test_quotes_and_backslashes_are_escaped(self) -> None:
        """The two characters JSON requires escaping are escaped."""
        assert to_json('a"b\\c') == '"a\\"b\\\\c"'

    def test_non_ascii_and_del_are_kept_raw(self) -> None:
        """DEL, C1 controls, U+2028 and astral characters are written as they are."""
        assert to_json("\x7f\x80\u2028é😀") == '"\x7f\x80\u2028é😀"'

    def test_lone_surrogates_are_escaped_in_lowercase(self) -> None:
        """Unpaired surrogates become \\udXXX escapes, as well-formed JSON.stringify writes them."""
        assert to_json("a\ud83d x\ude00") == '"a\\ud83d x\\ude00"'

    def test_surrogate_pair_held_as_two_code_points_is_one_character(self) -> None:
        """A high and low surrogate side by side are one character to JavaScript."""
        assert to_json("\ud83d\ude00") == '"😀"'

    def test_integral_floats_and_non_finite_numbers(self) -> None:
        """1.0 is written 1; NaN and infinities are null."""
        assert to_json([1.0, 1.5, float("nan"), float("inf")]) == "[1,1.5,null,null]"

    def test_array_index_keys_come_first_in_ascending_order(self) -> None:
        """JavaScript objects list canonical array-index keys first."""
        value = {"b": 1, "2": 2, "1": 3, "01": 4, "4294967295": 5, "4294967294": 6}

        assert to_json(value) == '{"1":3,"2":2,"4294967294":6,"b":1,"01":4,"4294967295":5}'

    def test_undefined_members_are_left_out(self) -> None:
        """Undefined object members vanish and undefined array items are null."""
        assert to_json({"a": UNDEFINED, "b": [UNDEFINED]}) == '{"b":[null]}'

    def test_models_are_written_as_their_wire_form(self) -> None:
        """Objects with to_wire() are written through it, like toJSON() in JavaScript."""
        from contract import AskDelivery

        assert to_json(AskDelivery(surface="host")) == '{"surface":"host","degraded":false}'

    def test_unknown_types_are_refused(self) -> None:
        """Values JSON cannot represent raise TypeError, as json.dumps does."""
        with pytest.raises(TypeError, match="set"):
            to_json({1, 2})


# --- against a real JavaScript engine -------------------------------------------------------

_NODE = shutil.which("node")
_ALPHABET = list("ab ,[]\"\\") + list(EXPECTED_WHITESPACE) + [
    "\x00", "\x07", "\x1b", "\x1c", "\x1f", "\x7f", "\x85", "\x9f", "\u200b", "é", "😀", "\ud83d", "\ude00",
]  # fmt: skip
_NODE_SCRIPT = r"""
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const oneLine = (s) => s.replace(/[\r\n\t]/g, " ").replace(/[\x00-\x08\x0B\x0C\x0E-\x1F\x7F]/g, "")
  .replace(/\s{2,}/g, " ").trim();
process.stdout.write(JSON.stringify({
  trim: cases.strings.map((s) => s.trim()),
  oneLine: cases.strings.map(oneLine),
  slice: cases.strings.map((s) => s.slice(0, 7)),
  length: cases.strings.map((s) => s.length),
  stringify: cases.values.map((v) => JSON.stringify(v)),
  numbers: cases.numbers.map((n) => String(n)),
}));
"""


def _as_javascript_sees_it(text: str) -> str:
    """Join surrogate pairs held as two code points into one, as they are one character to JavaScript."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _random_strings(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 12))) for _ in range(count)]


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice(
            [rng.randrange(-(10**6), 10**6), rng.uniform(-1e6, 1e6), 10.0 ** rng.randrange(-9, 25)]
        )
    if kind in (2, 3):
        return _random_strings(rng, 1)[0]
    if kind == 4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = [*_random_strings(rng, rng.randrange(4)), str(rng.randrange(12))]
    return {key: _random_value(rng, depth + 1) for key in keys}


@pytest.mark.skipif(_NODE is None, reason="node is not installed")
def test_helpers_agree_with_node_on_random_input() -> None:
    """trim, oneLine, slice, length, JSON.stringify and String(number) match Node.js on random input."""
    rng = random.Random(20240601)
    strings = _random_strings(rng, 1000)
    values = [_random_value(rng) for _ in range(1000)]
    numbers = [rng.uniform(-1e30, 1e30) * 10.0 ** rng.randrange(-30, 5) for _ in range(200)]
    # json.dumps writes ASCII, so lone surrogates travel as escapes and survive.
    payload = json.dumps({"strings": strings, "values": values, "numbers": numbers})

    assert _NODE is not None
    run = subprocess.run(
        [_NODE, "-e", _NODE_SCRIPT], input=payload, capture_output=True, text=True, check=True
    )
    node = json.loads(run.stdout)

    seen = _as_javascript_sees_it
    assert [seen(js_trim(s)) for s in strings] == node["trim"]
    assert [seen(one_line(s)) for s in strings] == node["oneLine"]
    assert [seen(cut_utf16(s, 7)) for s in strings] == node["slice"]
    assert [utf16_len(s) for s in strings] == node["length"]
    assert [to_json(v) for v in values] == node["stringify"]
    assert [js_number(n) for n in numbers] == node["numbers"]
