"""The I/O shell around the pure parts, in rooms: intake, endings, human actions and timers.

Every state change goes through :class:`bot.storage.store.Store` (atomic Lua); every Slack call goes
through :class:`bot.slack.SlackGateway`; what to draw comes from :mod:`bot.render`; what a payload
means comes from :mod:`bot.slack.interactions`; how an ask ends comes from :mod:`bot.results`.

- :mod:`bot.engine.intake`: one entry of the asks stream (ask or cancel) and its delivery.
- :mod:`bot.engine.endings`: ending an ask once and drawing its ended messages.
- :mod:`bot.engine.actions`: buttons, forms and who may answer; dismissals from Slack events.
- :mod:`bot.engine.timers`: deadlines, escalation steps and reminders.
- :mod:`bot.engine.core`: the thin :class:`Engine` that wires them.
"""

from bot.engine.core import Engine
from bot.engine.room import Refusal

__all__ = ["Engine", "Refusal"]
