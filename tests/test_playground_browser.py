"""The playground page in a real browser: Debian's Chromium driven by Playwright, the real bot behind it.

Each test starts the same `Playground` that `slack-ask demo` runs, acts in the page as a person would, and
checks the one result on the agent's reply list. Screenshots go to test-artifacts/ (git-ignored).

Chromium comes from the system (`apt-get install chromium`), never from a Playwright download. Without it
the tests are skipped with the reason, except in CI (`CI=true`), where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from redis.asyncio import Redis

from bot.playground.demo import Playground

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

# One worker runs the module (pytest-xdist): one Chromium at a time, on a machine of two cores.
pytestmark = [pytest.mark.browser, pytest.mark.timeout(120), pytest.mark.xdist_group("chromium")]

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"  # Debian's package; Playwright's own browser downloads are never used
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 15_000  # for anything that needs the bot and a poll of the page


def _chromium() -> str:
    """Debian's Chromium, or skip (fail in CI) saying why there is none."""
    found = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    reason = None
    if found is None:
        reason = "no Chromium on this machine (install Debian's: apt-get install chromium)"
    else:
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            reason = "the playwright Python package is not installed (pip install -e '.[dev]')"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests, but {reason}")
        pytest.skip(reason)
    assert found is not None
    return found


@pytest.fixture
async def playground(
    request: pytest.FixtureRequest, redis: Redis, redis_url: str, prefix: str
) -> AsyncIterator[Playground]:
    # Depends on `redis` so every key under the test's prefix is deleted once the playground stopped.
    # Indirect parametrization passes bot settings, e.g. {"min_remind_ms": 0}.
    settings = getattr(request, "param", None)
    running = Playground(redis_url=redis_url, prefix=prefix, port=0, settings=settings)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    executable = _chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh profile per test
            executable_path=executable,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 900},
        )
        try:
            yield context
        finally:
            await context.close()


class PageProblems:
    """Script errors, failed loads and requests to any other host (the page must work offline)."""

    def __init__(self, page: Page, origin: str) -> None:
        self.seen: list[str] = []
        page.on("pageerror", lambda error: self.seen.append(f"page error: {error}"))
        page.on("console", self._console)
        page.on("request", lambda request: self._request(request.url, origin))
        page.on("requestfailed", lambda request: self.seen.append(f"failed: {request.url} {request.failure}"))
        page.on("response", self._response)

    def _console(self, msg: Any) -> None:
        # A 4xx from /ui/ is an answer the page shows (a bad ask); other failed loads are caught below.
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            self.seen.append(f"console: {msg.text}")

    def _request(self, url: str, origin: str) -> None:
        if not url.startswith((origin, "data:")):
            self.seen.append(f"request to another host: {url}")

    def _response(self, response: Any) -> None:
        if response.status >= 400 and "/ui/" not in response.url:
            self.seen.append(f"HTTP {response.status}: {response.url}")


@pytest.fixture
async def page(browser: BrowserContext, playground: Playground) -> AsyncIterator[Page]:
    page = browser.pages[0] if browser.pages else await browser.new_page()
    page.set_default_timeout(WAIT_MS)
    problems = PageProblems(page, playground.url)
    await page.goto(f"{playground.url}?as=U0ALICE#C0DEPLOY")
    await page.locator("#connection", has_text="Live").wait_for()
    yield page
    assert problems.seen == []


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_without_chromium_the_browser_tests_skip_with_the_reason_but_fail_in_ci(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="apt-get install chromium"):
        _chromium()


def shot(name: str) -> str:
    ARTIFACTS.mkdir(exist_ok=True)
    return str(ARTIFACTS / f"{name}.png")


async def results_on_queue(playground: Playground, reply_to: str | None = None) -> list[dict[str, Any]]:
    """What the agent finds on its reply list (read without taking it off)."""
    raw = await playground.redis.lrange(reply_to or playground.reply_to, 0, -1)
    return [json.loads(item) for item in raw]


def message(page: Page, text: str) -> Any:
    """The channel message (not a thread reply) that shows `text`."""
    return page.locator("#messages > li.msg", has_text=text)


async def focused(page: Page, predicate: str) -> bool:
    """Whether the focused element `el` satisfies the JS expression `predicate`."""
    return bool(
        await page.evaluate(
            f"(() => {{ const el = document.activeElement; return Boolean({predicate}); }})()"
        )
    )


