"""A fleet's session table: its sessions by id, and the per-call lookup of ``fleet.on_call``.

The native one (``_native.SessionTable``, ``_guardrails.pxi``) also indexes its sessions by the
id object, so a call on a session cold in cache finds it in one memory access; this module holds
its reference twin and picks between them (``session_table_class``): the fleet chooses its
table, the engine module does not carry it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..base.decision import Decision
from ..engine import select as _engine

if TYPE_CHECKING:
    from ..session.guardrails import Guardrails

__all__ = ["SessionTable", "session_table_class"]


class SessionTable:
    """A Fleet's sessions by id, and its ``on_call`` (the reference twin of
    ``_native.SessionTable``, which also indexes its sessions by the id object so that a call on
    a session cold in cache finds it in one memory access). ``add`` and ``remove`` are the only
    writers."""

    __slots__ = ("_by_id", "_session")

    def __init__(self, session: Callable[[str], Guardrails]) -> None:
        self._by_id: dict[str, Guardrails] = {}
        self._session = session  # Fleet.session: creates (and restores) a session on first use

    def get(self, session_id: str) -> Guardrails | None:
        return self._by_id.get(session_id)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._by_id))

    def items(self) -> list[tuple[str, Guardrails]]:
        return list(self._by_id.items())

    def add(self, session_id: str, g: Guardrails) -> None:
        """Keep ``g`` as the session ``session_id`` (which the table does not hold yet)."""
        if session_id in self._by_id:
            raise KeyError(f"session {session_id!r} is in the table already")
        self._by_id[session_id] = g

    def remove(self, session_id: str, g: Guardrails) -> bool:
        """Drop the session ``session_id`` if it is ``g``; True when it was."""
        if self._by_id.get(session_id) is not g:
            return False
        del self._by_id[session_id]
        return True

    def on_call(self, session_id: str, name: str, args: Any = None,
                id: str | None = None) -> Decision:
        return self._session(session_id).on_call(name, args, id)


def session_table_class(implementation: str) -> type[SessionTable]:
    """The session table of an engine implementation ("native" or "python")."""

    def native() -> type[SessionTable]:
        from .._native import SessionTable as NativeSessionTable

        return NativeSessionTable  # type: ignore[return-value]  # the same API (parity test)

    return _engine.concrete(implementation, lambda: SessionTable, native)
