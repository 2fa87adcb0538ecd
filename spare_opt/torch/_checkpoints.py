"""The state of :class:`~spare_opt.torch.SpareStep`: its ``state_dict``, checkpoints written and resumed.

A mixin: :class:`Checkpoints` holds no state of its own and reads and writes the
attributes that ``SpareStep.__init__`` sets (``group``, ``model``, ``optimizer``,
``sampler``, ``extra_state``, ``checkpoint``, ``checkpoint_extra``, ``restored_extra``,
``step``, ``_params``, ``_saved_step``) and calls the host's ``_say``.  A checkpoint
records the job that wrote it (``spare_job``), so that a file of another job is refused
(:class:`~spare_opt.torch.CheckpointMismatch`).
"""

import os

import torch

import spare_opt

from ._errors import CheckpointMismatch
from ._tensors import _from_portable, _meshes_of, _portable

#: The entry of a checkpoint that records the job that wrote it (:meth:`SpareStep._job_record`).
_JOB_KEY = "spare_job"
#: The entries of :meth:`SpareStep.state_dict` and the job record, which ``checkpoint_extra`` may not replace.
_STATE_KEYS = ("model", "optimizer", "step", "state", _JOB_KEY)


def _check_extra(extra):
    """``extra`` (``checkpoint_extra`` or what it returned) if it is a dict of new string keys; else raise."""
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        raise spare_opt.ParameterTypeError(
            f"checkpoint_extra must be a dict with string keys or a callable that returns one, got "
            f"{type(extra).__name__}")
    taken = sorted(set(extra) & set(_STATE_KEYS))
    if taken:
        raise spare_opt.ParameterError(f"checkpoint_extra may not name {', '.join(map(repr, taken))}: the step "
                                       "helper writes those entries")
    return extra