async def tab_to(page: Page, predicate: str, what: str, limit: int = 60, key: str = "Tab") -> None:
    """Press Tab (or `key`) until the focused element satisfies `predicate` (see `focused`): no clicks."""
    for _ in range(limit):
        await page.keyboard.press(key)
        if await focused(page, predicate):
            return
    raise AssertionError(f"{limit} presses of Tab never reached {what}")


def labelled(text: str) -> str:
    return f"el.labels && el.labels[0] && el.labels[0].textContent.includes({json.dumps(text)})"


def in_block(block_id: str) -> str:
    return f"el.closest('[data-input-block]')?.dataset.inputBlock === {json.dumps(block_id)}"


async def test_one_click_answer_in_the_page_reaches_the_agent(page: Page, playground: Playground) -> None:
    deploy_id, one_click_id = await playground.send_samples()
    one_click = message(page, "Roll it back?")
    await one_click.get_by_role("button", name="Roll back").wait_for()
    await message(page, "Deploy build 1.4.2").get_by_role("button", name="Answer…").wait_for()
    # Dates come as <!date^…> tokens and are shown in the reader's time zone, not as the UTC fallback.
    deadline = one_click.locator("time.md-date")
    assert "UTC" not in (await deadline.inner_text()) and "Slack's fallback" in (
        await deadline.get_attribute("title") or ""
    )
    await page.screenshot(path=shot("posted"))

    await one_click.get_by_role("button", name="Roll back").click()

    card = page.locator(f'.result[data-ask-id="{one_click_id}"]')
    await card.wait_for()
    assert await card.get_attribute("data-outcome") == "answered"
    await page.locator('#messages > li.msg:has-text("Roll it back?"):has-text("Answered by")').wait_for()
    assert await one_click.get_by_role("button").filter(has_text="Roll back").count() == 0
    await page.screenshot(path=shot("one-click-answered"))

    [result] = await results_on_queue(playground)
    assert result["ask_id"] == one_click_id and result["outcome"] == "answered"
    assert result["answers"] == [{"id": "rollback", "status": "answered", "selected": [0]}]
    assert result["responder"] == {"id": "U0ALICE", "name": "alice"}
    assert result["text"] in await card.inner_text()
    assert deploy_id != one_click_id


async def test_a_multi_question_form_filled_by_keyboard_alone(page: Page, playground: Playground) -> None:
    [deploy_id, _] = await playground.send_samples()
    await message(page, "Deploy build 1.4.2").get_by_role("button", name="Answer…").wait_for()
    await page.locator("body").focus()

    await tab_to(page, "el.textContent === 'Answer…'", "the Answer… button")
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Answer the questions")
    await dialog.wait_for()
    assert await focused(page, "el.closest('[role=dialog]')"), "focus moves into the modal"
    # Escape closes it and gives focus back to the button that opened it; Enter opens it again.
    await page.keyboard.press("Escape")
    await dialog.wait_for(state="detached")
    assert await focused(page, "el.textContent === 'Answer…'")
    await page.keyboard.press("Enter")
    await dialog.wait_for()

    # Submitting with nothing chosen is stopped beside the field, as Slack's client does.
    await tab_to(page, "el.matches('[data-modal-submit]')", "Submit")
    await page.keyboard.press("Enter")
    await dialog.get_by_text("Please complete this required field.").wait_for()
    assert await focused(page, in_block("answer:0")), "focus goes to the first field in error"

    await tab_to(page, labelled("Deploy now"), "the Deploy now radio button")
    await page.keyboard.press("Space")
    # Q2 allows custom text, so Slack lets it go empty; the bot refuses it with `response_action: errors`,
    # shown beside the question.
    await tab_to(page, "el.matches('[data-modal-submit]')", "Submit")
    await page.keyboard.press("Enter")
    q2 = dialog.locator('[data-input-block="answer:1"]')
    await q2.get_by_text("Pick an option or type your own answer below.").wait_for()
    await dialog.get_by_text("Please complete this required field.").wait_for(state="hidden")
    assert await focused(page, in_block("answer:1")), "focus goes to the field the bot refused"
    await page.screenshot(path=shot("form-bot-error"))
    assert await results_on_queue(playground) == []

    await tab_to(page, in_block("note:0"), "the note of Q1, going back", key="Shift+Tab")
    await page.keyboard.type("Watch the error rate for an hour")
    await tab_to(page, labelled("Smoke tests"), "the Smoke tests checkbox")
    await page.keyboard.press("Space")
    await tab_to(page, labelled("Canary at 5%"), "the Canary checkbox")
    await page.keyboard.press("Space")
    await tab_to(page, in_block("custom:1"), "the custom answer of Q2")
    await page.keyboard.type("Load test checkout")
    await tab_to(page, in_block("note:1"), "the note of Q2")
    await page.keyboard.type("In this order, please")
    await page.screenshot(path=shot("form-filled"))
    await tab_to(page, "el.matches('[data-modal-submit]')", "Submit")
    await page.keyboard.press("Enter")

    await dialog.wait_for(state="detached")
    card = page.locator(f'.result[data-ask-id="{deploy_id}"]')
    await card.wait_for()
    # Focus goes back to the conversation, not to the top of the page.
    assert await focused(page, "el.closest('#messages')")
    await page.screenshot(path=shot("form-answered"))

    [result] = await results_on_queue(playground)
    assert result["outcome"] == "answered" and result["responder"]["id"] == "U0ALICE"
    assert result["answers"] == [
        {"id": "deploy", "status": "answered", "selected": [0], "note": "Watch the error rate for an hour"},
        {
            "id": "checks",
            "status": "answered",
            "selected": [0, 2],
            "customText": "Load test checkout",
            "note": "In this order, please",
        },
    ]
    assert result["text"] == (
        'User answers:\ndeploy: Deploy now\nchecks: [Smoke tests, Canary at 5%] + Other: "Load test checkout"'
    )


