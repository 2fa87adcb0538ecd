"""Pipeline parallelism inside a DP group: a step's micro-batches through ``torch.distributed.pipelining``.

A DP group whose mesh has a ``pp`` dimension runs the micro-batches it computes in a
step (its work under the plan, then any patch micro-batches after a failure) through a
pipeline schedule of PyTorch's own (GPipe, 1F1B, interleaved 1F1B, ...), one pipeline
micro-batch per SPARe micro-batch.  The number of micro-batches changes from step to
step (a survivor's patch work runs as further micro-batches of the same step), so
:class:`PipelineRunner` builds one schedule per count and caches it:

* **why a schedule per count, not rounds of a fixed count:** a count's own schedule runs
  exactly the micro-batches due, with the bubble of that count; rounds of a fixed count
  would pad the last round with micro-batches that compute nothing useful (a patch of one
  micro-batch would cost a whole round);
* **why a stage per count:** a ``PipelineStage`` holds the buffers and the
  micro-batch count of the schedule that initialised it last (``stage.chunks``), so two
  schedules of different counts cannot share one; each count gets its own stages over the
  same submodules (``PipelineStage(stage.submod, stage.stage_index, stage.num_stages,
  stage.device, group=stage.group)``), which share the parameters.  A schedule's first
  step infers the shapes with a real forward and backward (``torch.distributed.pipelining``'s
  dynamic inference), which clears FSDP2's gradients: the gradients accumulated so far in
  the step are held aside during every schedule step and added back after it;
* **a count the schedule class refuses** (1F1B needs at least as many micro-batches as
  stages; interleaved 1F1B a count that its rounds divide) runs under GPipe (one stage
  per rank: for a count below the number of stages both schedules run the same order)
  or, with several stages per rank, as two schedule steps whose counts it accepts
  (``pp * (n // pp)`` and ``n % pp``).

Every micro-batch's forward runs under its own random stream
(:func:`~spare_opt.torch.micro_batch_rng` of ``(seed, step, shard type, micro-batch,
part, stage)``): the stage's ``forward_one_chunk`` knows which pipeline micro-batch it
runs, and so which SPARe micro-batch.
"""

import contextlib

import torch

import spare_opt

__all__ = ["PipelineRunner"]


def _pipelining():
    from torch.distributed import pipelining
    from torch.distributed.pipelining import schedules

    return pipelining, schedules


