"""Views for the notebooks: ipywidgets of what a controller sees and does, live; a plot of the learner's exams.

- :class:`EventTimeline`: each watch event (and reflector marker) as it arrives.
- :class:`QueuePanel`: a work queue's depth and counters (adds, dedups, retries...).
- :class:`LabPanel`: a lab's buttons (inject, check, hint) over the lab engine.
- :func:`plot_exam_history`: a learner's mock exams as a matplotlib figure (not live: drawn once).

The first two are fed from background threads (a reflector, a work queue's listeners);
ipywidgets synchronises widget state with the browser from any thread. Their
plain-text form is stable (``EventTimeline()``), so nbval can compare the cells
that display them; the live content is for people.
"""

from operatorlab.widgets.exam import plot_exam_history
from operatorlab.widgets.lab import LabPanel
from operatorlab.widgets.queue import QueuePanel
from operatorlab.widgets.timeline import EventTimeline

__all__ = ["EventTimeline", "LabPanel", "QueuePanel", "plot_exam_history"]
