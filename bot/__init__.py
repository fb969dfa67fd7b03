"""slack-ask: the Slack bot, its Redis store, its workers and its command line."""

__all__ = ["__version__"]

__version__ = "0.1.0"