async def test_someone_not_allowed_is_told_privately_then_the_allowed_person_answers(
    page: Page, playground: Playground
) -> None:
    # The ask is sent from the page's own form, as a bare request with "Who may answer: only bob".
    form = page.locator("#ask-form")
    await form.get_by_role("button", name="One click").click()
    await form.get_by_label("Who may answer").select_option("U0BOB")
    await form.get_by_label("Post to").select_option("C0DEPLOY")
    await form.get_by_role("button", name="Send ask").click()
    confirmation = form.locator("#ask-ok", has_text="Sent")
    await confirmation.wait_for()
    sent = await confirmation.inner_text()
    ask_id = sent.split()[1].rstrip(";")

    ask = message(page, "Ship hotfix 1.4.3 now?")
    await ask.get_by_role("button", name="Ship it").click()
    note = page.locator("#messages li.msg.ephemeral", has_text="Only visible to you")
    await note.wait_for()
    assert "for someone else" in await note.inner_text()
    await page.screenshot(path=shot("not-allowed"))
    assert await results_on_queue(playground) == []
    assert await ask.get_by_role("button", name="Ship it").count() == 1

    # Bob does not see Alice's private note; his click counts.
    await page.get_by_label("Acting as").select_option("U0BOB")
    await note.wait_for(state="detached")
    await ask.get_by_role("button", name="Ship it").click()
    card = page.locator(f'.result[data-ask-id="{ask_id}"]')
    await card.wait_for()
    await page.screenshot(path=shot("allowed-answered"))

    [result] = await results_on_queue(playground)
    assert result["ask_id"] == ask_id and result["outcome"] == "answered"
    assert result["responder"] == {"id": "U0BOB", "name": "bob"}
    assert result["answers"] == [{"id": "hotfix", "status": "answered", "selected": [0]}]


async def test_the_home_tab_lists_only_the_asks_for_the_person_acting_and_answers_from_there(
    page: Page, playground: Playground
) -> None:
    form = page.locator("#ask-form")
    await form.get_by_role("button", name="One click").click()
    await form.get_by_label("Who may answer").select_option("U0BOB")
    await form.get_by_role("button", name="Send ask").click()
    confirmation = form.locator("#ask-ok", has_text="Sent")
    await confirmation.wait_for()
    ask_id = (await confirmation.inner_text()).split()[1].rstrip(";")
    await message(page, "Ship hotfix 1.4.3 now?").wait_for()

    # Alice opens her Home tab: the ask is for bob only, so she is told what the tab is for.
    home_link = page.locator("#app-list button")
    await home_link.click()
    home = page.locator("#messages li.msg.home")
    await home.get_by_text("Nothing is waiting").wait_for()
    assert "Ship hotfix" not in await home.inner_text()

    # Bob's tab lists it, with its buttons; a click there answers it, via the Home tab.
    await page.get_by_label("Acting as").select_option("U0BOB")
    await home.get_by_text("Ship hotfix 1.4.3 now?").wait_for()
    await page.screenshot(path=shot("home-tab"))
    await home.get_by_role("button", name="Ship it").click()
    card = page.locator(f'.result[data-ask-id="{ask_id}"]')
    await card.wait_for()
    await home.get_by_text("Nothing is waiting").wait_for()

    [result] = await results_on_queue(playground)
    assert result["ask_id"] == ask_id and result["outcome"] == "answered"
    assert result["responder"] == {"id": "U0BOB", "name": "bob"} and result["via"] == "home"


