"""TorchFT adapter (placeholder, filled below)."""

__all__ = ["TorchFTPlan"]


class TorchFTPlan:
    pass
