"""The playground's JSON endpoints and `slack-ask demo`, without a browser.

The page's endpoints are driven with aiohttp exactly as app.js calls them; each action must reach the real
bot as Slack's signed payload and end in one result on the agent's reply list.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from redis.asyncio import Redis

from bot.playground import demo
from bot.playground.demo import Playground, PortInUseError
from bot.playground.page import STATIC_DIR
from bot.storage.embedded import free_port

_T = TypeVar("_T")

ONE_CLICK = {
    "questions": [{"id": "ship", "question": "Ship it?", "options": ["Yes", "No"], "recommended": 0}]
}
TWO_QUESTIONS = {
    "questions": [
        {"id": "db", "question": "Database?", "options": ["Postgres", "MySQL"], "allowCustom": False},
        {"id": "features", "question": "Which features?", "options": ["Logging", "Tracing"], "multi": True},
    ]
}


@pytest.fixture
async def playground(redis: Redis, redis_url: str, prefix: str) -> AsyncIterator[Playground]:
    # Depends on `redis` so the prefix's keys are deleted after the playground stopped.
    running = Playground(redis_url=redis_url, prefix=prefix, port=0)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def eventually(probe: Callable[[], Awaitable[_T | None]], what: str, timeout: float = 10) -> _T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await probe()
        if found:
            return found
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


class PageClient:
    """The page's calls, as app.js makes them."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http = http
        self.url = url

    async def get(self, path: str) -> Any:
        async with self.http.get(self.url + path) as response:
            assert response.status == 200, await response.text()
            return await response.json()

    async def post(self, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        async with self.http.post(self.url + path, json=body) as response:
            data: dict[str, Any] = await response.json()
            assert response.status == status, data
            return data

    async def ask(self, request: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return await self.post("ui/ask", {"text": json.dumps(request), **fields})

    async def posted(self, channel: str = "C0DEPLOY", count: int = 1) -> list[dict[str, Any]]:
        async def probe() -> list[dict[str, Any]] | None:
            state = await self.get("ui/state")
            top = [m for m in state["messages"].get(channel, []) if m["thread_ts"] in (None, m["ts"])]
            return top if len(top) >= count else None

        return await eventually(probe, f"{count} message(s) in {channel}")

    async def result(self, ask_id: str) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            data = await self.get("ui/results")
            return next((r for r in data["results"] if r["ask_id"] == ask_id), None)

        return await eventually(probe, f"the result of {ask_id} in the results panel")

    async def open_view(self, user: str) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            state = await self.get("ui/state")
            stack = state["view_stacks"].get(user) or []
            return next((v for v in state["views"] if stack and v["id"] == stack[-1]), None)

        return await eventually(probe, f"a modal in front of {user}")


@pytest.fixture
def page(playground: Playground, http: aiohttp.ClientSession) -> PageClient:
    return PageClient(http, playground.url)


def button(message: dict[str, Any], action_id: str) -> dict[str, Any]:
    for block in message["blocks"]:
        for element in block.get("elements") or []:
            if element.get("action_id") == action_id:
                return {"block_id": block["block_id"], **element}
    raise AssertionError(f"no {action_id} in {message['blocks']}")


async def test_page_and_assets_are_served_from_the_playground_alone(page: PageClient) -> None:
    async with page.http.get(page.url) as response:
        assert response.status == 200
        html = await response.text()
    assert '<script src="/static/app.js"' in html and 'href="/static/app.css"' in html
    for name in ("app.js", "app.css"):
        async with page.http.get(f"{page.url}static/{name}") as response:
            assert response.status == 200
    # Offline: nothing the page loads comes from another host.
    for path in STATIC_DIR.iterdir():
        text = path.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), path.name
        assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import", text), path.name
    for outside in ("static/..%2Fdemo.py", "static/.hidden", "static/nothing.js"):
        async with page.http.get(page.url + outside) as response:
            assert response.status == 404, outside


async def test_state_says_unchanged_until_something_changes(page: PageClient, playground: Playground) -> None:
    state = await page.get("ui/state")
    assert {u["name"] for u in state["users"]} >= {"alice", "bob", "carol"}
    assert await page.get(f"ui/state?since={state['version']}") == {
        "version": state["version"],
        "unchanged": True,
    }
    await page.ask(ONE_CLICK)
    await page.posted()
    assert "unchanged" not in await page.get(f"ui/state?since={state['version']}")


async def test_a_click_on_the_page_answers_a_one_click_ask(page: PageClient, playground: Playground) -> None:
    sent = await page.ask(ONE_CLICK)
    assert sent["reply_to"] == playground.reply_to
    [message] = await page.posted()
    choose = button(message, "slack_ask:choose:1")
    answer = await page.post(
        "ui/click",
        {
            "user": "U0CAROL",
            "channel": "C0DEPLOY",
            "ts": message["ts"],
            "action_id": choose["action_id"],
            "block_id": choose["block_id"],
            "value": choose["value"],
        },
    )
    assert answer["ok"] and answer["status"] == 200
    result = await page.result(sent["ask_id"])
    assert result["outcome"] == "answered" and result["text"] == "User answers:\nship: No"
    assert result["responder"] == {"id": "U0CAROL", "name": "carol"}
    # The panel reads without taking: the agent still finds its one result on the list.
    raw = await playground.redis.lrange(playground.reply_to, 0, -1)
    assert [json.loads(r)["ask_id"] for r in raw] == [sent["ask_id"]]
    interaction = playground.fake.state.interactions[-1]
    assert interaction.type == "block_actions" and interaction.status == 200


async def test_a_form_submitted_from_the_page_carries_custom_text_and_notes(page: PageClient) -> None:
    sent = await page.ask(TWO_QUESTIONS)
    [message] = await page.posted()
    await page.post(
        "ui/click",
        {"user": "U0BOB", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:open"},
    )
    view = await page.open_view("U0BOB")
    values = {
        "answer:0": {"answer": "0"},
        "note:0": {"note": "the usual"},
        "answer:1": {"answer": ["0", "1"]},
        "custom:1": {"custom": "Profiling"},
        "note:1": {"note": None},
    }
    answer = await page.post("ui/submit", {"user": "U0BOB", "view_id": view["id"], "values": values})
    assert answer["ok"] and not (answer["response"] or {}).get("response_action")
    result = await page.result(sent["ask_id"])
    assert result["answers"] == [
        {"id": "db", "status": "answered", "selected": [0], "note": "the usual"},
        {"id": "features", "status": "answered", "selected": [0, 1], "customText": "Profiling"},
    ]
    assert (await page.get("ui/state"))["view_stacks"]["U0BOB"] == []


async def test_the_bots_field_errors_come_back_to_the_page_and_nothing_is_answered(
    page: PageClient, playground: Playground
) -> None:
    sent = await page.ask(
        {"questions": [{"id": "a", "question": "A?", "options": ["x", "y"]}, TWO_QUESTIONS["questions"][0]]}
    )
    [message] = await page.posted()
    await page.post(
        "ui/click",
        {"user": "U0ALICE", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:open"},
    )
    view = await page.open_view("U0ALICE")
    # Question a allows custom text, so Slack lets it go empty; the bot itself must refuse.
    answer = await page.post(
        "ui/submit", {"user": "U0ALICE", "view_id": view["id"], "values": {"answer:1": {"answer": "1"}}}
    )
    assert answer["response"]["response_action"] == "errors"
    assert set(answer["response"]["errors"]) == {"answer:0"}
    state = await page.get("ui/state")
    [still_open] = [v for v in state["views"] if v["id"] == view["id"]]
    assert set(still_open["errors"]) == {"answer:0"}
    assert await playground.redis.llen(playground.reply_to) == 0 and sent["ask_id"]


async def test_a_required_field_left_empty_is_refused_as_slack_would(page: PageClient) -> None:
    await page.ask(TWO_QUESTIONS)
    [message] = await page.posted()
    await page.post(
        "ui/click",
        {"user": "U0ALICE", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:open"},
    )
    view = await page.open_view("U0ALICE")
    refused = await page.post(
        "ui/submit", {"user": "U0ALICE", "view_id": view["id"], "values": {}}, status=409
    )
    assert "answer:0" in refused["error"] and "required" in refused["error"]


async def test_closing_a_modal_and_deleting_a_message_reach_the_bot(
    page: PageClient, playground: Playground
) -> None:
    sent = await page.ask(TWO_QUESTIONS)
    [message] = await page.posted()
    await page.post(
        "ui/click",
        {"user": "U0ALICE", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:open"},
    )
    view = await page.open_view("U0ALICE")
    assert (await page.post("ui/close", {"user": "U0ALICE", "view_id": view["id"]}))["ok"]
    assert (await page.get("ui/state"))["view_stacks"]["U0ALICE"] == []
    await page.post("ui/delete", {"channel": "C0DEPLOY", "ts": message["ts"]})
    result = await page.result(sent["ask_id"])
    assert result["outcome"] == "dismissed"


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        ("{not json", {}, "Not valid JSON"),
        ("[1, 2]", {}, "must be a JSON object"),
        (json.dumps({"questions": []}), {}, "Request (pi-question)"),
        (
            json.dumps({"title": "T", "questions": [{"prompt": "?", "type": "nope"}]}),
            {"format": "rich"},
            "rich",
        ),
        (json.dumps({"v": 2, "request": ONE_CLICK}), {}, "unsupported_version"),
        (json.dumps({"v": 1, "ask_id": "bad id!", "request": ONE_CLICK}), {}, "ask_id"),
    ],
)
async def test_a_bad_ask_is_refused_beside_the_form_and_never_sent(
    page: PageClient, playground: Playground, text: str, fields: dict[str, Any], expected: str
) -> None:
    refused = await page.post("ui/ask", {"text": text, **fields}, status=400)
    assert expected in refused["error"]
    assert await playground.redis.xlen(f"{playground.prefix}:asks") == 0


async def test_an_envelope_from_the_page_keeps_its_fields_and_its_reply_list_is_watched(
    page: PageClient, playground: Playground
) -> None:
    reply_to = f"{playground.prefix}:reply:agent-7"  # under P:, only P:reply: is for agents
    envelope = {
        "v": 1,
        "ask_id": "page-envelope-1",
        "reply_to": reply_to,
        "route": {"user": "U0BOB"},
        "request": ONE_CLICK,
    }
    # The form's route applies only to what the envelope leaves out.
    sent = await page.post("ui/ask", {"text": json.dumps(envelope), "channel": "C0DEPLOY"})
    assert sent["ask_id"] == "page-envelope-1" and sent["reply_to"] == reply_to
    [message] = await page.posted("D0BOB")
    await page.post(
        "ui/click",
        {"user": "U0BOB", "channel": "D0BOB", "ts": message["ts"], "action_id": "slack_ask:decline"},
    )
    view = await page.open_view("U0BOB")  # Decline opens its small modal; its reason is optional
    await page.post("ui/submit", {"user": "U0BOB", "view_id": view["id"], "values": {}})
    result = await page.result("page-envelope-1")
    assert result["outcome"] == "cancelled" and result["_list"] == reply_to
    assert reply_to in (await page.get("ui/results"))["lists"]


async def test_the_page_runs_the_workflow_step_and_the_bot_completes_it(
    page: PageClient, playground: Playground
) -> None:
    inputs = {"question": "Ship it?", "options": ["Yes", "No"], "channel": "C0DEPLOY"}
    started = await page.post("ui/step", {"inputs": inputs})
    assert started["ask_id"] == f"wf.{started['execution_id']}"
    [message] = await page.posted()
    await page.post(
        "ui/click",
        {"user": "U0ALICE", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:choose:0"},
    )
    execution = playground.fake.functions.executions[started["execution_id"]]

    async def completed() -> dict[str, Any] | None:
        return execution.outputs

    outputs = await eventually(completed, "the step's completion")
    assert (outputs["outcome"], outputs["choice"]) == ("answered", "Yes")
    refused = await page.post("ui/step", {"inputs": {**inputs, "options": "Yes"}}, status=409)
    assert "Slack would not run the step" in refused["error"]


async def test_form_fields_fill_responders_and_deadline_of_a_bare_request(
    page: PageClient, playground: Playground
) -> None:
    sent = await page.ask(
        ONE_CLICK, channel="C0INCIDENT", responders=["U0BOB", "S0ONCALL"], timeout_ms=600000
    )
    entries = await playground.redis.xrange(f"{playground.prefix}:asks")
    envelope = json.loads(entries[-1][1][b"ask"])
    assert envelope["ask_id"] == sent["ask_id"]
    assert envelope["route"] == {"channel": "C0INCIDENT"}
    assert envelope["responders"] == {"users": ["U0BOB"], "usergroups": ["S0ONCALL"]}
    assert envelope["timeout_ms"] == 600000


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"Origin": "http://evil.example"}, json.dumps({"text": json.dumps(ONE_CLICK)})),
        ({"Content-Type": "text/plain"}, json.dumps({"text": json.dumps(ONE_CLICK)})),
    ],
)
async def test_posts_that_are_not_the_pages_own_json_are_refused(
    page: PageClient, playground: Playground, headers: dict[str, str], body: str
) -> None:
    sent_headers = {"Content-Type": "application/json", **headers}
    async with page.http.post(page.url + "ui/ask", data=body, headers=sent_headers) as response:
        assert response.status == 403
    assert await playground.redis.xlen(f"{playground.prefix}:asks") == 0