async def test_a_bad_ask_in_the_form_is_explained_and_not_sent(page: Page, playground: Playground) -> None:
    form = page.locator("#ask-form")
    await form.get_by_label("Ask as JSON").fill('{"questions": [')
    await form.get_by_role("button", name="Send ask").click()
    await form.locator("#ask-error", has_text="Not valid JSON").wait_for()
    assert await form.get_by_label("Ask as JSON").get_attribute("aria-invalid") == "true"
    assert await playground.redis.xlen(f"{playground.prefix}:asks") == 0


async def test_decline_opens_a_modal_whose_reason_is_optional_before_it_ends_the_ask(
    page: Page, playground: Playground
) -> None:
    [deploy_id, _] = await playground.send_samples()
    ask = message(page, "Deploy build 1.4.2")
    await ask.get_by_role("button", name="Decline").click()
    modal = page.get_by_role("dialog", name="Decline to answer?")
    await modal.get_by_role("button", name="Cancel").click()
    await modal.wait_for(state="detached")
    assert await results_on_queue(playground) == []

    await ask.get_by_role("button", name="Decline").click()
    await modal.get_by_label("Reason (optional)").fill("Freeze until Monday")
    await modal.get_by_role("button", name="Decline").click()
    await page.locator(f'.result[data-ask-id="{deploy_id}"][data-outcome="cancelled"]').wait_for()
    await ask.get_by_text("Declined by").wait_for()
    await ask.get_by_text("Freeze until Monday").wait_for()
    [result] = await results_on_queue(playground)
    assert result["outcome"] == "cancelled" and result["responder"]["id"] == "U0ALICE"
    assert {a["note"] for a in result["answers"]} == {"Freeze until Monday"}


async def test_mrkdwn_renders_as_slack_shows_it_and_never_as_markup(
    page: Page, playground: Playground
) -> None:
    text = (
        "*bold* _italic_ ~gone~ `code` &lt;b&gt;not bold&lt;/b&gt; &amp; <@U0BOB> <!subteam^S0ONCALL> "
        "<!date^1700000000^{date_num} at {time}|fallback> <javascript:alert(1)|bad link> "
        "<https://example.com/x|a link>\n&gt; quoted :white_check_mark:"
    )
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Rendering &lt;check&gt;"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "```pre *not bold*```"}]},
    ]
    fake = playground.fake
    headers = {"Authorization": f"Bearer {fake.bot_token}"}
    body = {"channel": "C0DEPLOY", "text": "rendering", "blocks": blocks}
    async with (
        aiohttp.ClientSession() as http,
        http.post(fake.api_url + "chat.postMessage", json=body, headers=headers) as r,
    ):
        assert (await r.json())["ok"] is True

    rendered = message(page, "Rendering")
    await rendered.wait_for()
    section = rendered.locator(".section-text")
    assert await section.locator("strong").inner_text() == "bold"
    assert await section.locator("em").inner_text() == "italic"
    assert await section.locator("s").inner_text() == "gone"
    assert await section.locator("code").inner_text() == "code"
    assert await section.locator("b").count() == 0  # escaped text stays text
    assert "<b>not bold</b> &" in await section.inner_text()
    assert await section.locator(".mention", has_text="@bob").count() == 1
    assert await section.locator(".mention", has_text="@oncall").count() == 1
    date = section.locator("time.md-date")
    assert await date.get_attribute("datetime") == "2023-11-14T22:13:20.000Z"
    assert (await date.inner_text()).startswith("2023-11-1")  # the reader's zone decides the day
    assert await section.locator("a").count() == 1
    assert await section.locator("a").get_attribute("href") == "https://example.com/x"
    assert await section.locator("blockquote").inner_text() == "quoted ✅"
    assert await rendered.get_by_role("heading", name="Rendering <check>").count() == 1
    assert await rendered.locator("pre").inner_text() == "pre *not bold*"


