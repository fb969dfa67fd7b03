"""The one exception of the contract package.

ContractError
 └── raised by every normalizer; ``str(err)`` is the exact upstream message.
"""

__all__ = ["ContractError"]


class ContractError(ValueError):
    """A request or form the contract cannot accept. ``str()`` is the contract's exact message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
