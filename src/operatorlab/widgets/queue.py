"""A live panel of one work queue's gauges and counters (client-go's workqueue metrics)."""

from __future__ import annotations

import ipywidgets as widgets

from operatorlab.controllers.workqueue import QueueMetrics, WorkQueue

_COUNTERS = (
    ("adds", "adds", "add() calls that queued a key"),
    ("deduplicated", "deduplicated", "add() calls absorbed: key already queued"),
    ("requeued_while_processing", "re-queued", "added while a worker held it: queued again on done()"),
    ("retries", "retries", "add_rate_limited() / add_after() calls"),
    ("processed", "processed", "done() calls: reconciles finished"),
)


class QueuePanel(widgets.VBox):
    """Depth bar plus counters for a :class:`~operatorlab.controllers.workqueue.WorkQueue`.

    Subscribes to the queue's listeners, so it redraws on every change.

    Args:
        queue: the queue to show.
        max_depth: the depth bar's full scale.
    """

    def __init__(self, queue: WorkQueue, *, max_depth: int = 20) -> None:
        self._depth = widgets.IntProgress(min=0, max=max_depth, description="depth", bar_style="info")
        self._labels = {key: widgets.HTML() for key, _, _ in _COUNTERS}
        rows = [widgets.HBox([widgets.HTML(f"<span title='{tip}'>{label}</span>",
                                           layout=widgets.Layout(width="110px")), self._labels[key]])
                for key, label, tip in _COUNTERS]
        super().__init__([widgets.HTML("<b>Work queue</b>"), self._depth, *rows])
        self.update(queue.metrics())
        queue.add_listener(self.update)

    def update(self, metrics: QueueMetrics) -> None:
        """Redraw from a metrics snapshot (called by the queue on every change)."""
        self._depth.value = min(metrics.depth, self._depth.max)
        self._depth.description = f"depth {metrics.depth}"
        for key, _, _ in _COUNTERS:
            self._labels[key].value = f"<code>{getattr(metrics, key)}</code>"

    def __repr__(self) -> str:  # stable text for nbval; the widget shows live numbers
        return "QueuePanel()"