@pytest.mark.parametrize("playground", [{"min_remind_ms": 0}], indirect=True)
async def test_reminders_show_as_thread_replies_under_the_ask(page: Page, playground: Playground) -> None:
    envelope = playground.envelope(
        {
            "request": {"questions": [{"question": "Still there?", "options": ["Yes", "No"]}]},
            "remind_every_ms": 300,
        }
    )
    await playground.send_ask(envelope)
    ask = message(page, "Still there?")
    reminder = ask.locator(".thread-replies li", has_text="Still waiting for an answer")
    await reminder.first.wait_for()
    assert "⏳" in await reminder.first.inner_text()
    await ask.locator(".thread > summary", has_text="repl").wait_for()
    await page.screenshot(path=shot("thread-reminders"))


async def test_long_option_lists_become_selects_and_multi_selects(page: Page, playground: Playground) -> None:
    options = [f"Region {n}" for n in range(1, 13)]  # over 10 options: Slack has no radio group that long
    request = {
        "questions": [
            {"id": "primary", "question": "Primary region?", "options": options, "allowCustom": False},
            {"id": "replicas", "question": "Replica regions?", "options": options, "multi": True},
        ]
    }
    envelope = playground.envelope({"request": request})
    await playground.send_ask(envelope)
    await message(page, "Primary region?").get_by_role("button", name="Answer…").click()
    dialog = page.get_by_role("dialog")
    await dialog.get_by_label("Q1 · Choose one").select_option(label="Region 11")
    replicas = dialog.get_by_role("group", name="Q2 · Choose one or more")
    await replicas.get_by_label("Region 2", exact=True).check()
    await replicas.get_by_label("Region 12").check()
    await page.screenshot(path=shot("selects"))
    await dialog.get_by_role("button", name="Submit").click()
    await page.locator(f'.result[data-ask-id="{envelope["ask_id"]}"]').wait_for()
    [result] = await results_on_queue(playground)
    assert [a["selected"] for a in result["answers"]] == [[10], [1, 11]]


async def test_an_approval_sent_from_the_form_shows_its_tally_and_refuses_the_requester(
    page: Page, playground: Playground
) -> None:
    form = page.locator("#ask-form")
    await form.get_by_role("button", name="Approval").click()
    assert await form.get_by_label("Approvals needed").input_value() == "2"
    await form.get_by_label("Requester").select_option("carol@example.com")
    await form.get_by_label("Post to").select_option("C0DEPLOY")
    await form.get_by_role("button", name="Send ask").click()
    await form.locator("#ask-ok", has_text="Sent").wait_for()

    ask = message(page, "Deploy v2 to production?")
    await ask.get_by_text("0 of 2").first.wait_for()
    await ask.get_by_role("button", name="Approve").click()  # Alice, the page's first person
    await ask.get_by_text("1 of 2 · alice").wait_for()
    assert await ask.get_by_role("button", name="Approve").count() == 1  # the buttons stay

    await page.get_by_label("Acting as").select_option("U0CAROL")
    await ask.get_by_role("button", name="Approve").click()
    note = page.locator("#messages li.msg.ephemeral", has_text="cannot vote")
    await note.wait_for()
    assert await results_on_queue(playground) == []

    await page.get_by_label("Acting as").select_option("U0BOB")
    await ask.get_by_role("button", name="Approve").click()
    await ask.get_by_text("bob: Approve").wait_for()
    [result] = await results_on_queue(playground)
    assert result["outcome"] == "answered" and result["responder"]["id"] == "U0BOB"
    assert [v["user"]["id"] for v in result["votes"]] == ["U0ALICE", "U0BOB"]


