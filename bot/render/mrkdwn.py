"""Untrusted agent text to safe Slack text: Markdown to mrkdwn, escaping, cutting and splitting.

Everything an agent writes (questions, descriptions, labels, requester fields) goes through here before it
reaches a text object. The guarantees, in order of importance:

1. No output ever contains ``<`` or ``>``: ``&``, ``<`` and ``>`` are escaped everywhere (slack-facts.md
   section 4), so ``<!channel>``, ``<@U123>``, ``<#C1>``, ``<!subteam^S1>`` and ``<http://x|y>`` can never
   become a mention, a broadcast or a link. Block quotes are written ``&gt; `` (the form Slack itself stores).
   The bot's own tokens (``<!date^…>``, verified mentions) are added by the drawing modules after this ran.
2. Markdown links are shown as text, ``t (u)``, never as Slack links.
3. Bare URLs and ``@here``-style words are broken with an invisible WORD JOINER (see ``_defang``); the
   renderer also sets ``verbatim: true`` on every mrkdwn object, which is what really stops auto-linking.

Lengths are counted in UTF-16 code units (:func:`bot.slack.blockkit.text_length`), never less than
Slack's count.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from bot.slack.blockkit import text_length

__all__ = [
    "CUT_MARK",
    "WORD_JOINER",
    "clean",
    "cut",
    "escape_mrkdwn",
    "escape_plain",
    "one_line",
    "split_for_sections",
    "to_mrkdwn",
]

WORD_JOINER: Final = "\u2060"
CUT_MARK: Final = "…"

_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NEWLINES_RE = re.compile(r"\r\n?|[\u2028\u2029\x85]")
_SPACES_RE = re.compile(r"\s+")
_BLANK_LINES_RE = re.compile(r"\n{3,}")
# Why a WORD JOINER (U+2060) and not a zero-width space or joiner: it is invisible, it is not whitespace (so
# the rest of the text keeps its word boundaries and nothing wraps there), and unlike U+200D it never glues
# neighbouring emoji into one glyph. Slack's auto-linker needs an unbroken ``scheme://``, ``www.``,
# ``mailto:`` or ``@here`` run, so one joiner inside the run is enough. ``verbatim: true`` on the text
# object is the main protection; the joiner also covers surfaces without it (notification text,
# plain_text fields). Every pattern is a zero-width insertion point, so substitution stays linear.
_DEFANG_RES: Final = (
    re.compile(r"(?=://)"),
    re.compile(r"(?i)(?<=\bwww)(?=\.)"),
    re.compile(r"(?i)(?<=\bmailto)(?=:)"),
    re.compile(r"(?i)(?<=@)(?=(?:here|channel|everyone|group)\b)"),
)
_ENTITY_TAIL_RE = re.compile(r"&[a-z]{0,3}$")
_FENCE = "```"

# markdown-it silently drops blocks nested deeper than maxNesting; such (hostile) text is shown escaped
# instead, unconverted, so nothing the agent wrote is lost and recursion stays shallow.
_MAX_NESTING: Final = 40
_MD = MarkdownIt("commonmark", {"html": False, "maxNesting": _MAX_NESTING}).enable(["strikethrough", "table"])
_BULLETS = ("•", "◦", "▪")


def clean(text: str) -> str:
    """Normalise newlines, drop C0 controls, and replace lone UTF-16 surrogates with U+FFFD.

    The contract counts in UTF-16 units and may keep half a surrogate pair; that cannot be encoded as
    UTF-8 on the way to Slack, so it is replaced here (valid pairs are joined first).
    """
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _CONTROL_RE.sub("", _NEWLINES_RE.sub("\n", text.replace("\t", "    ")))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _defang(text: str) -> str:
    for pattern in _DEFANG_RES:
        text = pattern.sub(WORD_JOINER, text)
    return text


def escape_mrkdwn(text: str) -> str:
    """Untrusted text for a mrkdwn field, shown as written (no Markdown conversion)."""
    return _escape(_defang(clean(text)))


def escape_plain(text: str) -> str:
    """Untrusted text for a plain_text field.

    Escaped like mrkdwn: whether Slack ever parses ``<!here>`` in plain_text is unverified
    (slack-facts.md section 4), and Slack decodes the three entities for display either way.
    """
    return escape_mrkdwn(text)


def one_line(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space and trim."""
    return _SPACES_RE.sub(" ", text).strip()


