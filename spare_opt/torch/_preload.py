"""Imported once by the supervisor's fork server: torch, its optimizers and spare-opt's kernels.

Every rank forked from the server starts with these loaded, so neither the imports
(seconds per process on a busy machine) nor a kernel compilation lands on the start or
on the failure path.
"""

import torch  # noqa: F401
import torch._dynamo  # noqa: F401  (torch.optim imports it on first use)
import torch.distributed  # noqa: F401
import torch.utils.data  # noqa: F401

import spare_opt

if hasattr(spare_opt, "warm_up"):
    spare_opt.warm_up(micro_batches=(1, 2))
