"""A lab's control panel for a notebook front end: inject, check, hint (and solve), over the lab engine."""

from __future__ import annotations

import html

import ipywidgets as widgets

from operatorlab.labs import registry, runner
from operatorlab.labs.base import Check


class LabPanel(widgets.VBox):
    """Buttons for one lab and an output area; the same engine as ``operatorlab lab ...``.

    Args:
        lab_id: the lab's folder name under ``labs/``.
        ctx: a :class:`~operatorlab.labs.base.LabContext` (default: the cluster ``$KUBECONFIG`` names).
        solve_button: also offer the reference fix.
    """

    def __init__(self, lab_id: str, *, ctx=None, solve_button: bool = False) -> None:
        self.lab = runner.create(registry.get(lab_id), ctx or runner.context())
        self.output = widgets.HTML()
        buttons = [("inject", "danger", self.inject), ("check", "info", self.check), ("hint", "", self.hint)]
        if solve_button:
            buttons.append(("solve", "success", self.solve))
        self.buttons = {}
        for label, style, action in buttons:
            button = widgets.Button(description=label, button_style=style)
            button.on_click(lambda _b, action=action: self._run(action))
            self.buttons[label] = button
        super().__init__([widgets.HTML(f"<b>{html.escape(self.lab.title)}</b>: {html.escape(self.lab.summary)}"),
                          widgets.HBox(list(self.buttons.values())), self.output])

    # Each action returns what it shows, so a notebook cell (or a test) can use it without clicking.

    def inject(self) -> str:
        runner.start(self.lab)
        return self._show("<i>fault injected</i>: now find it, fix it, and press check")

    def check(self, settle: float = 5.0) -> list[Check]:
        results = runner.check(self.lab, settle=settle)
        rows = "".join(
            f"<li>{'✅' if c.passed else '❌'} {html.escape(c.name)}"
            + ("" if c.passed else f"<br><small>{html.escape(c.message)}</small>") + "</li>"
            for c in results)
        self._show(f"<ul>{rows}</ul>")
        return results

    def hint(self) -> list[str]:
        hints = runner.hint(self.lab)
        self._show("".join(f"<p>hint {i}: {html.escape(h)}</p>" for i, h in enumerate(hints, 1)))
        return hints

    def solve(self) -> list[Check]:
        runner.solve(self.lab)
        return self.check(settle=self.lab.settle)

    def _run(self, action) -> None:
        try:
            action()
        except Exception as e:  # noqa: BLE001 - shown to the learner, not swallowed
            self._show(f"<pre>{html.escape(type(e).__name__)}: {html.escape(str(e))}</pre>")

    def _show(self, text: str) -> str:
        self.output.value = text
        return text

    def __repr__(self) -> str:  # stable text for nbval; the widget shows live results
        return f"LabPanel({self.lab.id!r})"
