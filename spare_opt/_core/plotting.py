"""Figure set-up shared by every plot (matplotlib, optional ``plot`` extra).

matplotlib is imported only when a figure is asked for, and figures are drawn on a
``matplotlib.figure.Figure`` with the Agg canvas: no pyplot state, no display needed.
Files are written atomically and never overwritten without ``force``.
"""

import io


from .io import write_atomic
from .errors import SpareError

__all__ = ["MISSING_MATPLOTLIB", "require_matplotlib"]

MISSING_MATPLOTLIB = "plotting needs matplotlib: pip install 'spare-opt[plot]'"


def require_matplotlib():
    """Raise :class:`SpareError` now if matplotlib is missing (call before long work).

    Returns
    -------
    None

    Raises
    ------
    SpareError
        matplotlib cannot be imported.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SpareError(MISSING_MATPLOTLIB) from None


def _figure(width, height):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise SpareError(MISSING_MATPLOTLIB) from None
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path, force):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return write_atomic(path, buffer.getvalue(), force=force)