def _safe_end(text: str, end: int) -> int:
    """Move ``end`` left so ``text[:end]`` does not stop inside an entity like ``&amp;``."""
    tail = _ENTITY_TAIL_RE.search(text[max(0, end - 4) : end])
    if tail is not None:
        end -= len(tail.group(0))
    return end


def _prefix_within(text: str, limit: int) -> int:
    """A large index ``i`` with ``text_length(text[:i]) <= limit`` (code points are never split)."""
    end = min(len(text), max(0, limit))
    over = text_length(text[:end]) - limit
    while over > 0:
        # Characters are 1 or 2 units: dropping ceil(over / 2) of them lands close without overshooting.
        end -= (over + 1) // 2
        over = text_length(text[:end]) - limit
    return end


def cut(text: str, limit: int, marker: str = CUT_MARK, *, force: bool = False) -> str:
    """``text`` if it fits in ``limit`` UTF-16 units, else a prefix ending in ``marker`` that fits.

    Never cuts inside a character or an entity; closes a code fence left open by the cut. ``force`` adds
    the marker even when ``text`` fits (the caller already dropped the rest).
    """
    if not force and text_length(text) <= limit:
        return text
    room = limit - text_length(marker)
    if room <= 0:
        return marker[: _prefix_within(marker, limit)]
    end = _safe_end(text, _prefix_within(text, room))
    head = text[:end].rstrip()
    if head.count(_FENCE) % 2:
        tail = f"\n{_FENCE}\n{marker.lstrip()}"
        end = _safe_end(text, _prefix_within(text, max(0, limit - text_length(tail))))
        head = text[:end].rstrip()
        if head.count(_FENCE) % 2:
            return head + tail
    return head + marker


def split_for_sections(text: str, limit: int = 3000) -> list[str]:
    """Split converted text into pieces of at most ``limit`` units, at paragraph, line or word breaks.

    A code fence cut in two is closed at the end of one piece and reopened at the start of the next.
    Blank pieces are dropped, so every piece can be a section's text (min 1 character).
    """
    if limit < 16:
        raise ValueError(f"limit {limit} is too small to split text into sections; use at least 16")
    pieces: list[str] = []
    rest = text.strip()
    while text_length(rest) > limit:
        window = _prefix_within(rest, limit - len(_FENCE) - 1)
        end = -1
        for sep in ("\n\n", "\n", " "):
            found = rest.rfind(sep, 0, window)
            if found > window // 3:
                end = found
                break
        if end <= 0:
            end = _safe_end(rest, window) or window
        piece, rest = rest[:end].rstrip(), rest[end:].lstrip("\n ")
        if piece.count(_FENCE) % 2:
            piece += "\n" + _FENCE
            rest = _FENCE + "\n" + rest
        if piece.strip(" \n`"):
            pieces.append(piece)
    if rest.strip():
        pieces.append(rest)
    return pieces


# -- Markdown to mrkdwn ---------------------------------------------------------------------------------


@lru_cache(maxsize=256)  # the renderer tries several detail levels on the same texts
def to_mrkdwn(markdown: str) -> str:
    """Convert untrusted Markdown to safe Slack mrkdwn.

    Bold ``**x**`` -> ``*x*``, italics -> ``_x_``, strikethrough -> ``~x~``, inline and fenced code kept,
    headings -> a bold line, lists -> ``• `` bullets (numbers kept for ordered lists), block quotes ->
    ``&gt; `` lines, links ``[t](u)`` -> ``t (u)`` as plain text, images -> ``alt (src)``, tables -> rows of
    ``a | b``. Raw HTML is not interpreted: it is shown as text, escaped.
    """
    source = clean(markdown)
    if not source.strip():
        return ""
    tokens = _MD.parse(source)
    if max(token.level for token in tokens) >= _MAX_NESTING - 1:
        return _BLANK_LINES_RE.sub("\n\n", escape_mrkdwn(source)).strip()
    root = SyntaxTreeNode(tokens)
    out = _blocks(root.children, depth=0)
    return _BLANK_LINES_RE.sub("\n\n", out).strip()