async def test_an_explicit_port_that_is_taken_is_an_error_and_the_default_one_falls_back(
    redis: Redis, redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Playground(redis_url=redis_url, prefix=prefix, port=0)
    await first.start()
    try:
        taken = first.fake.port
        clash = Playground(redis_url=redis_url, prefix=prefix, port=taken)
        with pytest.raises(PortInUseError, match=f"port {taken}"):
            await clash.start()
        monkeypatch.setattr(demo, "DEFAULT_PORT", taken)
        fallback = Playground(redis_url=redis_url, prefix=prefix)
        await fallback.start()
        try:
            assert fallback.fake.port != taken
            assert (
                fallback.port_note == f"port {taken} is in use, so the playground took {fallback.fake.port}"
            )
        finally:
            await fallback.stop()
    finally:
        await first.stop()


# slack-ask demo as a process


def _demo_command() -> list[str]:
    script = Path(sys.executable).with_name("slack-ask")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("redis_source", ["REDIS_URL", "embedded"])
async def test_slack_ask_demo_serves_the_page_answers_the_sample_and_stops_on_ctrl_c(
    redis: Redis, redis_url: str, prefix: str, http: aiohttp.ClientSession, redis_source: str
) -> None:
    # A fresh clone: no Slack tokens at all, and (embedded) no REDIS_URL either.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_URL"))}
    if redis_source == "REDIS_URL":
        env["REDIS_URL"] = redis_url
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *_demo_command(),
        "demo",
        "--port",
        str(port),
        "--prefix",
        prefix,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        async with asyncio.timeout(60):  # the bound: the page within a minute
            while not any(line.startswith("Playground: ") for line in lines):
                raw = await process.stdout.readline()
                assert raw, f"slack-ask demo exited early: {''.join(lines)}"
                lines.append(raw.decode())
        url = next(line for line in lines if line.startswith("Playground: ")).split(" ", 1)[1].strip()
        assert url == f"http://127.0.0.1:{port}/"
        redis_line = next(line for line in lines if line.startswith("Redis: "))
        if redis_source == "embedded":
            assert re.match(
                r"Redis: (embedded redis-server|fakeredis \(no redis-server installed\))", redis_line
            )
        else:
            assert redis_line.startswith("Redis: REDIS_URL")
        page = PageClient(http, url)
        async with http.get(url) as response:
            assert response.status == 200
        messages = await page.posted(count=2)
        one_click = next(m for m in messages if any("slack_ask:choose:0" in str(b) for b in m["blocks"]))
        choose = button(one_click, "slack_ask:choose:0")
        click = {"user": "U0ALICE", "channel": "C0DEPLOY", "ts": one_click["ts"], "value": choose["value"]}
        await page.post("ui/click", {**click, "action_id": "slack_ask:choose:0"})

        async def answered() -> dict[str, Any] | None:
            data = await page.get("ui/results")
            return next((r for r in data["results"] if r["outcome"] == "answered"), None)

        result = await eventually(answered, "the sample ask's result")
        assert result["responder"]["id"] == "U0ALICE"

        # The "Ask from another shell" line works as pasted, in a shell whose PATH has no venv.
        async with asyncio.timeout(30):
            while not any(line.startswith("Press Ctrl-C") for line in lines):
                raw = await process.stdout.readline()
                assert raw, f"slack-ask demo exited early: {''.join(lines)}"
                lines.append(raw.decode())
        pasted = lines[next(i for i, line in enumerate(lines) if line.startswith("Ask from")) + 1].strip()
        shell = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            f"{pasted} --timeout 1s",
            env={"PATH": "/usr/bin:/bin", "HOME": env.get("HOME", "/tmp")},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(30):
            printed, _ = await shell.communicate()
        assert shell.returncode == 4, printed.decode()  # it ran, asked, and timed out (exit 4)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(30):
                rest, _ = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
    output = "".join(lines) + rest.decode()
    assert process.returncode == 0, output
    assert "Stopping..." in output and "Traceback" not in output


async def test_the_form_sends_an_approval_ask_and_the_message_shows_the_tally(
    page: PageClient, playground: Playground
) -> None:
    request = {"questions": [{"id": "deploy", "question": "Deploy v2?", "options": ["Approve", "Reject"]}]}
    sent = await page.ask(request, channel="C0DEPLOY", approvals=2, veto="1", requester="carol@example.com")
    entries = await playground.redis.xrange(f"{playground.prefix}:asks")
    envelope = json.loads(entries[-1][1][b"ask"])
    assert envelope["approval"] == {"count": 2, "veto": [1]}
    assert envelope["requester"] == {"user": "carol@example.com"}
    [message] = await page.posted()
    await page.post(
        "ui/click",
        {"user": "U0ALICE", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:choose:0"},
    )

    async def tally() -> str | None:
        [current] = await page.posted()
        text = json.dumps(current["blocks"], ensure_ascii=False)
        return text if "*Approve*: 1 of 2 · alice" in text else None

    await eventually(tally, "the tally on the message")
    await page.post(
        "ui/click",
        {"user": "U0BOB", "channel": "C0DEPLOY", "ts": message["ts"], "action_id": "slack_ask:choose:0"},
    )
    result = await page.result(sent["ask_id"])
    assert result["outcome"] == "answered" and [v["user"]["id"] for v in result["votes"]] == [
        "U0ALICE",
        "U0BOB",
    ]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"veto": "1"}, "a veto needs approvals"),
        ({"approvals": 2, "veto": "Reject"}, "is not an option index"),
        ({"approvals": 2, "veto": "7"}, "approval.veto: 7 is not an option"),
        ({"approvals": 1}, "approval.count"),
    ],
)
async def test_a_broken_approval_is_refused_beside_the_form(
    page: PageClient, playground: Playground, fields: dict[str, Any], error: str
) -> None:
    request = {"questions": [{"id": "deploy", "question": "Deploy v2?", "options": ["Approve", "Reject"]}]}
    refused = await page.post("ui/ask", {"text": json.dumps(request), **fields}, status=400)
    assert error in refused["error"]
    assert await playground.redis.xlen(f"{playground.prefix}:asks") == 0


