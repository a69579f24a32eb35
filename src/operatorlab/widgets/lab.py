"""A lab's control panel for a notebook front end: inject, check, hint (and solve), over the lab engine."""

from __future__ import annotations

import html

import ipywidgets as widgets

from operatorlab import progress
from operatorlab.grading import word_html
from operatorlab.labs import registry, runner
from operatorlab.labs.base import Check
from operatorlab.labs.errors import LabNotStarted


class LabPanel(widgets.VBox):
    """Buttons for one lab and an output area; the same engine as ``operatorlab lab ...``.

    Each action disables the buttons and says what it is doing until it ends (a check
    waits for the operator to settle, which takes seconds); verdicts are the words PASS
    and FAIL, coloured as a courtesy.

    Args:
        lab_id: the lab's folder name under ``labs/``.
        ctx: a :class:`~operatorlab.labs.base.LabContext` (default: the cluster ``$KUBECONFIG`` names).
        solve_button: also offer the reference fix.
    """

    def __init__(self, lab_id: str, *, ctx=None, solve_button: bool = False) -> None:
        cls = registry.get(lab_id)
        ctx = ctx or runner.context()
        self.output = widgets.HTML()
        self.buttons: dict[str, widgets.Button] = {}
        title = widgets.HTML(f"<b>{html.escape(cls.title)}</b>: {html.escape(cls.summary)}")
        if reason := runner.unavailable(cls, ctx):  # e.g. on minikube: say why, offer no buttons
            self.lab_id = lab_id
            super().__init__([title, self.output])
            self._show(f"<p><b>Not on this cluster.</b> {html.escape(reason)}</p>")
            return
        self.lab = runner.create(cls, ctx)
        self.lab_id = lab_id
        buttons = [("inject", "danger", self.inject, "injecting the fault"),
                   ("check", "info", self.check, "checking (the operator gets a few seconds to settle)"),
                   ("hint", "", self.hint, "")]
        if solve_button:
            buttons.append(("solve", "success", self.solve, "applying the reference fix, then checking"))
        buttons.append(("reset", "", self.reset, "removing everything the lab made"))
        for label, style, action, doing in buttons:
            button = widgets.Button(description=label, button_style=style)
            button.on_click(lambda _b, action=action, doing=doing: self._run(action, doing))
            self.buttons[label] = button
        super().__init__([title, widgets.HBox(list(self.buttons.values())), self.output])

    # Each action returns what it shows, so a notebook cell (or a test) can use it without clicking.

    def inject(self) -> str:
        runner.start(self.lab)
        return self._show("<i>fault injected</i>: now find it, fix it, and press check")

    def check(self, settle: float = 5.0) -> list[Check]:
        """Run the checks, waiting up to ``settle`` s for them to pass (as ``operatorlab lab check``)."""
        results = runner.check(self.lab, settle=settle)
        passed = sum(c.passed for c in results)
        progress.attempted("lab", self.lab.id, passed == len(results))
        rows = "".join(
            f"<li>{word_html(c.passed)} {html.escape(c.name)}"
            + ("" if c.passed else f"<br><small>{html.escape(c.message)}</small>") + "</li>"
            for c in results)
        self._show(f"<p>{word_html(passed == len(results))} {passed} of {len(results)} checks pass</p><ul>{rows}</ul>")
        return results

    def hint(self) -> list[str]:
        hints = runner.hint(self.lab)
        self._show("".join(f"<p>hint {i}: {html.escape(h)}</p>" for i, h in enumerate(hints, 1)))
        return hints

    def solve(self) -> list[Check]:
        runner.solve(self.lab)
        return self.check(settle=self.lab.settle)

    def reset(self) -> str:
        runner.reset(self.lab)
        return self._show("<i>reset</i>: everything the lab made is gone; inject to start again")

    def _run(self, action, doing: str = "") -> None:
        for button in self.buttons.values():
            button.disabled = True
        if doing:
            self._show(f"<i>{html.escape(doing)}…</i>")
        try:
            action()
        except LabNotStarted:
            self._show("<p><b>Not started yet.</b> Press <b>inject</b> first "
                       f"(in a terminal: <code>operatorlab lab start {html.escape(self.lab_id)}</code>).</p>")
        except Exception as e:  # noqa: BLE001 - shown to the learner, not swallowed
            self._show(f"<p>{word_html(False)} {html.escape(type(e).__name__)}</p><pre>{html.escape(str(e))}</pre>")
        finally:
            for button in self.buttons.values():
                button.disabled = False

    def _show(self, text: str) -> str:
        self.output.value = text
        return text

    def __repr__(self) -> str:  # stable text for nbval; the widget shows live results
        return f"LabPanel({self.lab_id!r})"

