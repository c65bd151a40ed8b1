"""Errors of a Ray job, as ortcore's: what an actor raised, or a failure of Ray itself.

An exception raised in a Ray task or actor reaches the driver wrapped:
``RayTaskError`` (a class made on the fly that also derives from the cause's
class), Ray Data's ``UserCodeException``, an ``ActorDiedError`` whose text
holds the traceback of a constructor that raised. :func:`job_error` finds
the exception the task raised and returns it (an ortcore error as it was; any
other exception as a :class:`~ortcore.errors.Fail` naming it). When Ray kept
only its text (an older Ray Data, an actor constructor) the last exception
line of that text is parsed back. A failure with no such exception (an actor
or node that died and was not restarted, a lost object, Ray's own error)
becomes :class:`ClusterError`: the input and model are not at fault, and a
rerun resumes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ortcore import errors
from ortcore.errors import Fail, OrtcoreError, ProviderOptionError

__all__ = ["ClusterError", "job_error"]


class ClusterError(Fail):
    """Ray itself failed under a job: an actor or node died and was not
    restarted, an object was lost, the cluster went away.

    The job's input, model and options are not at fault; what was written is
    kept, and running the job again resumes it (``ortcore batch`` exits with
    status 3 on it, 2 on errors of the input or model).
    """


# An exception line of a traceback: "module.Class: message" (or a builtin's name).
_EXCEPTION_LINE = re.compile(
    r"^(?P<cls>(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*|\w+(?:Error|Exception)): (?P<msg>.*)$"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MESSAGE_END = ("Traceback (most recent call last)", "The above exception", "During handling")


def job_error(exc: BaseException) -> BaseException:
    """The error to report for ``exc``, raised in the driver by a Ray (Data) job.

    Returns:
        the exception a task or actor raised when it is an ortcore error (or
        a provider's ``ProviderOptionError``); another exception a task raised
        as a ``Fail`` naming its type; :class:`ClusterError` for a failure of
        Ray itself; ``exc`` unchanged when it does not come from Ray.
    """
    chain = list(_chain(exc))
    if (isinstance(exc, OrtcoreError) and not _from_ray(exc)) or not any(map(_from_ray, chain)):
        return exc  # raised in the driver, not by Ray
    try:
        from ray import exceptions as rx
    except ImportError:  # pragma: no cover - a Ray error without Ray
        return exc
    for e in chain:
        # What the task raised, whole, as Ray keeps it; not an exception the
        # driver's Ray code met on its way (a StopIteration in __context__).
        cause = getattr(e, "cause", None) if isinstance(e, rx.RayTaskError) else None
        if isinstance(cause, Exception) and not _from_ray(cause):
            return _as_ortcore(cause)
    for e in chain:
        # The task's code raised, but Ray kept only its traceback's text.
        raised_in_task = isinstance(e, rx.RayTaskError) or (
            isinstance(e, rx.RayActorError) and getattr(e, "_actor_init_failed", False)
        )
        if raised_in_task:
            parsed = _parse(str(e))
            if parsed is not None:
                return parsed
    for e in chain:
        if isinstance(e, rx.RayError) and not isinstance(e, rx.RayTaskError):
            return ClusterError(
                f"Ray failed under the job ({type(e).__name__}: {_summary(e)}); the input and "
                "model are not at fault: the rows written so far are kept, run the job again "
                "to resume"
            )
    if any(_from_ray(e) for e in chain):
        return ClusterError(
            f"Ray failed under the job ({type(exc).__name__}: {_summary(exc)}); run the job "
            "again to resume"
        )
    return exc


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes: Ray's ``cause`` attribute, ``__cause__``, ``__context__``."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        for nxt in (getattr(e, "cause", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def _from_ray(e: BaseException) -> bool:
    """Whether ``e`` is Ray's own exception (its module is Ray's), not one a task raised."""
    return type(e).__module__.split(".")[0] == "ray"


def _as_ortcore(e: BaseException) -> BaseException:
    _strip_retry_note(e)
    if isinstance(e, (OrtcoreError, ProviderOptionError)):
        return e
    return Fail(f"a task of the job raised {type(e).__name__}: {e}")


# Ray Data appends to a task's exception message how often it tried the task,
# and how to configure its retries; the message is the task's without it.
_RETRY_NOTE = re.compile(
    r"\n?Failed to [^\n]* after \d+/\d+ attempts \(total backoff[^\n]*(\n.*)?\Z", re.S
)


def _strip_retry_note(e: BaseException) -> None:
    if e.args and isinstance(e.args[0], str):
        stripped = _RETRY_NOTE.sub("", e.args[0])
        if stripped != e.args[0]:
            try:
                e.args = (stripped, *e.args[1:])
            except (AttributeError, TypeError):  # pragma: no cover - a read-only args
                pass


def _parse(text: str) -> BaseException | None:
    """The last exception of a traceback's text (not Ray's own), rebuilt."""
    lines = _ANSI.sub("", text).splitlines()
    found: tuple[str, str] | None = None
    for i, line in enumerate(lines):
        m = _EXCEPTION_LINE.match(line)
        if not m or m["cls"].split(".")[0] == "ray":
            continue
        parts = [m["msg"]]
        for more in lines[i + 1 :]:
            if not more.strip() or more.startswith(_MESSAGE_END):
                break
            parts.append(more)
        found = (m["cls"], _RETRY_NOTE.sub("", "\n".join(parts)))
    if found is None:
        return None
    cls_name, message = found
    module, _, name = cls_name.rpartition(".")
    cls = getattr(errors, name, None) if module.startswith("ortcore") else None
    if isinstance(cls, type) and issubclass(cls, OrtcoreError):
        try:
            return cls(message)
        except TypeError:
            pass
    return Fail(f"a task of the job raised {name}: {message}")


def _summary(e: BaseException) -> str:
    """The first line of a Ray error, and the actor's class when it names one."""
    text = _ANSI.sub("", str(e)).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    m = re.search(r"class_name: (\S+)", text)
    return f"{first} ({m[1]})" if m else first
