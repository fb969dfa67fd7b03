"""The pure parts of the App Home tab (docs/home.md): who an ask waits for, and the view drawn."""

from __future__ import annotations

import json
from typing import Any

from bot.home import (
    HOME_PAGE_SIZE,
    AskedRow,
    HomeData,
    RecentRow,
    WaitingRow,
    indexes_anyone,
    named_on,
    waits_for,
)
from bot.ids import AskRef
from bot.model import AskRecord, Target
from bot.render.home import HomeMeta, render_home
from bot.slack.blockkit import validate_view
from contract.envelopes import (
    Approval,
    EscalationStep,
    Requester,
    Responders,
    ResultResponder,
    ResultVote,
    Route,
)
from contract.question import AskRequest, Option, Question

NOW = 1_800_000_000_000
HOSTILE = "<!channel> <@U0EVIL> <https://evil.example|click> *bold* &amp; <!subteam^S0X>"


def _rec(
    ask_id: str = "a1", *, deadline: int | None = NOW + 60_000, options: int = 2, **fields: Any
) -> AskRecord:
    question = Question(
        id="q",
        question=fields.pop("text", f"Question {ask_id}?"),
        options=[Option(label=f"O{i}") for i in range(options)],
    )
    return AskRecord(
        ask_id=ask_id,
        tag="t1",
        reply_to="r",
        request=AskRequest(questions=[question]),
        created_ms=NOW - 1000,
        deadline_ms=deadline,
        **fields,
    )


def _none(_: str) -> frozenset[str] | None:
    return frozenset()


def _row_ids(view: dict[str, Any]) -> list[str]:
    order: list[str] = []
    for block in view["blocks"]:
        for element in block.get("elements") or []:
            ref = AskRef.decode(str(element.get("value") or ""))
            if ref is not None and ref.ask_id not in order:
                order.append(ref.ask_id)
    return order


def test_who_an_ask_waits_for_responders_groups_dm_and_steps_reached() -> None:
    members = {"S0ONCALL": frozenset({"U0BOB"})}.get
    rec = _rec(responders=Responders(users=["U0ALICE"], usergroups=["S0ONCALL"]))
    assert waits_for(rec, 0, "U0ALICE", members, indexed=False)
    assert waits_for(rec, 0, "U0BOB", members, indexed=False)
    assert not waits_for(rec, 0, "U0CAROL", members, indexed=True)  # the index is only a hint
    # A channel ask without responders waits for nobody in particular.
    assert not waits_for(_rec(route=Route(channel="C1")), 0, "U0ALICE", _none, indexed=True)
    dm = _rec(route=Route(user="U0ALICE"), target=Target(channel="D1", user="U0ALICE"))
    assert waits_for(dm, 0, "U0ALICE", _none, indexed=False)
    stepped = _rec(
        route=Route(channel="C1"),
        escalate=[
            EscalationStep(after_ms=1, channel="C2", mention=["U0CAROL"]),
            EscalationStep(after_ms=2, user="U0DAN"),
        ],
    )
    assert not waits_for(stepped, 0, "U0CAROL", _none, indexed=True)  # the step is not reached yet
    assert waits_for(stepped, 1, "U0CAROL", _none, indexed=True)
    assert not waits_for(stepped, 1, "U0DAN", _none, indexed=True)
    assert waits_for(stepped, 2, "U0DAN", _none, indexed=True)
    assert named_on(stepped).users == {"U0CAROL", "U0DAN"}  # the index names every step up front
    # A group member not known right now: the person's own index decides.
    unknown = _rec(responders=Responders(usergroups=["S0ONCALL"]))
    assert waits_for(unknown, 0, "U0BOB", lambda _: None, indexed=True)
    assert not waits_for(unknown, 0, "U0BOB", lambda _: None, indexed=False)
    # An approval's requester may not vote: it is "Asked for you" for them, not waiting.
    approval = _rec(
        responders=Responders(users=["U0ALICE", "U0BOB"]),
        approval=Approval(count=2),
        requester=Requester(user="U0ALICE"),
    )
    assert not waits_for(approval, 0, "U0ALICE", _none, indexed=True)
    assert waits_for(approval, 0, "U0BOB", _none, indexed=True)


def test_an_ask_indexes_anyone_it_names_or_a_requester_who_is_a_user() -> None:
    # What resolve.lua relies on to skip the read of the ask's own set of indexed people: nobody is
    # named, and no requester is a user.
    assert not indexes_anyone(_rec(route=Route(channel="C1")))
    assert not indexes_anyone(_rec(route=Route(channel="C1"), requester=Requester(user="ci@example.com")))
    assert indexes_anyone(_rec(route=Route(channel="C1"), requester=Requester(user="U0ALICE")))
    assert indexes_anyone(_rec(responders=Responders(usergroups=["S0ONCALL"])))
    assert indexes_anyone(_rec(route=Route(user="dev@example.com")))
    stepped = _rec(
        route=Route(channel="C1"), escalate=[EscalationStep(after_ms=1, channel="C2", mention=["U0CAROL"])]
    )
    assert indexes_anyone(stepped)