async def test_pending_asks_count_down_and_withdraw_sends_the_agents_cancel(
    page: Page, playground: Playground
) -> None:
    # A restricted ask with a deadline under a minute and its own on_timeout, all chosen in the form.
    form = page.locator("#ask-form")
    await form.get_by_role("button", name="One click").click()
    await form.get_by_label("Who may answer").select_option("U0BOB")
    await form.get_by_label("Deadline", exact=True).select_option("30000")
    await form.get_by_label("At the deadline").select_option("recommended")
    await form.get_by_role("button", name="Send ask").click()
    confirmation = form.locator("#ask-ok", has_text="Sent")
    await confirmation.wait_for()
    ask_id = (await confirmation.inner_text()).split()[1].rstrip(";")

    item = page.locator(f'#pending .pending-ask[data-ask-id="{ask_id}"]')
    await item.wait_for()
    assert "Ship hotfix 1.4.3 now?" in await item.inner_text()
    await item.get_by_text("Only bob may answer").wait_for()
    # Slack shows nobody who may answer; the playground says it under the ask's message too.
    await (
        message(page, "Ship hotfix 1.4.3 now?").locator(".msg-who", has_text="Only bob may answer").wait_for()
    )
    await item.get_by_text("at the deadline: use the recommended option", exact=False).wait_for()
    countdown = item.locator(".countdown")
    first = await countdown.inner_text()
    assert first.endswith("s left") and int(first.split("s")[0]) <= 30, first
    # It counts down (the next whole second comes within ~1 s; polled, not slept).
    await page.wait_for_function(
        "([el, first]) => el.textContent !== first", arg=[await countdown.element_handle(), first]
    )
    loaded = await playground.store.find(ask_id)
    assert loaded is not None and loaded.record.on_timeout == "recommended"
    assert loaded.record.deadline_ms is not None
    assert loaded.record.deadline_ms - loaded.record.created_ms == 30_000
    await page.screenshot(path=shot("pending-countdown"))

    await item.get_by_role("button", name=f"Withdraw {ask_id}").click()
    card = page.locator(f'.result[data-ask-id="{ask_id}"]')
    await card.wait_for()
    assert await card.get_attribute("data-outcome") == "cancelled"
    await item.wait_for(state="detached")
    await page.locator('#messages > li.msg:has-text("Ship hotfix 1.4.3 now?"):has-text("withdr")').wait_for()
    # The agent's cancel, not a person's Decline: no responder, on the ask's own reply list.
    [result] = await results_on_queue(playground)
    assert result["ask_id"] == ask_id and result["outcome"] == "cancelled"
    assert result["responder"] is None
    assert await page.locator("#pending-empty").is_visible()


async def test_an_ask_sent_with_the_cli_shows_in_the_pending_list_and_its_result_in_the_panel(
    page: Page, playground: Playground
) -> None:
    import asyncio

    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "ask",
        "--redis",
        playground.redis_url,
        "--prefix",
        playground.prefix,
        "--channel",
        "C0DEPLOY",
        "Restart the queue workers?",
        "--option",
        "Restart",
        "--option",
        "Leave them",
        "--timeout",
        "10m",
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        item = page.locator("#pending .pending-ask", has_text="Restart the queue workers?")
        await item.wait_for()
        await message(page, "Restart the queue workers?").get_by_role("button", name="Restart").click()
        out, err = await asyncio.wait_for(cli.communicate(), timeout=30)
    finally:
        if cli.returncode is None:
            cli.kill()
            await cli.wait()
    assert cli.returncode == 0, err
    result = json.loads(out)
    # The command took its result off its own list (P:reply:<ask_id>); the panel still shows it.
    assert await playground.redis.llen(f"{playground.prefix}:reply:{result['ask_id']}") == 0
    card = page.locator(f'.result[data-ask-id="{result["ask_id"]}"]')
    await card.wait_for()
    assert await card.get_attribute("data-outcome") == "answered"
    assert result["text"] in await card.inner_text()
    await item.wait_for(state="detached")


async def test_at_1024_px_wide_nothing_overflows_the_page_or_its_columns(
    page: Page, playground: Playground
) -> None:
    await page.set_viewport_size({"width": 1024, "height": 768})
    await playground.send_samples()
    await page.locator("#pending .pending-ask").nth(1).wait_for()
    await message(page, "Roll it back?").get_by_role("button", name="Roll back").wait_for()
    await page.screenshot(path=shot("width-1024"))
    assert await page.evaluate("document.documentElement.scrollWidth") <= 1024
    # Each of the three columns keeps its content inside it (a select wider than the side panel
    # would be cut off there, not widen the page).
    outside = await page.evaluate(
        """() => [...document.querySelectorAll('.layout > *')].flatMap((column) => {
            const edge = column.getBoundingClientRect().right;
            return [...column.querySelectorAll('*')]
              .filter((el) => {
                const box = el.getBoundingClientRect();
                return box.width > 0 && box.right > edge + 1;
              })
              .map((el) => `${el.tagName}#${el.id}.${el.className}`);
        })"""
    )
    assert outside == []
    columns = await page.evaluate(
        "[...document.querySelectorAll('.layout > *')].map((c) => Math.round(c.getBoundingClientRect().top))"
    )
    assert len(set(columns)) == 1, "the conversation and the agent's side sit side by side at 1024 px"
