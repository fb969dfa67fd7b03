"""bot.render.mrkdwn: untrusted agent text becomes safe Slack text, whatever it contains."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.render.mrkdwn import (
    WORD_JOINER,
    clean,
    cut,
    escape_mrkdwn,
    escape_plain,
    one_line,
    split_for_sections,
    to_mrkdwn,
)
from bot.slack.blockkit import text_length

WJ = WORD_JOINER

HOSTILE = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U123>",
    "<@W123|bob>",
    "<#C1>",
    "<#C1|general>",
    "<!subteam^S1>",
    "<!subteam^S1|@team>",
    "<http://x|y>",
    "<https://evil.example/login|https://bank.example>",
    "<mailto:a@b.c|mail>",
    "<!date^1^{date}|x>",
    "&lt;!channel&gt;",
    "&#60;!channel&#62;",
    "<<!channel>>",
    "<\n!channel>",
    "[<!channel>](http://x)",
    "`<!channel>`",
    "```\n<!channel>\n```",
    "<b onmouseover=x>hi</b>",
    "<!-- <!channel> -->",
]

# Text made of the pieces attackers and Markdown care about, so hypothesis finds the corners.
PIECES = st.sampled_from(
    [
        "<",
        ">",
        "&",
        "!",
        "@",
        "#",
        "^",
        "|",
        "*",
        "_",
        "~",
        "`",
        "```",
        "[",
        "]",
        "(",
        ")",
        "\n",
        "\n\n",
        " ",
        "-",
        "1.",
        ">",
        "#",
        "\\",
        "http://",
        "www.",
        "@here",
        "channel",
        "U123",
        "😀",
        "é",
        "\u2028",
        "\x00",
        "\ud800",
        "&amp;",
        "&lt;",
        "a",
        "word ",
    ]
)
TEXTS = st.lists(PIECES | st.text(max_size=5), max_size=60).map("".join)


class TestEscaping:
    @pytest.mark.parametrize("hostile", HOSTILE)
    def test_no_angle_bracket_survives_escape_mrkdwn(self, hostile: str) -> None:
        out = escape_mrkdwn(hostile)
        assert "<" not in out
        assert ">" not in out

    @pytest.mark.parametrize("hostile", HOSTILE)
    def test_no_angle_bracket_survives_markdown_conversion(self, hostile: str) -> None:
        out = to_mrkdwn(hostile)
        assert "<" not in out
        assert ">" not in out

    def test_the_three_control_characters_are_escaped_ampersand_first(self) -> None:
        assert escape_mrkdwn("a & b < c > d") == "a &amp; b &lt; c &gt; d"
        assert escape_mrkdwn("&lt;") == "&amp;lt;"

    def test_nothing_else_is_html_encoded(self) -> None:
        assert escape_mrkdwn("\"quotes\" 'and' é ü") == "\"quotes\" 'and' é ü"

    def test_plain_text_is_escaped_the_same_way(self) -> None:
        assert escape_plain("<!here> & <@U1>") == "&lt;!here&gt; &amp; &lt;@U1&gt;"

    def test_entities_in_markdown_are_decoded_then_escaped_again(self) -> None:
        """``&lt;!channel&gt;`` in Markdown means the text ``<!channel>``: shown, never parsed."""
        assert to_mrkdwn("&lt;!channel&gt;") == "&lt;!channel&gt;"
        assert to_mrkdwn("&#60;!channel&#62;") == "&lt;!channel&gt;"


class TestDefanging:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("see http://x.com", f"see http{WJ}://x.com"),
            ("HTTPS://X.COM", f"HTTPS{WJ}://X.COM"),
            ("ftp://files", f"ftp{WJ}://files"),
            ("www.example.com", f"www{WJ}.example.com"),
            ("mailto:a@b.c", f"mailto{WJ}:a@b.c"),
            ("@here", f"@{WJ}here"),
            ("@channel!", f"@{WJ}channel!"),
            ("@Everyone", f"@{WJ}Everyone"),
            ("@group", f"@{WJ}group"),
        ],
    )
    def test_auto_link_words_are_broken_with_an_invisible_joiner(self, text: str, expected: str) -> None:
        assert escape_mrkdwn(text) == expected

    def test_ordinary_words_are_left_alone(self) -> None:
        assert escape_mrkdwn("here and channel, @hereafter, wwwx.y, http:x") == (
            "here and channel, @hereafter, wwwx.y, http:x"
        )

    def test_code_stays_copyable(self) -> None:
        """Slack neither links nor styles inside code, so commands keep working when copied."""
        assert to_mrkdwn("run `curl https://x.example/a`") == "run `curl https://x.example/a`"
        assert "https://x.example" in to_mrkdwn("```\ncurl https://x.example\n```")

    def test_plain_text_fields_are_defanged_too(self) -> None:
        assert escape_plain("@here http://x") == f"@{WJ}here http{WJ}://x"


class TestMarkdown:
    @pytest.mark.parametrize(
        ("markdown", "mrkdwn"),
        [
            ("**bold**", "*bold*"),
            ("__bold__", "*bold*"),
            ("*italic*", "_italic_"),
            ("_italic_", "_italic_"),
            ("~~gone~~", "~gone~"),
            ("***both***", "_*both*_"),
            ("`x < y`", "`x &lt; y`"),
            ("a `b` c", "a `b` c"),
            ("# Title", "*Title*"),
            ("## Title **with** bold", "*Title with bold*"),
            ("Setext\n===", "*Setext*"),
            ("- a\n- b", "• a\n• b"),
            ("* a\n* b", "• a\n• b"),
            ("1. a\n2. b", "1. a\n2. b"),
            ("3. a\n4. b", "3. a\n4. b"),
            ("- a\n  - b\n    - c", "• a\n    ◦ b\n        ▪ c"),
            ("> quoted", "&gt; quoted"),
            ("> one\n> two", "&gt; one\n&gt; two"),
            ("---", "───────"),
            ("line one\nline two", "line one\nline two"),
            ("para one\n\n\n\npara two", "para one\n\npara two"),
            ("| a | b |\n|---|---|\n| 1 | 2 |", "*a* | *b*\n1 | 2"),
        ],
    )
    def test_markdown_becomes_mrkdwn(self, markdown: str, mrkdwn: str) -> None:
        assert to_mrkdwn(markdown) == mrkdwn

    def test_fenced_code_is_kept_and_escaped(self) -> None:
        assert to_mrkdwn("```python\nif a < b:\n    pass\n```") == "```\nif a &lt; b:\n    pass\n```"

    def test_indented_code_becomes_a_fence(self) -> None:
        assert to_mrkdwn("text\n\n    code line") == "text\n\n```\ncode line\n```"

    def test_a_fence_inside_code_cannot_close_it(self) -> None:
        out = to_mrkdwn("````\n```\ninner\n```\n````")
        assert out.count("```") == 2

    def test_links_are_shown_as_text_with_their_address(self) -> None:
        assert to_mrkdwn("[the docs](https://docs.example/x)") == f"the docs (https{WJ}://docs.example/x)"

    def test_a_spoofed_link_label_cannot_hide_the_address(self) -> None:
        out = to_mrkdwn("[https://bank.example](https://evil.example)")
        assert out == f"https{WJ}://bank.example (https{WJ}://evil.example)"

    def test_autolinks_are_shown_once_as_text(self) -> None:
        assert to_mrkdwn("<https://x.example>") == f"https{WJ}://x.example"

    def test_slack_style_link_is_plain_text(self) -> None:
        assert to_mrkdwn("<http://x|y>") == f"http{WJ}://x|y"

    def test_images_are_shown_as_alt_text_and_address(self) -> None:
        assert to_mrkdwn("![diagram](http://i.example/d.png)") == f"diagram (http{WJ}://i.example/d.png)"

    def test_raw_html_is_shown_as_text(self) -> None:
        assert to_mrkdwn("<b>hi</b>") == "&lt;b&gt;hi&lt;/b&gt;"
        assert to_mrkdwn("<div>\n<!channel>\n</div>") == "&lt;div&gt;\n&lt;!channel&gt;\n&lt;/div&gt;"

    def test_javascript_links_are_not_links(self) -> None:
        assert to_mrkdwn("[x](javascript:alert(1))") == "[x](javascript:alert(1))"

    def test_blank_input_gives_empty_output(self) -> None:
        assert to_mrkdwn("") == ""
        assert to_mrkdwn(" \n\t ") == ""

    def test_deep_nesting_is_shown_escaped_rather_than_lost(self) -> None:
        """markdown-it drops blocks nested past its limit; such text is shown as written instead."""
        out = to_mrkdwn("> " * 200 + "deep <!here>\n" + "- " * 200 + "list")
        assert "deep &lt;!here&gt;" in out
        assert "list" in out

    def test_ordinary_nesting_is_converted(self) -> None:
        assert to_mrkdwn("> " * 10 + "ok") == "&gt; " * 10 + "ok"


class TestClean:
    def test_lone_surrogates_become_replacement_characters(self) -> None:
        assert clean("a\ud800b") == "a\ufffdb"

    def test_surrogate_pairs_are_joined(self) -> None:
        assert clean("\ud83d\ude00") == "😀"

    def test_control_characters_are_dropped_and_newlines_normalised(self) -> None:
        assert clean("a\x00b\x07c\r\nd\re\u2028f") == "abc\nd\ne\nf"

    def test_tabs_become_spaces(self) -> None:
        assert clean("a\tb") == "a    b"

    def test_one_line_collapses_whitespace(self) -> None:
        assert one_line("  a \n\n b\t c  ") == "a b c"


class TestCut:
    def test_short_text_is_unchanged(self) -> None:
        assert cut("hello", 5) == "hello"

    def test_long_text_ends_with_the_marker_and_fits(self) -> None:
        assert cut("hello world", 8) == "hello w…"

    def test_custom_marker(self) -> None:
        out = cut("a" * 100, 50, " (more)")
        assert out.endswith(" (more)")
        assert len(out) == 50

    def test_cut_never_splits_an_entity(self) -> None:
        text = escape_mrkdwn("<" * 10)
        for limit in range(1, len(text)):
            out = cut(text, limit)
            assert text_length(out) <= limit
            assert re.search(r"&[a-z]{0,3}…$", out) is None, out

    def test_cut_counts_emoji_as_two_units(self) -> None:
        out = cut("😀" * 10, 7)
        assert out == "😀😀😀…"
        assert text_length(out) == 7

    def test_cut_closes_an_open_code_fence(self) -> None:
        text = "```\n" + "x" * 100 + "\n```"
        out = cut(text, 50)
        assert out.count("```") == 2
        assert text_length(out) <= 50

    def test_trailing_space_is_dropped_before_the_marker(self) -> None:
        assert cut("abc    defgh", 8) == "abc…"

    def test_tiny_limits_still_fit(self) -> None:
        assert cut("abcdef", 1) == "…"
        assert cut("abcdef", 0) == ""


class TestSplit:
    def test_short_text_is_one_piece(self) -> None:
        assert split_for_sections("hello", 3000) == ["hello"]

    def test_splits_at_paragraphs_first(self) -> None:
        text = "a" * 30 + "\n\n" + "b" * 30 + "\nc" * 5
        assert split_for_sections(text, 50) == ["a" * 30, "b" * 30 + "\nc" * 5]

    def test_splits_at_lines_then_words(self) -> None:
        pieces = split_for_sections(" ".join(["word"] * 100), 50)
        assert all(text_length(p) <= 50 for p in pieces)
        assert " ".join(pieces).split() == ["word"] * 100

    def test_hard_cuts_unbroken_text_without_splitting_entities(self) -> None:
        text = escape_mrkdwn("<" * 100)
        pieces = split_for_sections(text, 30)
        assert "".join(pieces) == text
        assert all(p.startswith("&lt;") and p.endswith("&lt;") for p in pieces)

    def test_a_split_fence_is_closed_and_reopened(self) -> None:
        text = "```\n" + "\n".join(f"line {i}" for i in range(40)) + "\n```"
        pieces = split_for_sections(text, 100)
        assert len(pieces) > 1
        assert all(p.count("```") % 2 == 0 for p in pieces)
        assert all(text_length(p) <= 100 for p in pieces)

    def test_pieces_are_never_blank(self) -> None:
        assert split_for_sections("\n\n\n   \n", 30) == []
        assert all(p.strip() for p in split_for_sections("a\n\n\n\n\n" * 40, 20))

    def test_too_small_a_limit_is_refused(self) -> None:
        with pytest.raises(ValueError, match="too small"):
            split_for_sections("abc", 5)

    def test_the_default_limit_is_a_section(self) -> None:
        pieces = split_for_sections("x " * 4000)
        assert len(pieces) == 3
        assert all(text_length(p) <= 3000 for p in pieces)


class TestHostileProperties:
    @settings(max_examples=300, deadline=None)
    @given(TEXTS)
    def test_converted_markdown_never_contains_angle_brackets(self, text: str) -> None:
        out = to_mrkdwn(text)
        assert "<" not in out
        assert ">" not in out
        out.encode("utf-8")  # no lone surrogates reach Slack

    @settings(max_examples=300, deadline=None)
    @given(TEXTS)
    def test_escaped_text_never_contains_angle_brackets_or_raw_broadcasts(self, text: str) -> None:
        out = escape_mrkdwn(text)
        assert "<" not in out
        assert ">" not in out
        assert re.search(r"(?i)@(here|channel|everyone)\b", out) is None
        assert "://" not in out.replace(WJ + "://", "")

    @settings(max_examples=300, deadline=None)
    @given(TEXTS, st.integers(min_value=1, max_value=200))
    def test_cut_always_fits(self, text: str, limit: int) -> None:
        out = cut(escape_mrkdwn(text), limit)
        assert text_length(out) <= limit

    @settings(max_examples=200, deadline=None)
    @given(TEXTS, st.integers(min_value=16, max_value=120))
    def test_split_pieces_always_fit_and_are_never_blank(self, text: str, limit: int) -> None:
        for piece in split_for_sections(to_mrkdwn(text * 5), limit):
            assert text_length(piece) <= limit
            assert piece.strip()
