"""``python -m bot.cli``: the same as the ``slack-ask`` command."""

import sys

from bot.cli import main

sys.exit(main())
