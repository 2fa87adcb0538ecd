"""Atomic, no-clobber file writing shared by every writer in spare-opt."""

import os
import tempfile
from pathlib import Path

from .errors import OutputExistsError

__all__ = ["write_atomic"]


def write_atomic(path, data, *, force=False):
    """Write ``data`` to ``path`` atomically.

    The bytes go to a temporary file in the same folder, which is then moved into
    place, so a reader never sees a half-written file and a crash leaves the old file
    intact.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    data : bytes or str
        Content; ``str`` is encoded as UTF-8.
    force : bool, default False
        Replace an existing file.  Without it an existing file is never touched.

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``force`` is false.
    OSError
        The folder does not exist or is not writable.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if path.exists() and not force:
        raise OutputExistsError(f"{path} exists already (use --force / force=True to overwrite)")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        # mkstemp makes 0600 files; give the result the mode a plain open() would.
        os.chmod(tmp, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if force:
            os.replace(tmp, path)
        else:
            # link() fails if the target appeared meanwhile: no-clobber without a race.
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise OutputExistsError(
                    f"{path} exists already (use --force / force=True to overwrite)"
                ) from None
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
