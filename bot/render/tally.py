"""Approvals (protocol section 13): the live tally on a pending ask, and who voted what once it ended.

Voters are shown by name, never as mentions: a tally is redrawn at every vote, and a mention in it
would notify everyone named again each time. Names are untrusted text (a Slack profile), so they are
escaped like any other.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.model import AskRecord
from bot.render.mrkdwn import cut
from bot.render.shared import inline
from contract.approval import tally
from contract.envelopes import ResultVote

__all__ = ["approval_about", "ended_votes_lines", "tally_text", "voter_name"]

Votes = Sequence[ResultVote]


def voter_name(vote: ResultVote) -> str:
    """The name a vote shows: the user's name, else their id (never a mention)."""
    return inline(vote.user.name or vote.user.id or "someone", 80)


def _labels(ask: AskRecord) -> list[str]:
    if ask.request is None or not ask.request.questions:
        return []
    return [o.label for o in ask.request.questions[0].options]


def approval_about(ask: AskRecord) -> str | None:
    """One context line saying what it takes to decide (None for asks without approval)."""
    approval = ask.approval
    if approval is None:
        return None
    labels = _labels(ask)
    parts = [f"Needs *{approval.count}* people to agree"]
    vetoes = [inline(labels[i], 60) for i in approval.veto if 0 <= i < len(labels)]
    if vetoes:
        parts.append("one vote for " + " or ".join(f"*{v}*" for v in vetoes) + " ends it at once")
    if approval.exclude_requester and ask.requester is not None and ask.requester.user:
        parts.append("the requester may not vote")
    parts.append("you may change your vote until it ends")
    return " · ".join(parts)


def tally_text(ask: AskRecord, votes: Votes) -> str:
    """Per option, one line: votes so far of how many needed, and who (pending asks)."""
    approval = ask.approval
    if approval is None:
        return ""
    labels = _labels(ask)
    lines: list[str] = []
    for i, voters in enumerate(tally(votes, len(labels))):
        needed = 1 if i in approval.veto else approval.count
        names = ", ".join(voter_name(v) for v in voters) or "no votes yet"
        veto = " (veto)" if i in approval.veto else ""
        lines.append(f"*{inline(labels[i], 75)}*{veto}: {len(voters)} of {needed} · {names}")
    return cut("\n".join(lines), 2900)


def ended_votes_lines(ask: AskRecord, votes: Votes) -> list[str]:
    """Who voted what, in the order the final votes were cast (ended asks)."""
    labels = _labels(ask)
    lines: list[str] = []
    for vote in votes:
        index = vote.selected[0] if vote.selected else None
        label = labels[index] if index is not None and 0 <= index < len(labels) else "?"
        lines.append(f"{voter_name(vote)}: {inline(label, 75)}")
    return lines
