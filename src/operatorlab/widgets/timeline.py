"""A live table of watch events: the learner sees the stream a controller consumes."""

from __future__ import annotations

import html
import threading
import time

import ipywidgets as widgets

from operatorlab.controllers.listwatch import WatchEvent

# Colour per event type: server events in colour, the reflector's own markers in grey.
_COLOURS = {
    "ADDED": "#2e7d32", "MODIFIED": "#1565c0", "DELETED": "#c62828", "BOOKMARK": "#6a1b9a",
    "ERROR": "#e65100", "LIST": "#555", "WATCH": "#555", "CLOSED": "#999", "DROPPED": "#e65100", "BACKOFF": "#999",
}


class EventTimeline(widgets.VBox):
    """A scrolling table of :class:`~operatorlab.controllers.listwatch.WatchEvent` s, newest last.

    Pass :meth:`record` as an observer: ``controller.on_event(timeline.record)``.

    Args:
        max_rows: how many recent events to show (all are kept in :attr:`events`).
        title: the heading above the table.
    """

    def __init__(self, *, max_rows: int = 30, title: str = "Watch events") -> None:
        self.events: list[WatchEvent] = []
        self._max_rows = max_rows
        self._title = title
        self._lock = threading.Lock()
        self._started = time.time()
        self._table = widgets.HTML()
        super().__init__([widgets.HTML(f"<b>{html.escape(title)}</b>"), self._table])
        self._render()

    def record(self, event: WatchEvent) -> None:
        """Append one event and redraw (safe from any thread)."""
        with self._lock:
            self.events.append(event)
        self._render()

    def summary(self, *, types: tuple[str, ...] | None = None) -> str:
        """The events as plain text, one ``TYPE name`` per line (no times or versions, so stable).

        Args:
            types: only these event types (default: all).
        """
        with self._lock:
            events = list(self.events)
        return "\n".join(f"{e.type:<9} {e.name}".rstrip() for e in events if types is None or e.type in types)

    def _render(self) -> None:
        with self._lock:
            recent = self.events[-self._max_rows:]
        rows = "".join(
            f"<tr><td style='color:#777'>+{e.time - self._started:6.2f}s</td>"
            f"<td style='color:{_COLOURS.get(e.type, '#000')};font-weight:bold'>{e.type}</td>"
            f"<td>{html.escape(e.name)}</td><td style='color:#777'>rv {html.escape(e.resource_version)}</td>"
            f"<td style='color:#777'>{html.escape(e.detail)}</td></tr>"
            for e in recent
        )
        self._table.value = (
            "<table style='font-family:monospace;font-size:12px'>"
            + (rows or "<tr><td style='color:#777'>(waiting for events)</td></tr>") + "</table>"
        )

    def __repr__(self) -> str:  # stable text for nbval; the widget shows the live table
        return f"EventTimeline(title={self._title!r})"
