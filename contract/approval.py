"""Pure: the rules of protocol section 13 (approvals) that need the normalized question.

The envelope model checks what the envelope alone decides (``count`` 2..20, ``veto`` indexes
distinct and non-negative, a ``pi-question`` format, no ``on_timeout: "recommended"``).
:func:`approval_problem` checks the rest once the request is normalized and any named policy is
merged in, so a policy's ``approval`` or ``on_timeout`` is held to the same rules. Each message
names the rule it breaks, and the bot returns it as ``invalid_envelope``.
"""

from __future__ import annotations

from collections.abc import Sequence

from contract.envelopes import APPROVAL_NO_DEFAULT, APPROVAL_NOT_RICH, Approval, ResultVote
from contract.question import AskRequest

__all__ = ["approval_problem", "tally"]


def approval_problem(
    approval: Approval, *, format: str, request: AskRequest | None, on_timeout: str | None
) -> str | None:
    """The first section-13 rule ``approval`` breaks for this ask, or None when it is allowed."""
    if format != "pi-question" or request is None:
        return f"approval: {APPROVAL_NOT_RICH}"
    if on_timeout == "recommended":
        return f"approval: {APPROVAL_NO_DEFAULT}"
    if len(request.questions) != 1:
        return f"approval: an approval ask has exactly one question (this one has {len(request.questions)})"
    question = request.questions[0]
    if question.multi is True:
        return "approval: the question of an approval ask must be single choice (multi is true)"
    options = len(question.options)
    for index in approval.veto:
        if index >= options:
            return f"approval.veto: {index} is not an option of the question (options are 0 to {options - 1})"
    return None


def tally(votes: Sequence[ResultVote], options: int) -> list[list[ResultVote]]:
    """The votes (as in a result's ``votes``) grouped by option: ``tally(...)[i]`` voted for i."""
    by_option: list[list[ResultVote]] = [[] for _ in range(options)]
    for vote in votes:
        first = vote.selected[0] if vote.selected else None
        if first is not None and 0 <= first < options:
            by_option[first].append(vote)
    return by_option
