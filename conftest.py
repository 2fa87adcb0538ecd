"""Collection rules for the doctests of the package (``--doctest-modules`` over ``spare_opt``).

``spare_opt.torch`` is an optional part (the ``torch`` extra): without PyTorch its
modules cannot be imported, so their doctests are not collected; the TorchFT adapter
likewise needs ``torchft``.
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("spare_opt/torch")
elif importlib.util.find_spec("torchft") is None:
    collect_ignore.append("spare_opt/torch/torchft_adapter.py")
