"""The base of the test servers: ``with Server(...) as srv`` starts it and stops it after."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Running:
    """A server a test starts and stops; subclasses define :meth:`start` and :meth:`stop`."""

    def start(self) -> Self:
        """Start serving (return once it answers) and return self."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop serving and free what it holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