class PipelineRunner:
    """Run micro-batches of one step through pipeline schedules, one schedule (and stage copies) per count.

    Parameters
    ----------
    stages : torch.distributed.pipelining.PipelineStage or list of them
        This rank's stages (one; several for interleaved and looped schedules), built
        as torchtitan builds them: ``PipelineStage(model_part, stage_index, num_stages,
        device, group=mesh["pp"].get_group())``.  They serve as templates: each count
        gets stages of its own over the same submodules.
    schedule : str or type
        A schedule class of ``torch.distributed.pipelining`` (``ScheduleGPipe``,
        ``Schedule1F1B``, ``ScheduleInterleaved1F1B``, ...) or its name for
        ``torch.distributed.pipelining.schedules.get_schedule_class`` (``"GPipe"``,
        ``"1F1B"``, ``"Interleaved1F1B"``).  Built with ``scale_grads=False``: the step
        helper sums the micro-batches' gradients and divides by ``N m`` itself.
    loss_fn : callable
        ``loss_fn(output, target) -> torch.Tensor``, the mean loss over one
        micro-batch (the schedule's own ``loss_fn``).
    pipeline_stages : int
        The number of ranks of the pipeline (the DP group mesh's ``pp`` size).

    Raises
    ------
    spare_opt.ParameterTypeError
        A stage is not a ``PipelineStage``, ``schedule`` is neither a schedule class nor
        a name, ``loss_fn`` is not callable.
    spare_opt.ParameterError
        An unknown schedule name; one stage for a schedule of several stages per rank
        or the other way round; stages whose process group is not the group's ``pp``
        dimension.
    """

    def __init__(self, stages, schedule, loss_fn, pipeline_stages):
        pipelining, schedules = _pipelining()
        self.templates = list(stages) if isinstance(stages, (list, tuple)) else [stages]
        if not self.templates or not all(isinstance(s, pipelining.PipelineStage) for s in self.templates):
            raise spare_opt.ParameterTypeError(
                "stages must be this rank's torch.distributed.pipelining.PipelineStage (or a list of them: several "
                f"stages per rank), got {[type(s).__name__ for s in self.templates] or stages!r}")
        if isinstance(schedule, str):
            try:
                schedule = schedules.get_schedule_class(schedule)
            except ValueError as exc:
                raise spare_opt.ParameterError(f"schedule: {exc}") from None
        if not (isinstance(schedule, type) and issubclass(schedule, schedules._PipelineSchedule)):
            raise spare_opt.ParameterTypeError(
                f"schedule must be a schedule class of torch.distributed.pipelining or its name, got {schedule!r}")
        self.multi = issubclass(schedule, schedules.PipelineScheduleMulti)
        if not self.multi and len(self.templates) != 1:
            raise spare_opt.ParameterError(
                f"{schedule.__name__} runs one stage per rank, got {len(self.templates)}: pass one stage, or a "
                "schedule of several stages per rank (Interleaved1F1B, LoopedBFS)")
        if not callable(loss_fn):
            raise spare_opt.ParameterTypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
        for stage in self.templates:
            if stage.group_size != pipeline_stages:
                raise spare_opt.ParameterError(
                    f"stage {stage.stage_index}'s process group has {stage.group_size} ranks but the DP group's mesh "
                    f"has {pipeline_stages} pipeline stages: build the stages with group=mesh['pp'].get_group()")
        self.schedule = schedule
        self.loss_fn = loss_fn
        self.pipeline_stages = pipeline_stages
        self.is_first = any(stage.is_first for stage in self.templates)
        self.is_last = any(stage.is_last for stage in self.templates)
        self.submodules = [stage.submod for stage in self.templates]
        self._cache = {}  # count -> [(count, schedule)]: the schedule steps that run that count
        self._stream = None  # (step, keys, stream) while a schedule step runs

    # ------------------------------------------------------------ schedules
    def _stages(self):
        """Stages of their own over the templates' submodules (they share the parameters)."""
        stage_class = _stage_class()
        stages = [stage_class(s.submod, s.stage_index, s.num_stages, s.device, group=s.group, dw_builder=s.dw_builder)
                  for s in self.templates]
        for stage in stages:
            stage.spare_runner = self
        return stages

    def _build(self, count):
        stages = self._stages()
        return self.schedule(stages if self.multi else stages[0], count, loss_fn=self.loss_fn, scale_grads=False)

    def plan(self, count):
        """The schedule steps that run ``count`` micro-batches: ``[(count_i, schedule_i), ...]``, built once per count."""
        if count in self._cache:
            return self._cache[count]
        _, schedules = _pipelining()
        try:
            steps = [(count, self._build(count))]
        except ValueError:
            if not self.multi:
                stages = self._stages()
                steps = [(count, schedules.ScheduleGPipe(stages[0], count, loss_fn=self.loss_fn, scale_grads=False))]
            else:
                whole = self.pipeline_stages * (count // self.pipeline_stages)
                if whole in (0, count):
                    raise
                steps = self.plan(whole) + self.plan(count - whole)
        self._cache[count] = steps
        return steps

    # ------------------------------------------------------------ running
    @contextlib.contextmanager
    def _random_stream(self, stage_index, chunk):
        if self._stream is None:
            yield
            return
        step, keys, stream = self._stream
        with stream(step, keys[chunk], stage_index):
            yield

    def run(self, step, keys, batches, parameters, stream=None, before_schedule=None):
        """Forward and backward of the micro-batches ``keys`` of ``step``, their gradients added to ``parameters``' ``.grad``.

        Parameters
        ----------
        step : int
        keys : list of int
            The SPARe micro-batch keys ``t m + j``, in the order they run.
        batches : list of (inputs, target)
            One per key: ``inputs`` a tensor (or a tuple of tensors, the first stage's
            positional arguments) and ``target`` a tensor, each of the micro-batch's
            samples along dimension 0.
        parameters : list of torch.nn.Parameter
            The parameters of this rank's stages: the gradients they hold are kept and the
            micro-batches' are added to them.
        stream : callable, optional
            ``stream(step, key, stage_index)``: the context manager of a micro-batch's
            random stream, entered around the micro-batch's forward on each stage.
        before_schedule : callable, optional
            Called before each schedule step (whose first step may infer shapes with a
            forward that is no micro-batch's).

        Returns
        -------
        list of float
            The micro-batches' mean losses on a rank of the last stage; empty elsewhere.
        """
        losses = []
        done = 0
        for count, schedule in self.plan(len(keys)):
            part = batches[done:done + count]
            self._stream = (step, keys[done:done + count], stream) if stream is not None else None
            if before_schedule is not None:
                before_schedule()
            held = [p.grad for p in parameters]
            for p in parameters:
                p.grad = None
            try:
                args = (_concatenated([inputs for inputs, _ in part]),) if self.is_first else ()
                if args and isinstance(args[0], tuple):
                    args = args[0]
                found = []
                options = {"target": _concatenated([target for _, target in part]), "losses": found} \
                    if self.is_last else {}
                schedule.step(*args, **options)
            finally:
                self._stream = None
                for p, before in zip(parameters, held):
                    if before is not None:
                        p.grad = before if p.grad is None else p.grad + before
            losses += [float(loss.detach()) for loss in found] if self.is_last else []
            done += count
        return losses


_STAGE_CLASS = []


def _stage_class():
    """``PipelineStage`` whose forward of a pipeline micro-batch runs under that micro-batch's random stream."""
    if not _STAGE_CLASS:
        pipelining, _ = _pipelining()

        class _Stage(pipelining.PipelineStage):
            spare_runner = None

            def forward_one_chunk(self, fwd_chunk_id, *args, **kwargs):
                # The schedule names the pipeline micro-batch here only: its SPARe micro-batch's
                # random stream, whoever computes it.
                with self.spare_runner._random_stream(self.stage_index, fwd_chunk_id):
                    return super().forward_one_chunk(fwd_chunk_id, *args, **kwargs)

        _STAGE_CLASS.append(_Stage)
    return _STAGE_CLASS[0]


def _concatenated(pieces):
    """The micro-batches' tensors (or tuples of tensors) stacked along dimension 0: the schedule splits them back."""
    first = pieces[0]
    if isinstance(first, (tuple, list)):
        return tuple(torch.cat([piece[i] for piece in pieces]) for i in range(len(first)))
    if not torch.is_tensor(first):
        raise spare_opt.ParameterTypeError(
            f"with pipeline stages, a micro-batch must collate to (inputs, target) of tensors, got {type(first).__name__}")
    return torch.cat(pieces)
