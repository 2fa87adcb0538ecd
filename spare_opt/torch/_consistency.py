"""The replica-consistency check of :class:`~spare_opt.torch.SpareStep`: checksums in the gradient's all-reduce.

A mixin: :class:`Consistency` reads the attributes that ``SpareStep.__init__`` sets
(``group``, ``model``, ``optimizer``, ``_size``, ``_digest_at``, ``_check_due``,
``_replicated``).  Each
live group puts three float64 checksums of its state, as their bytes, into its own slot
of the step's gradient all-reduce; every rank compares the slots alike after the
reduction and raises :class:`~spare_opt.torch.ReplicaDivergence` on a difference.
"""

import torch

from ._errors import ReplicaDivergence
from ._tensors import _local

#: Numbers per group in the consistency check: the sums of the parameters, of the
#: optimizer's state tensors and of its numeric hyper-parameters (learning rates
#: included); then a flag (1: this group sent a checksum).
_DIGEST = 3
_PARTS = ("parameters", "optimizer state", "optimizer hyper-parameters")
#: Entries per row of a checksum's partial sums.
_CHUNK = 4096
#: The checksums travel as their bytes (one buffer entry each, exact in any floating dtype
#: of at least 8 significant bits, and summed with zeros only), then the flag.
_BYTES = 8 * _DIGEST
_SLOT = _BYTES + 1

class Consistency:
    """The replica-consistency check of a :class:`~spare_opt.torch.SpareStep` (see the class's Notes)."""

    def _digest(self):
        """Three float64 checksums of this group's state (see the class's Notes)."""
        optimizer_tensors = []
        for per_param in self.optimizer.state.values():
            optimizer_tensors += [v for v in per_param.values() if torch.is_tensor(v)]
        hyper = _number_sum([{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups])
        return torch.tensor([_checksum(self.model.parameters()), _checksum(optimizer_tensors), hyper],
                            dtype=torch.float64)

    def _check(self, step, buffer):
        """The step's mean loss and admission flag; compare the groups' checksums alike on every rank, raise on a difference.

        In a DP group of several ranks each rank compares its position's checksums, and
        the verdicts, losses and flags are summed over the group's ranks (one small
        all-reduce), so that every rank of every group decides alike.
        """
        group = self.group
        n = group.groups
        slots = buffer[self._digest_at:].view(n, _SLOT)
        sent = [g for g in range(n) if float(slots[g, _BYTES]) > 0]
        odd, differ = [], set()
        if sent:
            digests = {g: slots[g, :_BYTES].round().to(torch.uint8).view(torch.float64) for g in sent}
            matches = {g: [h for h in sent if torch.equal(digests[g], digests[h])] for g in sent}
            reference = max(sent, key=lambda g: (len(matches[g]), -g))
            odd = [g for g in sent if g not in matches[reference]]
            differ = {i for g in odd for i in range(_DIGEST) if not torch.equal(digests[g][i], digests[reference][i])}
        loss, admit = float(buffer[self._size]), float(buffer[self._size + 1]) > 0
        if group.group_world_size > 1:
            verdict = torch.zeros(2 + 2 * n + _DIGEST, dtype=torch.float64)
            verdict[0], verdict[1] = loss, float(admit)
            verdict[2 + torch.tensor(sent, dtype=torch.long)] = 1.0
            verdict[2 + n + torch.tensor(odd, dtype=torch.long)] = 1.0
            verdict[2 + 2 * n + torch.tensor(sorted(differ), dtype=torch.long)] = 1.0
            group.all_reduce_in_group(verdict)
            # Each rank's loss is its share of the group's mean (its part of the samples, its
            # stage); a group that averaged its ranks' parts before the SUM has it K times.
            loss, admit = float(verdict[0]) / (group.group_world_size if self._replicated else 1), float(verdict[1]) > 0
            sent = [g for g in range(n) if verdict[2 + g] > 0]
            odd = [g for g in range(n) if verdict[2 + n + g] > 0]
            differ = {i for i in range(_DIGEST) if verdict[2 + 2 * n + i] > 0}
        if sent:
            self._check_due = False
            if odd:
                raise ReplicaDivergence(step, odd, [g for g in sent if g not in odd], [_PARTS[i] for i in sorted(differ)])
            group._event("checked", step=step, groups=sent)
        return loss, admit


def _checksum(tensors):
    """The sum of every entry of ``tensors`` as a float64, the same whatever the number of threads.

    Each tensor is summed in rows of ``_CHUNK`` entries (one thread sums one row, in an
    order that does not depend on the thread count; half-precision rows in float32),
    and the row sums are added in float64: as cheap as a native ``sum``, and bitwise
    equal for bitwise-equal tensors on the same kind of device.  Tensors smaller than a
    row are concatenated first (per dtype and device), so a model of many small tensors
    costs a few operations, not a few per tensor.
    """
    parts, small = [], {}
    for t in tensors:
        flat = _local(t).detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        if flat.dtype == torch.bool:
            flat = flat.to(torch.uint8)
        if flat.numel() < _CHUNK:
            small.setdefault((flat.dtype, flat.device), []).append(flat)
        else:
            parts += _row_sums(flat)
    for pieces in small.values():
        parts += _row_sums(torch.cat(pieces))
    return float(torch.cat(parts).sum()) if parts else 0.0


def _row_sums(flat):
    wide = torch.float32 if flat.dtype in (torch.float16, torch.bfloat16) else None
    whole = flat.numel() - flat.numel() % _CHUNK
    sums = []
    if whole:
        sums.append(flat[:whole].view(-1, _CHUNK).sum(dim=1, dtype=wide).to("cpu", torch.float64))
    if flat.numel() > whole:
        sums.append(flat[whole:].sum(dtype=wide).reshape(1).to("cpu", torch.float64))
    return sums


def _number_sum(value):
    """The sum of every number (bools and NaNs excluded) and real tensor entry in a nested state, as a float."""
    if isinstance(value, bool) or value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value) if value == value else 0.0
    if torch.is_tensor(value):
        if value.is_complex() or not value.numel():
            return 0.0
        return float(value.detach().to(torch.float64).nan_to_num().sum())
    if isinstance(value, dict):
        return sum(_number_sum(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_number_sum(v) for v in value)
    return 0.0