async def test_a_reply_typed_in_the_page_answers_the_ask_in_its_thread(page: PageClient) -> None:
    sent = await page.ask(TWO_QUESTIONS)
    [message] = await page.posted()
    typed = await page.post(
        "ui/reply", {"user": "U0ALICE", "channel": "C0DEPLOY", "thread_ts": message["ts"], "text": "nope"}
    )
    assert typed["ok"] and typed["ts"]  # two questions and a line naming neither: nothing recorded
    first = TWO_QUESTIONS["questions"][0]["id"]
    second = TWO_QUESTIONS["questions"][1]["id"]
    text = f"{first}: 1\n{second}: 1"
    await page.post(
        "ui/reply", {"user": "U0ALICE", "channel": "C0DEPLOY", "thread_ts": message["ts"], "text": text}
    )
    result = await page.result(sent["ask_id"])
    assert result["outcome"] == "answered" and result["via"] == "thread"


async def test_a_person_opens_their_home_tab_in_the_page_and_answers_from_it(
    page: PageClient, playground: Playground
) -> None:
    sent = await page.ask(ONE_CLICK, responders=["U0CAROL"])
    await page.posted()

    async def home_of(user: str, shows: str) -> dict[str, Any] | None:
        state = await page.get("ui/state")
        home = state["homes"].get(user)
        return home if home is not None and shows in json.dumps(home["view"]) else None

    opened = await page.post("ui/home_open", {"user": "U0CAROL"})
    assert opened["ok"] and opened["status"] == 200
    home = await eventually(lambda: home_of("U0CAROL", "Ship it?"), "carol's Home tab listing the ask")
    choose = button(home["view"], "slack_ask:choose:0")
    answer = await page.post(
        "ui/home_click",
        {
            "user": "U0CAROL",
            "action_id": choose["action_id"],
            "block_id": choose["block_id"],
            "value": choose["value"],
        },
    )
    assert answer["ok"] and answer["status"] == 200
    result = await page.result(sent["ask_id"])
    assert result["outcome"] == "answered" and result["responder"]["id"] == "U0CAROL"
    assert result["via"] == "home"
    # The row goes; someone not named is never shown the ask on a tab of theirs.
    await eventually(lambda: home_of("U0CAROL", "Nothing is waiting"), "carol's emptied Home tab")
    await page.post("ui/home_open", {"user": "U0ALICE"})
    alice = await eventually(lambda: home_of("U0ALICE", "Nothing is waiting"), "alice's Home tab")
    assert "Ship it?" not in json.dumps(alice["view"])
