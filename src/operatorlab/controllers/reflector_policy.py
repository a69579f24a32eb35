"""What a reflector does after each LIST or WATCH attempt: client-go's retry rules as one pure function.

client-go's reflector spreads its retry policy over four functions
(k8s.io/client-go v0.36.3 ``tools/cache/reflector.go``): ``RunWithContext``
backs off between calls of ``ListAndWatchWithContext``; ``list`` retries an
expired LIST at once; ``watch`` re-watches or returns; ``handleAnyWatch``
flags a very short watch. :func:`decide` gathers them: given the
:class:`Outcome` of one attempt, it returns the :class:`Decision` -- LIST
again, WATCH again from the same resourceVersion, or stop -- and whether to
wait one step of the backoff (:mod:`~operatorlab.controllers.backoff`) first.

Row by row (``RV``: the last resourceVersion the reflector saw; "wait": one
backoff step first):

===  ===========================================  ===================  ====  ==========================================
row  after                                        next                 wait  client-go
===  ===========================================  ===================  ====  ==========================================
 1   anything, while the reflector stops          stop                 no    ``RunWithContext``: ``ctx.Done()``
 2   LIST ok                                      WATCH from its RV    no    ``ListAndWatchWithContext``
 3   LIST at an RV other than ``""``: 410         LIST at ``""``       no    ``list``: ``isExpiredError``,
     Expired/Gone or ResourceVersionTooLarge                                 ``isTooLargeResourceVersionError``
 4   LIST failed otherwise                        LIST                 yes   ``list`` errs; ``delayHandler.Until``
 5   WATCH request: 429 or connection refused     WATCH from RV        yes   ``watch``: ``isWatchErrorRetriable``
 6   WATCH request failed otherwise (410, 5xx,    LIST at RV           yes   ``watch`` errs; ``Until``
     403, a network error)
 7   stream: ERROR event 429                      WATCH from RV        yes   ``watch``: ``IsTooManyRequests``
 8   stream: ERROR event 410 Expired/Gone         LIST at RV           yes   ``watch``: ``isExpiredError``; ``Until``
 9   stream: any other ERROR event                LIST at RV           yes   ``watch``: ``default``; ``Until``
10   stream ended under 1 s with no event         LIST at RV           yes   ``handleAnyWatch``: ``VeryShortWatchError``
11   stream ended otherwise (server timeout, or   WATCH from RV        no    ``watch``: ``handleWatch`` returned nil
     the connection broke)
12   stream closed by us to re-watch              WATCH from RV (or    no    -- (``rewatch_from``, ``break_watch``:
                                                  the one asked for)         teaching hooks of ours)
13   stream closed by us to relist                LIST at RV           no    -- (``relist``: ours too)
===  ===========================================  ===================  ====  ==========================================

Row 9 includes a 500: client-go retries an internal error at once only within
``MaxInternalErrorRetryDuration``, which is 0 unless set. "errs; ``Until``":
the function returns, ``ListAndWatch`` returns, and ``RunWithContext``'s
``delayHandler.Until`` (sliding) waits a backoff step before the next
``ListAndWatch``, which starts with a LIST.

Which resourceVersion a LIST asks for is :func:`list_resource_version`
(client-go ``relistResourceVersion``): ``"0"`` the first time (any state the
API server's watch cache holds will do, and it is served from memory), RV
after that (a state at least as new as what we saw), ``""`` after row 3
(the newest state, a consistent read).

So every relist except row 3's waits first: client-go never relists at
once after a 410 (``watch`` returns, and ``Until`` waits a backoff step
before calling ``ListAndWatch`` again), and a proxy or server that cuts each
stream at once (row 10) cannot make it loop hot.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "Attempt",
    "Decision",
    "Failure",
    "Interrupt",
    "Next",
    "Outcome",
    "RequestFailed",
    "decide",
    "list_resource_version",
]

#: metav1 ``StatusReason`` values apimachinery knows (``knownReasons``; "" is not one of them).
KNOWN_REASONS = frozenset({
    "Unauthorized", "Forbidden", "NotFound", "AlreadyExists", "Conflict", "Gone", "Invalid", "ServerTimeout",
    "StoreReadError", "Timeout", "TooManyRequests", "BadRequest", "MethodNotAllowed", "NotAcceptable",
    "RequestEntityTooLarge", "UnsupportedMediaType", "InternalError", "Expired", "ServiceUnavailable",
})
#: A reflector's watch that ends sooner than this with no event is "very short" (``handleAnyWatch``).
VERY_SHORT_WATCH = 1.0


@dataclass(frozen=True)
class Failure:
    """Why a request failed: the server's ``Status``, or no answer at all.

    Attributes:
        code: the HTTP status (or the ``Status.code`` of an ``ERROR`` event);
            ``None`` when no answer came (a network failure).
        reason: ``Status.reason`` (``Expired``, ``Gone``, ``TooManyRequests`` ...).
        causes: the ``Status.details.causes[].reason`` values (``ResourceVersionTooLarge``;
            Go's ``StatusCause.Type``, spelled ``reason`` in JSON).
        refused: the TCP connection was refused (nothing listening).
        message: for logs and the timeline.
    """

    code: int | None = None
    reason: str = ""
    causes: tuple[str, ...] = ()
    refused: bool = False
    message: str = ""

    @property
    def expired(self) -> bool:
        """client-go ``isExpiredError``: ``IsResourceExpired`` or ``IsGone`` (410)."""
        return self.reason in ("Expired", "Gone") or (self.reason not in KNOWN_REASONS and self.code == 410)

    @property
    def too_large_resource_version(self) -> bool:
        """client-go ``isTooLargeResourceVersionError``: the server has not reached that resourceVersion yet."""
        return "ResourceVersionTooLarge" in self.causes or (
            (self.reason == "Timeout" or (self.reason not in KNOWN_REASONS and self.code == 504))
            and "Too large resource version" in self.message
        )

    @property
    def too_many_requests(self) -> bool:
        """apimachinery ``IsTooManyRequests``: the reason, or the code 429 whatever the reason."""
        return self.reason == "TooManyRequests" or self.code == 429


class RequestFailed(Exception):
    """A LIST or WATCH request failed; raised by the list and watch calls a reflector is given."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message or f"{failure.code} {failure.reason}".strip())
        self.failure = failure


class Attempt(Enum):
    """What was tried."""

    LIST = "LIST"  #: the (paged) LIST
    WATCH = "WATCH"  #: the watch request, until the server answered it
    STREAM = "STREAM"  #: the open watch stream, read until it ended


class Interrupt(Enum):
    """The reflector itself closed the stream, on a caller's request."""

    REWATCH = "rewatch"
    RELIST = "relist"


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended.

    Attributes:
        attempt: what was tried.
        failure: why it failed (for a STREAM: the ``ERROR`` event); ``None``: it did not.
        resource_version: for a LIST, the resourceVersion it asked for.
        seconds: for a STREAM, from sending the watch request to the end of the stream.
        events: for a STREAM, how many events it carried (bookmarks included).
        interrupted: for a STREAM, set when the reflector closed it on request.
        stopping: the reflector is being stopped.
    """

    attempt: Attempt
    failure: Failure | None = None
    resource_version: str = ""
    seconds: float = 0.0
    events: int = 0
    interrupted: Interrupt | None = None
    stopping: bool = False


class Next(Enum):
    LIST = "LIST"
    WATCH = "WATCH"
    STOP = "STOP"


@dataclass(frozen=True)
class Decision:
    """What to do after an :class:`Outcome`.

    Attributes:
        next: LIST, WATCH (from the last resourceVersion seen) or STOP.
        back_off: wait one step of the backoff first.
        list_latest: the next LIST asks for resourceVersion ``""`` (the newest
            state) because the last one is unavailable (client-go
            ``isLastSyncResourceVersionUnavailable``).
        row: the row of the table in this module's docstring.
        why: one line for logs and the timeline.
    """

    next: Next
    back_off: bool
    row: int
    why: str
    list_latest: bool = False


def decide(outcome: Outcome) -> Decision:
    """The next step after ``outcome``, as client-go's reflector takes it (see the table above)."""
    failure = outcome.failure
    if outcome.stopping:
        return Decision(Next.STOP, False, 1, "stopping")
    if outcome.attempt is Attempt.LIST:
        if failure is None:
            return Decision(Next.WATCH, False, 2, "listed: watch from the list's resourceVersion")
        if (failure.expired or failure.too_large_resource_version) and outcome.resource_version != "":
            return Decision(Next.LIST, False, 3, "that resourceVersion is unavailable: list the newest state at once",
                            list_latest=True)
        return Decision(Next.LIST, True, 4, "list failed: back off, list again")
    if outcome.attempt is Attempt.WATCH:
        if failure is None:  # an open stream is reported as a STREAM outcome, once it ends
            raise ValueError("a WATCH outcome is a failed watch request; report an opened stream as STREAM")
        if failure.too_many_requests or failure.refused:
            return Decision(Next.WATCH, True, 5, "watch refused for now: back off, watch from the same resourceVersion")
        return Decision(Next.LIST, True, 6, "watch request failed: back off, relist")
    if outcome.interrupted is Interrupt.RELIST:
        return Decision(Next.LIST, False, 13, "relist requested")
    if outcome.interrupted is Interrupt.REWATCH:
        return Decision(Next.WATCH, False, 12, "re-watch requested")
    if failure is not None:
        if failure.too_many_requests:
            return Decision(Next.WATCH, True, 7, "429 on the stream: back off, watch from the same resourceVersion")
        if failure.expired:
            return Decision(Next.LIST, True, 8, "410: history gone: back off, relist")
        return Decision(Next.LIST, True, 9, "error event: back off, relist")
    if outcome.seconds < VERY_SHORT_WATCH and outcome.events == 0:
        return Decision(Next.LIST, True, 10, "very short watch: back off, relist")
    return Decision(Next.WATCH, False, 11, "stream ended: watch again from the last resourceVersion")


def list_resource_version(last_seen: str, unavailable: bool, *, initial: str = "0") -> str:
    """The resourceVersion a LIST asks for (client-go ``relistResourceVersion``).

    * ``""`` after the last one turned out unavailable (row 3): the newest
      state. Since Kubernetes 1.34 (``ConsistentListFromCache``, GA) the API
      server serves even this from its watch cache, once the cache has caught
      up with etcd's current revision.
    * ``initial`` before anything was seen: client-go's ``"0"`` -- any state
      will do, so the watch cache answers from memory, whatever it holds
      (possibly a little stale, which the WATCH that follows catches up on).
    * otherwise the last one seen: a state at least that new, never older than
      what the reflector already delivered.
    """
    if unavailable:
        return ""
    return last_seen or initial