class Checkpoints:
    """The state of a :class:`~spare_opt.torch.SpareStep`: what a heal sends, what a checkpoint holds, the resume."""

    def state_dict(self):
        """``{"model", "optimizer", "step", "state"}``: what a repaired group heals from, and what checkpoints hold.

        ``"state"`` maps every name of the ``state`` argument to its object's ``state_dict()``.
        """
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step,
                "state": {name: value.state_dict() for name, value in self.extra_state.items()}}

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s result.

        Raises
        ------
        spare_opt.ParameterError
            ``state`` lacks an object registered with the ``state`` argument.
        """
        extra = state.get("state", {})
        missing = sorted(set(self.extra_state) - set(extra))
        if missing:
            raise spare_opt.ParameterError(f"the saved state has no {', '.join(map(repr, missing))} (registered "
                                           f"with state=): it was written by a job that did not register them")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for name, value in self.extra_state.items():
            value.load_state_dict(extra[name])
        self.step = int(state["step"])

    def save_checkpoint(self, path=None):
        """Write :meth:`state_dict` and ``checkpoint_extra`` to ``path`` (default: ``checkpoint``) atomically.

        A temporary file, then ``os.replace``.  In a DP group of ``K > 1`` ranks every
        rank writes its own part, ``{path}.rank{k}`` (sharded tensors as their local
        shards), and loads it back at a restart.  The step helper calls it on the
        lowest live group's ranks; called by hand it writes from every caller.

        Raises
        ------
        spare_opt.ParameterError
            No path; or ``checkpoint_extra`` (called) gave no dict, or one that names an
            entry of :meth:`state_dict`.
        """
        path = self.checkpoint if path is None else os.fspath(path)
        if path is None:
            raise spare_opt.ParameterError("no checkpoint path: pass one, or checkpoint= to SpareStep")
        path = self._checkpoint_file(path)
        state = _portable(self.state_dict())
        extra = self.checkpoint_extra() if callable(self.checkpoint_extra) else self.checkpoint_extra
        if extra is not None:
            state.update(_check_extra(extra))
        state[_JOB_KEY] = self._job_record()
        temporary = f"{path}.tmp{os.getpid()}"
        torch.save(state, temporary)
        os.replace(temporary, path)

    def _job_record(self):
        """What a checkpoint records of the job that wrote it: its data order, its layout, its steps."""
        sampler, group = self.sampler, self.group
        return {"dataset_size": getattr(sampler, "dataset_size", None),
                "global_batch_size": getattr(sampler, "global_batch_size", None),
                "shuffle": getattr(sampler, "shuffle", None), "seed": getattr(sampler, "seed", None),
                "steps": getattr(sampler, "steps", None), "groups": group.groups,
                "micro_batches": group.micro_batches, "layout": group.book.fingerprint}

    def _resume(self, path):
        """Load the checkpoint ``path`` found at start, once it is known to be this job's; say so on stderr.

        Refused (:class:`CheckpointMismatch`) when the job that wrote it drew its samples
        in another order (dataset size, global batch size, shuffle, seed), since the run
        would not continue that one, or when its model or optimizer does not fit.  Another
        layout (N, r, m) or another number of steps continues the same run: the line says so.
        """
        try:
            self._load_checkpoint(path)
        except CheckpointMismatch as exc:
            # Every restart would meet the same file: stop the job, not only this group.
            self.group.stop_job(str(exc))
            raise

    def _load_checkpoint(self, path):
        """:meth:`_resume`'s work: read ``path``, check its job record, load it, say so.

        Raises :class:`CheckpointMismatch`.
        """
        saved = torch.load(path, weights_only=False)
        if not isinstance(saved, dict) or not all(k in saved for k in ("model", "optimizer", "step")):
            raise CheckpointMismatch(f"checkpoint {path} holds no SpareStep state (model, optimizer, step): move "
                                     "it away, or pass checkpoint= another path", path)
        ours, theirs = self._job_record(), saved.get(_JOB_KEY)
        notes = []
        if isinstance(theirs, dict):
            order = ("dataset_size", "global_batch_size", "shuffle", "seed")
            differ = [k for k in order if theirs.get(k) != ours[k]]
            if differ:
                pairs = "; ".join(f"{k} {theirs.get(k)} there, {ours[k]} here" for k in differ)
                raise CheckpointMismatch(
                    f"checkpoint {path} was written by another job ({pairs}): resuming it would not continue that "
                    f"run; move it away, or pass checkpoint= another path", path)
            if theirs.get("layout") != ours["layout"]:
                notes.append(f"written under N={theirs.get('groups')}, m={theirs.get('micro_batches')}, layout "
                             f"{theirs.get('layout')}; this job: N={ours['groups']}, m={ours['micro_batches']}")
            if theirs.get("steps") != ours["steps"]:
                notes.append(f"written by a job of {theirs.get('steps')} steps; this one has {ours['steps']}")
        else:
            notes.append("it records no job (written by hand or by an earlier version): its data order is not checked")
        try:
            self.load_state_dict(self._restore(saved))
        except (RuntimeError, KeyError, ValueError, spare_opt.ParameterError) as exc:
            # torch's message is several lines (a heading, then the keys and shapes): one line of it.
            what = " ".join(str(exc).split()) or type(exc).__name__
            if len(what) > 400:
                what = what[:400] + " ..."
            raise CheckpointMismatch(f"checkpoint {path} does not fit this model or optimizer ({what}): move it "
                                     "away, or pass checkpoint= another path", path) from exc
        self.restored_extra = {k: v for k, v in saved.items() if k not in _STATE_KEYS}
        self._saved_step = self.step
        steps = ours["steps"]
        if steps is not None and self.step >= steps:
            notes.append(f"this job has {steps} steps: nothing is left to train")
        self._say(f"resumes from checkpoint {path} at step {self.step}" + "".join(f"; {note}" for note in notes))
        self.group._event("restored", step=self.step)

    def _checkpoint_file(self, path=None):
        path = self.checkpoint if path is None else path
        return path if self.group.group_world_size == 1 else f"{path}.rank{self.group.group_rank}"

    def _restore(self, state):
        """:meth:`state_dict`'s result from its portable form (local shards back into this rank's sharded tensors)."""
        return _from_portable(state, _meshes_of(self._params, self.group.group_mesh))
