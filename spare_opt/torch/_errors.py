"""The exceptions of :class:`~spare_opt.torch.SpareGroup` and the step helper (re-exported by :mod:`spare_opt.torch.elastic`)."""

import spare_opt


class WipeOut(RuntimeError):
    """Some shard type lost every holder, or no live group holds the state: the job restarts from the last checkpoint.

    Attributes
    ----------
    failed : list of int
        The agreed failed set that wiped the layout out.
    """

    def __init__(self, failed, reason="some shard type has no live holder"):
        self.failed = sorted(failed)
        super().__init__(f"wipe-out: groups {self.failed} failed and {reason}; "
                         "restart every group from the last checkpoint")


class Evicted(RuntimeError):
    """The survivors agreed that this group failed (it was too slow to answer): it must leave.

    A supervisor may start it again as a repaired group (``rejoin=True``).
    """


class GroupTimeout(spare_opt.SpareError, TimeoutError):
    """A wait of :class:`SpareGroup` outlasted its ``timeout``: a peer never registered, or no member admitted this one.

    Attributes
    ----------
    groups : list of int
        The groups waited for (empty when unknown).
    """

    def __init__(self, message, groups=()):
        self.groups = sorted(groups)
        super().__init__(message)


class ReplicaDivergence(spare_opt.SpareError, RuntimeError):
    """The replica-consistency check found DP groups whose state differs from the others'.

    Raised on every rank alike, before the step is applied.

    Attributes
    ----------
    step : int
        The step whose start state was compared.
    groups : list of int
        The groups that differ from the largest agreeing set.
    agreeing : list of int
        The largest set of groups that agree (of two sets of one size, the one with the
        lowest group: then no set is a majority, and the message says that either may be
        the wrong one).
    parts : list of str
        What differs: ``"parameters"``, ``"optimizer state"``, ``"optimizer hyper-parameters"``.
    """

    def __init__(self, step, groups, agreeing, parts):
        self.step = int(step)
        self.groups = sorted(groups)
        self.agreeing = sorted(agreeing)
        self.parts = list(parts)
        parts = " and ".join(self.parts)
        if len(self.agreeing) > len(self.groups):
            found = f"groups {self.groups} differ from groups {self.agreeing} in their {parts}"
        else:  # no majority: the check cannot tell which side is wrong, and does not guess
            found = (f"groups {self.agreeing} and groups {self.groups} disagree in their {parts}, and neither is a "
                     f"majority (either may be the wrong one)")
        super().__init__(
            f"replica divergence at step {self.step}: {found} (a state that was not healed, a rank-dependent "
            f"update, or a non-deterministic optimizer); the job stops: find the cause before restarting it, or it "
            f"comes back")


class DuplicateGroup(spare_opt.ParameterError):
    """Another live process already runs this DP group (the same ``SPARE_GROUP`` launched twice): this one is refused.

    The live process goes on; the refused one posts no death notice (that would evict
    the live one).  :func:`~spare_opt.torch.launchers.run_worker` exits with 77
    (``LAYOUT_EXIT``): the job's configuration is wrong, do not restart.

    Attributes
    ----------
    group : int
        The DP group that is already running.
    """

    def __init__(self, message, group):
        self.group = int(group)
        super().__init__(message)


class CheckpointMismatch(spare_opt.ParameterError):
    """The checkpoint found at start was written by another job: its data order, or its model, differs.

    Resuming it would not continue that run (another global batch, seed or dataset, so
    other samples in every step) or cannot (another model).  The job refuses to start;
    :func:`~spare_opt.torch.launchers.run_worker` exits with 77 (``LAYOUT_EXIT``): do
    not restart it until the file is moved away or ``checkpoint=`` names another path.

    Attributes
    ----------
    path : str
        The checkpoint file.
    """

    def __init__(self, message, path):
        self.path = str(path)
        super().__init__(message)


class JobEnded(RuntimeError):
    """A repaired group was not admitted: the job ended (``ended`` marker) or restarted in a new generation.

    Attributes
    ----------
    restart : bool
        ``True`` when the job moved to a new generation (a wipe-out): start again, as a
        fresh group of the new generation; ``False`` when it finished: nothing is left
        to do.
    """

    def __init__(self, message, restart=False):
        self.restart = bool(restart)
        super().__init__(message)

