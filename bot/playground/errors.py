"""The one exception the fake raises at its callers.

API errors never raise: they go back to the bot as Slack's `{"ok": false, "error": ...}`.
`FakeSlackError` is for the test or the playground using the fake wrongly, for example clicking a button
that was never rendered, so a test fails with a sentence instead of a silent no-op.
"""

from __future__ import annotations

__all__ = ["FakeSlackError"]


class FakeSlackError(Exception):
    """The fake was asked to do something Slack (or a human in Slack) could not do."""
