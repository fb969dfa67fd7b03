"""Helpers for tests that put FakeSlack in front of a real app over loopback HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.playground import FakeSlack


@contextlib.asynccontextmanager
async def serve_bolt(app: AsyncApp, fake: FakeSlack) -> AsyncIterator[str]:
    """Serve `app` at /slack/events on a free loopback port and point `fake.events_url` at it."""
    runner = web.AppRunner(app.web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        fake.events_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
        yield fake.events_url
    finally:
        await runner.cleanup()


@dataclass
class Captured:
    headers: dict[str, str]
    body: str


@dataclass
class CaptureServer:
    """A stand-in app that records each raw request and answers HTTP 200 with `reply` (JSON or empty)."""

    reply: dict[str, Any] | None = None
    requests: list[Captured] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(Captured(headers=dict(request.headers), body=await request.text()))
        if self.reply is None:
            return web.Response(status=200)
        return web.json_response(self.reply)


@contextlib.asynccontextmanager
async def serve_capture(fake: FakeSlack, reply: dict[str, Any] | None = None) -> AsyncIterator[CaptureServer]:
    capture = CaptureServer(reply=reply)
    app = web.Application()
    app.router.add_post("/slack/events", capture.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        fake.events_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
        yield capture
    finally:
        await runner.cleanup()


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def option(label: str, value: str) -> dict[str, Any]:
    return {"text": plain(label), "value": value}


def question_blocks(block_id: str = "q1") -> list[dict[str, Any]]:
    """A message with one-click answer buttons, a checkbox group and a submit button."""
    return [
        {
            "type": "section",
            "block_id": f"{block_id}-text",
            "text": {"type": "mrkdwn", "text": "*Deploy now?*"},
        },
        {
            "type": "actions",
            "block_id": f"{block_id}-buttons",
            "elements": [
                {
                    "type": "button",
                    "action_id": "choose:0",
                    "text": plain("Yes"),
                    "value": "0",
                    "style": "primary",
                },
                {"type": "button", "action_id": "choose:1", "text": plain("No"), "value": "1"},
                {"type": "button", "action_id": "decline", "text": plain("Decline"), "value": "decline"},
            ],
        },
        {
            "type": "actions",
            "block_id": f"{block_id}-checks",
            "elements": [
                {
                    "type": "checkboxes",
                    "action_id": "regions",
                    "options": [option("EU", "eu"), option("US", "us"), option("Asia", "asia")],
                },
                {"type": "button", "action_id": "submit", "text": plain("Submit"), "value": "submit"},
            ],
        },
    ]


def modal(callback_id: str = "ask-modal", *, notify_on_close: bool = False) -> dict[str, Any]:
    """A modal with a required radio group, optional checkboxes, a select and a text input."""
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": "ask-123",
        "notify_on_close": notify_on_close,
        "title": plain("Question"),
        "submit": plain("Submit"),
        "close": plain("Cancel"),
        "blocks": [
            {
                "type": "input",
                "block_id": "choice",
                "label": plain("Which one?"),
                "element": {
                    "type": "radio_buttons",
                    "action_id": "pick",
                    "options": [option("Blue", "0"), option("Green", "1")],
                },
            },
            {
                "type": "input",
                "block_id": "extras",
                "optional": True,
                "label": plain("Extras"),
                "element": {
                    "type": "checkboxes",
                    "action_id": "extras",
                    "options": [option("Fast", "fast"), option("Cheap", "cheap")],
                },
            },
            {
                "type": "input",
                "block_id": "size",
                "optional": True,
                "label": plain("Size"),
                "element": {
                    "type": "static_select",
                    "action_id": "size",
                    "options": [option("Small", "s"), option("Large", "l")],
                },
            },
            {
                "type": "input",
                "block_id": "note",
                "optional": True,
                "label": plain("Note"),
                "element": {"type": "plain_text_input", "action_id": "note", "max_length": 20},
            },
        ],
    }