def test_empty_state_says_what_the_tab_is_for() -> None:
    view = render_home(HomeData(user="U1"), page=0, now_ms=NOW)
    text = json.dumps(view)
    assert view["type"] == "home" and validate_view(view) == []
    assert (
        "Nothing is waiting for you" in text and "asks agents" not in text and "questions agents ask" in text
    )


def test_rows_soonest_first_with_buttons_requester_link_and_time_left() -> None:
    rows = [
        WaitingRow(_rec("late", deadline=NOW + 7_200_000), 0, []),
        WaitingRow(_rec("none", deadline=None), 0, []),
        WaitingRow(
            _rec("soon", deadline=NOW + 300_000, requester=Requester(name="deploy-bot", session="s-42")),
            0,
            [],
        ),
    ]
    links = {"soon": "https://fake.slack.com/archives/C1/p1700000000000100"}
    view = render_home(HomeData(user="U1", waiting=rows), page=0, now_ms=NOW, links=links)
    text = json.dumps(view, ensure_ascii=False)
    assert _row_ids(view) == ["soon", "late", "none"]
    assert "Waiting for you: 3" in text and "deploy-bot · session s-42" in text
    assert "<https://fake.slack.com/archives/C1/p1700000000000100|open the message>" in text
    assert "5 min left" in text and "2 h 0 min left" in text and "no deadline" in text
    assert "slack_ask:choose:0" in text and "slack_ask:decline" in text


def test_hostile_text_makes_no_mention_or_link_anywhere_on_the_tab() -> None:
    rec = _rec("h", text=HOSTILE, requester=Requester(name=HOSTILE, session=HOSTILE, user="U0ALICE"))
    data = HomeData(
        user="U0ALICE",
        waiting=[WaitingRow(rec, 0, [])],
        asked=[AskedRow(rec, 0, [])],
        recent=[RecentRow(rec, "answered", "U0ALICE", NOW)],
        notice=HOSTILE,
    )
    view = render_home(data, page=0, now_ms=NOW, links={"h": "https://evil.example/|<!here>"})
    text = json.dumps(view)
    for token in ("<!channel>", "<@U0EVIL>", "<https://evil", "<!subteam", "<!here>"):
        assert token not in text
    assert validate_view(view) == []


def test_an_approval_row_shows_the_tally_and_the_person_s_vote() -> None:
    rec = _rec("v", approval=Approval(count=2))
    vote = ResultVote(
        user=ResultResponder(id="U1", name="alice"), selected=[1], at="2027-01-01T00:00:00.000Z"
    )
    text = json.dumps(
        render_home(HomeData(user="U1", waiting=[WaitingRow(rec, 0, [], [vote])]), page=0, now_ms=NOW),
        ensure_ascii=False,
    )
    assert "you voted *O1*" in text and "1 of 2 · alice" in text
    other = json.dumps(
        render_home(HomeData(user="U2", waiting=[WaitingRow(rec, 0, [], [vote])]), page=0, now_ms=NOW)
    )
    assert "you have not voted yet" in other


def test_forty_heavy_rows_page_within_slack_s_limits() -> None:
    # The heaviest rows there are: approvals with twelve options, plus full "Asked for you" and recent.
    waiting = [
        WaitingRow(_rec(f"w{i:02}", deadline=NOW + i * 1000, options=12, approval=Approval(count=3)), 0, [])
        for i in range(40)
    ]
    asked = [AskedRow(_rec(f"r{i}"), 0, []) for i in range(12)]
    recent = [RecentRow(_rec(f"d{i}", text="x" * 500), "timeout", None, NOW) for i in range(10)]
    data = HomeData(user="U1", waiting=waiting, asked=asked, recent=recent)
    seen: list[str] = []
    for page in range(3):
        view = render_home(data, page=page, now_ms=NOW)
        assert validate_view(view) == [] and len(view["blocks"]) <= 100
        assert len(view["private_metadata"]) <= 3000 and HomeMeta.decode(view["private_metadata"]) == page
        ids = [i for i in _row_ids(view) if i.startswith("w")]
        assert len(ids) == (HOME_PAGE_SIZE if page < 2 else 10)
        seen += ids
    assert seen == [w.record.ask_id for w in waiting]
    # Past the last page: the last page.
    assert HomeMeta.decode(render_home(data, page=99, now_ms=NOW)["private_metadata"]) == 2


def test_page_metadata_from_anyone_is_read_safely() -> None:
    for junk in ("", "[]", '{"p": -1}', '{"p": "2"}', "not json", '{"p": 1e9}'):
        assert HomeMeta.decode(junk) == 0
    assert HomeMeta.decode(HomeMeta.encode(3)) == 3
