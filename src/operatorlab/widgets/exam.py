"""A learner's mock exams as one picture: the score, the time used of the budget, each drill's time.

``operatorlab drill exam --history`` lists the same history as lines of words; a plot shows what
lines hide: whether the score climbs and the time falls from one exam to the next, and which
drill is still slow. Exams are drawn in the order they finished, one slot each (not on a time
axis: three exams in one evening and one a week later are equally readable), labelled with the
same time ``--history`` prints. Drawn with pyplot, as the notebooks draw, so a notebook's
``plt.show()`` shows it; matplotlib is imported on the first call, not with the widgets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from operatorlab.labs.exam import NO_HISTORY, Result, load_history

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The notebooks' colours: Kubernetes blue for what was done, grey for the budget around it.
_DONE, _BUDGET = "#326ce5", "#d0d0d0"
#: At most this many exams are named (their time, score and time used in words), so that no two
#: names overlap in a notebook's width; in a longer history every k-th exam is.
_MAX_NAMED = 8


def plot_exam_history(results: Sequence[Result] | None = None, *, path: Path | None = None) -> Figure | None:
    """Draw ``results`` (default: the history at ``path``, else the learner's own), oldest first.

    Three panels over the same exams: the score (the share of drills solved in time), the
    minutes used against the budget, and each drill's minutes, solved or not. With no exam
    yet, an empty plot would say nothing: this prints how to take one
    (:data:`~operatorlab.labs.exam.NO_HISTORY`) and returns None.

    Raises:
        BadState: the history file is of another format (its message names the file).
    """
    exams = list(load_history(path) if results is None else results)
    if not exams:
        print(NO_HISTORY)
        return None
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (score, time, drills) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    slots = range(1, len(exams) + 1)
    every = math.ceil(len(exams) / _MAX_NAMED)
    named = [i % every == 0 for i in range(len(exams))]
    _draw_score(score, slots, exams, named)
    _draw_time(time, slots, exams, named)
    _draw_drills(drills, slots, exams)
    drills.set_xticks(list(slots), [_when(r) if n else "" for r, n in zip(exams, named, strict=True)])
    drills.set_xlabel("exam, finished at (UTC), oldest first")
    for ax in (score, time, drills):
        ax.set_xlim(0.4, len(exams) + 0.6)
        ax.grid(axis="y", alpha=0.3)
    for ax in (time, drills):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))  # whole minutes
    fig.suptitle(f"Your mock exams (operatorlab drill exam): {len(exams)} taken", fontweight="bold")
    fig.tight_layout()
    return fig


def _when(r: Result) -> str:
    """The time ``--history`` prints, on two lines so that neighbouring labels do not collide."""
    return r.finished[:16].replace("T", "\n")


def _clock(seconds: float) -> str:
    """``m:ss``, as ``--history`` prints a time."""
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


def _draw_score(ax: Axes, slots: range, exams: list[Result], named: list[bool]) -> None:
    shares = [100 * r.solved / r.count if r.count else 0.0 for r in exams]
    bars = ax.bar(slots, shares, width=0.6, color=_DONE)
    ax.bar_label(bars, [f"{r.solved} of {r.count} solved" if n else "" for r, n in zip(exams, named, strict=True)],
                 padding=2, fontsize=8)
    ax.set(ylim=(0, 118), yticks=[0, 25, 50, 75, 100], ylabel="drills solved in time (%)",
           title="Score: the share of drills solved in time")


def _draw_time(ax: Axes, slots: range, exams: list[Result], named: list[bool]) -> None:
    ax.bar(slots, [r.minutes for r in exams], width=0.6, color=_BUDGET, label="time budget")
    used = ax.bar(slots, [r.used_seconds / 60 for r in exams], width=0.36, color=_DONE, label="time used")
    ax.bar_label(used, [_clock(r.used_seconds) if n else "" for r, n in zip(exams, named, strict=True)],
                 padding=2, fontsize=8)
    ax.set(ylim=(0, 1.25 * max(r.minutes for r in exams)), ylabel="minutes", title="Time used of the budget")
    ax.legend(loc="upper left", ncols=2, fontsize=8, frameon=False)


def _draw_drills(ax: Axes, slots: range, exams: list[Result]) -> None:
    """One point per drill that was started: filled if solved in time, a cross if not; one colour per drill."""
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    timed = [t for r in exams for t in r.tasks if t.seconds is not None]
    labs = sorted({t.lab for t in timed})
    palette = colormaps["tab10" if len(labs) <= 10 else "tab20"]
    colours = {lab: palette(i % palette.N) for i, lab in enumerate(labs)}
    for slot, r in zip(slots, exams, strict=True):
        started = [t for t in r.tasks if t.seconds is not None]
        for i, t in enumerate(started):
            x = slot + (i - (len(started) - 1) / 2) * min(0.15, 0.6 / len(started))
            ax.plot(x, (t.seconds or 0) / 60, "o" if t.solved else "X", color=colours[t.lab], markersize=8,
                    markerfacecolor=colours[t.lab] if t.solved else "none", markeredgewidth=1.5)
    longest = max([(t.seconds or 0) / 60 for t in timed], default=0) or 1.0
    ax.set(ylim=(0, 1.15 * longest), ylabel="minutes", title="Each drill: minutes to solve it, or spent on it unsolved")
    kinds = [Line2D([], [], marker="o", linestyle="", color="#555", label="solved in time"),
             Line2D([], [], marker="X", linestyle="", color="#555", markerfacecolor="none", label="not solved")]
    names = [Line2D([], [], marker="o", linestyle="", color=colours[lab], label=lab) for lab in labs]
    ax.legend(handles=kinds + names, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)