def _blocks(nodes: list[SyntaxTreeNode], depth: int, *, tight: bool = False) -> str:
    parts = [_block(node, depth) for node in nodes]
    return ("\n" if tight else "\n\n").join(p for p in parts if p)


def _block(node: SyntaxTreeNode, depth: int) -> str:
    kind = node.type
    if kind == "paragraph":
        return _inline_children(node)
    if kind == "heading":
        text = one_line(_inline_children(node, False))
        return f"*{text}*" if text else ""
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, depth)
    if kind == "blockquote":
        inner = _blocks(node.children, depth)
        return "\n".join("&gt; " + line if line else "&gt;" for line in inner.split("\n"))
    if kind in ("fence", "code_block"):
        return _code_block(node.content)
    if kind == "hr":
        return "───────"
    if kind == "table":
        return _table(node)
    if kind == "html_block":
        return _escape(_defang(node.content.rstrip("\n")))
    return _blocks(node.children, depth)


def _code_block(content: str) -> str:
    # Slack has no way to escape a fence inside a fence; a joiner keeps three backticks from closing it.
    body = _escape(content.rstrip("\n")).replace(_FENCE, f"`{WORD_JOINER}``")
    return f"{_FENCE}\n{body or ' '}\n{_FENCE}"


def _list(node: SyntaxTreeNode, depth: int) -> str:
    ordered = node.type == "ordered_list"
    number = int(node.attrs.get("start", 1) or 1) if ordered else 0
    indent = "    " * depth
    lines: list[str] = []
    for item in node.children:
        marker = f"{number}." if ordered else _BULLETS[min(depth, len(_BULLETS) - 1)]
        number += 1
        body = _blocks(item.children, depth + 1, tight=True)
        first, *more = body.split("\n") if body else [""]
        lines.append(f"{indent}{marker} {first}".rstrip())
        lines.extend(
            line if line.startswith(indent + "    ") else f"{indent}    {line}" for line in more if line
        )
    return "\n".join(lines)


def _table(node: SyntaxTreeNode) -> str:
    rows: list[str] = []
    for section in node.children:
        for row in section.children:
            cells = [one_line(_inline_children(cell)) for cell in row.children]
            line = " | ".join(cells)
            if section.type == "thead" and line.strip():
                line = " | ".join(f"*{c}*" if c else c for c in cells)
            rows.append(line)
    return "\n".join(rows)


def _inline_children(node: SyntaxTreeNode, styled: bool = True) -> str:
    return "".join(_inline(child, styled) for child in node.children)


def _wrap(mark: str, inner: str, styled: bool) -> str:
    # Slack only styles a run whose markers touch non-space characters; keep spaces outside the markers.
    if not styled or not inner.strip():
        return inner
    stripped = inner.strip()
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    return f"{lead}{mark}{stripped}{mark}{trail}"


def _inline(node: SyntaxTreeNode, styled: bool) -> str:
    kind = node.type
    if kind == "text":
        return _escape(_defang(node.content))
    if kind in ("softbreak", "hardbreak"):
        return "\n"
    if kind == "code_inline":
        # Code stays copyable (no joiners); Slack does not link or style inside backticks.
        return "`" + _escape(node.content.replace("`", "ˋ")) + "`"
    if kind == "strong":
        return _wrap("*", _inline_children(node, styled), styled)
    if kind == "em":
        return _wrap("_", _inline_children(node, styled), styled)
    if kind == "s":
        return _wrap("~", _inline_children(node, styled), styled)
    if kind in ("link", "image"):
        label = _inline_children(node, styled)
        target = str(node.attrs.get("href" if kind == "link" else "src", ""))
        if node.markup == "autolink" or not target:
            return label
        shown = _escape(_defang(target))
        return f"{label} ({shown})" if label.strip() else shown
    if kind == "html_inline":
        return _escape(_defang(node.content))
    return _inline_children(node, styled)
