"""The state of :class:`~spare_opt.torch.SpareStep`: its ``state_dict``, checkpoints written and resumed.

A mixin: :class:`Checkpoints` holds no state of its own and reads and writes the
attributes that ``SpareStep.__init__`` sets (``group``, ``model``, ``optimizer``,
``sampler``, ``extra_state``, ``checkpoint``, ``checkpoint_extra``, ``restored_extra``,
``step``, ``_params``, ``_saved_step``) and calls the host's ``_say``.  A checkpoint
records the job that wrote it (``spare_job``), so that a file of another job is refused
(:class:`~spare_opt.torch.CheckpointMismatch`), as is a file that is no checkpoint at all
and one written by DP groups of another number of ranks.
"""

import contextlib
import operator
import os
import pickle
import re

import torch

import spare_opt

from ._errors import CheckpointMismatch
from ._tensors import _from_portable, _meshes_of, _portable

#: The entry of a checkpoint that records the job that wrote it (:meth:`SpareStep._job_record`).
_JOB_KEY = "spare_job"
#: The entries of :meth:`SpareStep.state_dict` and the job record, which ``checkpoint_extra`` may not replace.
_STATE_KEYS = ("model", "optimizer", "step", "state", _JOB_KEY)


def _check_extra(extra):
    """``extra`` (``checkpoint_extra`` or what it returned) if it is a dict of new string keys that pickle; else raise.

    Every entry is pickled once into nothing (tensors stand for themselves, their data is
    not copied), so that an entry ``torch.save`` cannot write (a lambda, a generator, a
    lock) is named at once, not after training steps at the first save.
    """
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        raise spare_opt.ParameterTypeError(
            f"checkpoint_extra must be a dict with string keys or a callable that returns one, got "
            f"{type(extra).__name__}")
    taken = sorted(set(extra) & set(_STATE_KEYS))
    if taken:
        raise spare_opt.ParameterError(f"checkpoint_extra may not name {', '.join(map(repr, taken))}: the step "
                                       "helper writes those entries")
    for key, value in extra.items():
        why = _unpicklable(value)
        if why is not None:
            raise spare_opt.ParameterError(
                f"checkpoint_extra[{key!r}] cannot be pickled ({why}): checkpoints are written with torch.save; "
                "keep plain values there (numbers, strings, lists, dicts, tensors)")
    return extra


class _Sink:
    """A file that keeps nothing (what :func:`_unpicklable` pickles into)."""

    @staticmethod
    def write(data):
        return len(data)


class _Probe(pickle.Pickler):
    """A pickler that stands tensors and storages in by an id, as ``torch.save`` does, without their data."""

    def persistent_id(self, obj):
        if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            return "tensor"
        return None


def _unpicklable(value):
    """Why ``torch.save`` could not pickle ``value`` (one line), or ``None`` when it can."""
    try:
        _Probe(_Sink(), protocol=2).dump(value)  # torch.save's protocol
    except Exception as exc:  # noqa: BLE001 - pickling raises PicklingError, TypeError, AttributeError...
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return None


def _parts(path):
    """``{k: file}`` of the per-rank parts ``{path}.rank{k}`` beside ``path`` (links included, dangling or not)."""
    folder, name = os.path.split(path)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return {}
    pattern = re.compile(re.escape(name) + r"\.rank([0-9]+)")
    found = {}
    for entry in names:
        match = pattern.fullmatch(entry)
        if match:
            found[int(match.group(1))] = os.path.join(folder, entry)
    return found


def _ranks_text(parts):
    return ", ".join(os.path.basename(parts[k]) for k in sorted(parts))


