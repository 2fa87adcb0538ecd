"""The phases of a recovery, read from the survivors' timelines.

:class:`~spare_opt.torch.SpareGroup` and :class:`~spare_opt.torch.SpareStep` record what
happens during a recovery in ``group.timeline``; :func:`recovery_phases` turns the
timelines of the survivors and the moments of the failures into the time each phase
took.
"""

import math
import numbers
from collections.abc import Mapping

import spare_opt

__all__ = ["RECOVERY_PHASES", "recovery_phases"]

#: The phases of a recovery, in order (see :func:`recovery_phases`).
RECOVERY_PHASES = ("detection", "agreement", "plan", "rebuild", "patch")

# The timeline events that end each phase, after the survivor's first "detect".
_MARKS = ("agree", "plan", "rebuild", "patch-plan", "recovered")
_REQUIRED = {"detect", "agree", "plan", "rebuild", "recovered"}


def _failures(failures):
    if isinstance(failures, (str, bytes, Mapping)) or not hasattr(failures, "__iter__"):
        raise spare_opt.ParameterTypeError(
            f"failures must be a sequence of (time, group) pairs, got {type(failures).__name__}")
    checked = []
    for item in failures:
        try:
            moment, group = item
        except (TypeError, ValueError):
            raise spare_opt.ParameterTypeError(f"each failure must be a (time, group) pair, got {item!r}") from None
        if not isinstance(moment, numbers.Real) or isinstance(moment, bool) or not math.isfinite(moment):
            raise spare_opt.ParameterError(f"a failure's time must be a finite number of seconds, got {moment!r}")
        if not isinstance(group, numbers.Integral) or isinstance(group, bool):
            raise spare_opt.ParameterTypeError(f"a failure's group must be an integer, got {group!r}")
        checked.append((float(moment), int(group)))
    return sorted(checked)


def recovery_phases(timelines, failures):
    """The recovery after every failure, phase by phase, on the survivor that recovered last.

    For each failure and each survivor, the survivor's first ``detect`` event after the
    failure and the ``agree``, ``plan``, ``rebuild``, ``patch-plan`` and ``recovered``
    events that follow it (before the next failure) mark the phases of
    :data:`RECOVERY_PHASES`:

    * ``detection``: the failure to ``detect`` (a collective raised, the abort flag, a
      death notice or a stale heartbeat);
    * ``agreement``: ``detect`` to ``agree`` (the agreed failed set read from the store);
    * ``plan``: ``agree`` to ``plan`` (the members' records read and the plan of the
      failed set computed; ``plan_compute`` is the plan alone);
    * ``rebuild``: ``plan`` to ``rebuild`` (the process group of the survivors);
    * ``patch``: ``rebuild`` to ``recovered`` (the patch micro-batches planned and
      computed, the step's gradient all-reduced and applied; ``patch_plan`` is the
      planning alone).

    Parameters
    ----------
    timelines : mapping of int to list of (str, float, dict)
        Each survivor's ``SpareGroup.timeline`` by group: ``(event, time.time(), extra)``.
        A group that was killed may be left in; its timeline ends before the failure.
    failures : sequence of (float, int)
        ``(time.time(), group)`` of every failure: when the group was killed or died
        (a :class:`~spare_opt.torch.Supervisor`'s ``kill`` or ``death`` events, or a
        launcher's record), in any order.

    Returns
    -------
    list of dict
        One per failure in time order, with ``group`` (the failed one), ``source``
        (what first detected it, without the detail after a colon: ``"collective
        raised"``, ``"abort flag"``, ``"death notice"``, ``"stale heartbeat"``...), ``step`` (the step
        that recovered), the :data:`RECOVERY_PHASES` in seconds, ``plan_compute`` and
        ``patch_plan`` (seconds), ``spare_opt`` (their sum: spare-opt's own compute on
        the recovery path, the rest being waits on the store, the process group and the
        model) and ``total`` (the failure to ``recovered``), all on the survivor that
        recovered last.  A failure after which no survivor recorded a whole recovery (a
        wipe-out, a failure during another's recovery, the job's end) has no row.

    Raises
    ------
    spare_opt.ParameterTypeError
        ``timelines`` is not a mapping, or a failure is not a ``(time, group)`` pair.
    spare_opt.ParameterError
        A failure's time is not a finite number.

    Notes
    -----
    The phases subtract times taken on different processes (the failure's moment and
    the survivor's events), so their clocks must agree: one machine, or machines whose
    clocks are synchronised well below the phases measured.
    """
    if not isinstance(timelines, Mapping):
        raise spare_opt.ParameterTypeError(
            f"timelines must be a mapping of group to SpareGroup.timeline, got {type(timelines).__name__}")
    failures = _failures(failures)
    rows = []
    for index, (moment, failed) in enumerate(failures):
        end = failures[index + 1][0] if index + 1 < len(failures) else math.inf
        slowest = None
        for timeline in timelines.values():
            marks = {}
            for name, when, extra in timeline:
                if when < moment or when >= end:
                    continue
                if name == "detect" and "detect" not in marks:
                    marks["detect"] = (when, extra)
                elif "detect" in marks and name in _MARKS and name not in marks:
                    marks[name] = (when, extra)
            if not _REQUIRED <= set(marks):
                continue
            if slowest is None or marks["recovered"][0] > slowest["recovered"][0]:
                slowest = marks
        if slowest is None:
            continue
        time_of = {name: value[0] for name, value in slowest.items()}
        patch_plan = time_of["patch-plan"] - time_of["rebuild"] if "patch-plan" in time_of else 0.0
        plan_compute = float(slowest["plan"][1].get("seconds", 0.0))
        rows.append({
            "group": failed,
            "source": str(slowest["detect"][1].get("source", "")).split(":")[0],
            "step": slowest["recovered"][1].get("step"),
            "detection": time_of["detect"] - moment,
            "agreement": time_of["agree"] - time_of["detect"],
            "plan": time_of["plan"] - time_of["agree"],
            "rebuild": time_of["rebuild"] - time_of["plan"],
            "patch": time_of["recovered"] - time_of["rebuild"],
            "plan_compute": plan_compute,
            "patch_plan": patch_plan,
            "spare_opt": plan_compute + patch_plan,
            "total": time_of["recovered"] - moment,
        })
    return rows