def _culprit(state):
    """The entry of a checkpoint's ``state`` that does not pickle, in words (``None`` when none alone fails)."""
    for name, value in state.get("state", {}).items():
        why = _unpicklable(value)
        if why is not None:
            return f"the state_dict() of {name!r} (state=) cannot be pickled ({why})"
    for key, value in state.items():
        if key in _STATE_KEYS:
            continue
        why = _unpicklable(value)
        if why is not None:
            return f"checkpoint_extra[{key!r}] cannot be pickled ({why})"
    for key in ("model", "optimizer"):
        why = _unpicklable(state.get(key))
        if why is not None:
            return f"the {key}'s state_dict() cannot be pickled ({why})"
    return None



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
            entry of :meth:`state_dict`; or an entry does not pickle (a lambda, a
            generator, a lock: ``checkpoint_extra[...]`` or a ``state=`` object's
            ``state_dict()``, named).  Nothing is written then, and the temporary file
            ``{path}.tmp{pid}`` is removed whatever ``torch.save`` or ``os.replace`` raised.
        """
        path = self.checkpoint if path is None else os.fspath(path)
        if path is None:
            raise spare_opt.ParameterError("no checkpoint path: pass one, or checkpoint= to SpareStep")
        path = self._checkpoint_file(path)
        state = _portable(self.state_dict())
        extra = self.checkpoint_extra() if callable(self.checkpoint_extra) else self.checkpoint_extra
        if extra is not None:
            try:
                state.update(_check_extra(extra))
            except spare_opt.SpareError as exc:  # the callable's dict: found at the save, which says it wrote nothing
                raise type(exc)(f"checkpoint {path} was not written: {exc}") from None
        state[_JOB_KEY] = self._job_record()
        temporary = f"{path}.tmp{os.getpid()}"
        try:
            torch.save(state, temporary)
            os.replace(temporary, path)
        except BaseException as exc:
            # Whatever failed (a value that does not pickle, a full disk, a signal), the half-written
            # temporary goes: one left per failed save piled up beside the checkpoint across restarts.
            with contextlib.suppress(OSError):
                os.remove(temporary)
            culprit = _culprit(state) if isinstance(exc, Exception) and not isinstance(exc, OSError) else None
            if culprit is not None:
                raise spare_opt.ParameterError(f"checkpoint {path} was not written: {culprit}") from exc
            raise

    def _job_record(self):
        """What a checkpoint records of the job that wrote it: its data order, its layout, its steps."""
        sampler, group = self.sampler, self.group
        return {"dataset_size": getattr(sampler, "dataset_size", None),
                "global_batch_size": getattr(sampler, "global_batch_size", None),
                "shuffle": getattr(sampler, "shuffle", None), "seed": getattr(sampler, "seed", None),
                "steps": getattr(sampler, "steps", None), "groups": group.groups,
                "micro_batches": group.micro_batches, "layout": group.book.fingerprint}

    def _start_from_checkpoint(self):
        """At start: resume the checkpoint found at ``checkpoint`` (this rank's part), or say that none is there.

        Refused (:class:`CheckpointMismatch`, and the whole job stopped, since every restart
        would meet the same files): a file that cannot be read as a checkpoint, one of
        another job (:meth:`_load_checkpoint`), parts written by DP groups of another
        number of ranks ``K`` (``{checkpoint}.rank{k}`` of a job of ``K > 1`` ranks per group
        beside a job of one rank, or the reverse, or a part missing), and a symbolic link
        whose target is gone: each of them made the job start from step 0 without a word.
        """
        try:
            path = self._found_checkpoint()
            if path is None:
                self._say(f"no checkpoint at {self._checkpoint_file()}: starts from step 0")
                return
            self._load_checkpoint(path)
        except CheckpointMismatch as exc:
            # Every restart would meet the same file: stop the job, not only this group.
            self.group.stop_job(str(exc))
            raise

    def _found_checkpoint(self):
        """This rank's checkpoint file when there is one to resume, ``None`` for a fresh start; else refuse.

        A DP group of ``K`` ranks resumes only when all ``K`` parts ``{checkpoint}.rank{k}``
        are there and no other file of the checkpoint (``{checkpoint}`` itself, a part of
        rank ``K`` or more); a group of one rank only from ``{checkpoint}``, with no part
        beside it.  Which files are there is the same on every rank of the job (the
        checkpoint's storage is shared), so every rank takes the same branch.
        """
        path, size = self.checkpoint, self.group.group_world_size
        parts = _parts(path)
        whole = os.path.lexists(path)
        advice = "move them away to start afresh, or start the job with the DP groups that wrote them"
        if size == 1:
            if parts:
                written = max(parts) + 1
                raise CheckpointMismatch(
                    f"checkpoint {path}: found {_ranks_text(parts)} instead, the per-rank parts of a job whose DP "
                    f"groups had {written} ranks; this job's groups have 1 rank: {advice}"
                    + ("" if whole else f" (and no {os.path.basename(path)})"), path)
            if not whole:
                return None
            mine = path
        else:
            if whole:
                raise CheckpointMismatch(
                    f"checkpoint {path} was written by DP groups of 1 rank (one file); this job's groups have "
                    f"{size} ranks, each reading its part {os.path.basename(path)}.rank{{k}}: {advice}", path)
            if not parts:
                return None
            if sorted(parts) != list(range(size)):
                missing = [k for k in range(size) if k not in parts]
                what = (f"part{'s' if len(missing) > 1 else ''} of rank{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(str, missing))} missing" if missing else
                        f"parts of ranks up to {max(parts)}: written by groups of {max(parts) + 1} ranks")
                raise CheckpointMismatch(
                    f"checkpoint {path}: found {_ranks_text(parts)} ({what}); this job's DP groups have {size} "
                    f"ranks and each resumes its own part: {advice}", path)
            mine = parts[self.group.group_rank]
        if not os.path.exists(mine):
            raise CheckpointMismatch(
                f"checkpoint {mine} is a symbolic link to {os.readlink(mine)!r}, which does not exist: restore its "
                "target, or remove the link to start afresh", mine)
        return mine

    def _load_checkpoint(self, path):
        """Read the checkpoint ``path`` found at start, check its job record, load it, say so on stderr.

        Refused when the job that wrote it drew its samples in another order (dataset
        size, global batch size, shuffle, seed), since the run would not continue that
        one, or when its model or optimizer does not fit.  Another layout (N, r, m) or
        another number of steps continues the same run: the line says so.

        Raises :class:`CheckpointMismatch`: a file that is no readable checkpoint (empty,
        truncated, noise, a folder), one without SpareStep's state or with a step that is
        not an integer ``>= 0``, one of another job, one that does not fit the model.
        An ``OSError`` other than a folder or a refused permission (a storage that did not
        answer) is raised as it is: a restart may read the file.
        """
        try:
            saved = torch.load(path, weights_only=False)
        except (IsADirectoryError, PermissionError) as exc:
            raise CheckpointMismatch(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc.strerror}): "
                                     "move it away, or pass checkpoint= another path", path) from exc
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - EOFError, UnpicklingError, RuntimeError (zip), ...: no checkpoint
            what = " ".join(str(exc).split())[:200] or "no message"
            raise CheckpointMismatch(f"checkpoint {path} is not a readable checkpoint ({type(exc).__name__}: "
                                     f"{what}): it is empty, truncated or another kind of file; move it away, or "
                                     "pass checkpoint= another path", path) from exc
        if not isinstance(saved, dict) or not all(k in saved for k in ("model", "optimizer", "step")):
            raise CheckpointMismatch(f"checkpoint {path} holds no SpareStep state (model, optimizer, step): move "
                                     "it away, or pass checkpoint= another path", path)
        step = saved["step"]
        try:
            whole = None if isinstance(step, bool) else operator.index(step)
        except TypeError:
            whole = None
        if whole is None or whole < 0:
            shown = repr(step) if len(repr(step)) <= 60 else type(step).__name__
            raise CheckpointMismatch(f"checkpoint {path} holds step {shown}, not a step number (an integer >= 0): "
                                     "it was written by hand or changed; move it away, or pass checkpoint= another "
                                     "path", path)
        saved["step"] = int(whole)
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
