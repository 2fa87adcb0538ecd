"""Atomic, no-clobber file writing shared by every writer in spare-opt, and path checks."""

import errno
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .validation import _quoted
from .errors import OutputExistsError, OutputWriteError, ParameterError

__all__ = [
    "write_atomic",
    "write_document",
    "as_path",
    "json_default",
    "dumps_json",
    "reading",
    "read_json_file",
    "parse_json_text",
    "check_version",
    "optional_object",
    "has_bool",
]


def as_path(value, error=ParameterError, what="path"):
    """Check that ``value`` names a file and return it as a :class:`pathlib.Path`.

    Parameters
    ----------
    value : str, bytes or os.PathLike
        The path given by the caller.
    error : type, default ParameterError
        The :class:`~spare_opt._core.errors.SpareError` subclass to raise.
    what : str
        How the path is called in the message (``"layout file"``...).

    Returns
    -------
    pathlib.Path
        ``value`` as a path (``bytes`` decoded with :func:`os.fsdecode`).

    Raises
    ------
    error
        ``value`` is not a path (``None``, a number...), is empty or blank, or holds
        a NUL character (the operating system would reject it with a bare error).
    """
    try:
        text = os.fspath(value)
    except TypeError:
        raise error(f"{what} must be a file path (str or os.PathLike), got {type(value).__name__}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise error(f"{what} is empty")
    if "\0" in text:
        raise error(f"{what} {text!r} contains a NUL character")
    return Path(text)


def write_atomic(path, data, *, force=False):
    """Write ``data`` to ``path`` atomically.

    The bytes go to a temporary file in the same folder, which is then moved into
    place, so a reader never sees a half-written file and a crash leaves the old file
    intact.  A symbolic link is followed and kept: its target is written, replaced
    (with ``force``) when it exists, created when the link dangles (a missing target
    holds no data to protect, so ``force`` is not needed; the target's folder must
    exist).  This is what ``open(path, "w")`` and the shell's ``>`` do.  An
    existing special file (``/dev/null``, a FIFO, a terminal) is written through
    directly, ``force`` or not: renaming onto it would replace the device node itself
    with a regular file.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    data : bytes or str
        Content; ``str`` is encoded as UTF-8.
    force : bool, default False
        Replace an existing file.  Without it an existing file is never touched.

    Returns
    -------
    pathlib.Path
        ``path`` as given.

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``force`` is false.
    OutputWriteError
        ``path`` is not a usable path (empty, not a str/PathLike), is a folder, its
        folder (or, for a symbolic link, its target's folder) does not exist or is not
        a folder, is a loop of symbolic links, or the file cannot be written
        (permission, full disk...).  It is an ``OSError`` too; its ``reason``
        attribute is the why without the path.
    """
    path = given = as_path(path, OutputWriteError, "output path")
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        if path.is_symlink():
            try:
                os.stat(path)
            except FileNotFoundError:
                pass  # a dangling link: its target is created below
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _write_error(path, "it is a loop of symbolic links") from None
                raise
            path = Path(os.path.realpath(path))
        if path.exists() and not path.is_file() and not path.is_dir():
            with open(path, "wb") as handle:
                handle.write(data)
            return given
        if path.is_dir():
            raise _write_error(path, "it is a folder")
        if path.exists() and not force:
            raise OutputExistsError(f"{path} exists already (use --force / force=True to overwrite)")
    except OSError as exc:
        if isinstance(exc, (OutputExistsError, OutputWriteError)):
            raise
        raise _write_error(path, _reason(exc, path.parent)) from None
    with _terminate_cleanly():
        _write_through_temp(path, data, force)
    return given


def _write_through_temp(path, data, force):
    """The temporary file of :func:`write_atomic`, moved (or linked) into place; removed on any failure."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    except OSError as exc:
        raise _write_error(path, _reason(exc, path.parent)) from None
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
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, (OutputExistsError, OutputWriteError)):
            raise _write_error(path, _reason(exc, path.parent)) from None
        raise


class _Terminated(BaseException):
    """SIGTERM arrived while a temporary file existed (raised by the handler of :func:`_terminate_cleanly`)."""


@contextmanager
def _terminate_cleanly():
    """Turn SIGTERM into an exception while the block runs, then die of it after the cleanup.

    SIGINT raises ``KeyboardInterrupt``, which the ``except BaseException`` of
    :func:`_write_through_temp` turns into the removal of the temporary file; SIGTERM's
    default action kills the process at once and left the file behind.  Here SIGTERM
    raises :class:`_Terminated` instead, the temporary file is removed on the way out,
    and the signal is then sent again with its default action restored, so the
    process still ends as killed by SIGTERM (exit status 143 in a shell).  Only in the
    main thread (where Python runs signal handlers), and only when SIGTERM has its
    default action: a handler the application installed, or an ignored signal, is
    left alone.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise  # not reached: the default action ends the process
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def write_document(path, data, *, force, error, what):
    """:func:`write_atomic`, with a failure raised as ``error`` naming ``what`` and the path.

    The write side of :func:`read_json_file`: every file type's ``save`` reports
    "cannot write <what> <path>: <why>" in its own exception class.

    Parameters
    ----------
    path : pathlib.Path
    data : str or bytes
    force : bool
        Replace an existing file.
    error : type
        The exception class to raise (a :class:`~spare_opt._core.errors.SpareError`).
    what : str
        What the file is, for the message (``"layout file"``).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``force`` is false.
    error
        The file cannot be written.
    """
    try:
        write_atomic(path, data, force=force)
    except OutputWriteError as exc:
        raise error(f"cannot write {what} {path}: {getattr(exc, 'reason', exc)}") from None
    return path


def _write_error(path, reason):
    """OutputWriteError for ``path``; ``.reason`` keeps the why, ``.path`` the path.

    (Setting ``OSError.filename`` would change the message to ``[Errno None] ...``.)
    """
    error = OutputWriteError(f"cannot write {path}: {reason}")
    error.path = str(path)
    error.reason = reason
    return error


def _reason(exc, folder):
    """One line saying why a write failed, naming a missing folder rather than errno text."""
    folder = folder or Path(".")
    if not folder.exists():
        return f"folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    return exc.strerror or str(exc)


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def json_default(value):
    """``json.dumps(default=...)`` hook: numpy scalars and arrays as Python numbers and lists.

    Parameters
    ----------
    value : object
        A value ``json.dumps`` cannot serialise by itself.

    Returns
    -------
    int, float, bool, str or list
        ``value.item()`` for a numpy scalar, ``value.tolist()`` for an array.

    Raises
    ------
    TypeError
        ``value`` is neither (what ``json.dumps`` expects from its hook).
    """
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} value {value!r} is not JSON-serialisable")


def dumps_json(document, *, indent=2, flat_lists=False, flat_records=False):
    """The one JSON writer of spare-opt: ``document`` as JSON text, refusing NaN and infinity.

    JSON has no NaN or infinity (``json.dumps`` would write the non-standard ``NaN`` and
    ``Infinity``); result classes put ``None`` where a number cannot be given
    (their ``to_dict()``), so a non-finite number reaching this writer is a bug.

    Parameters
    ----------
    document : object
        A JSON-ready document; numpy scalars and arrays are converted (:func:`json_default`).
    indent : int or None, default 2
    flat_lists : bool, default False
        Write every list of numbers, strings, booleans or nulls on one line (a plan's
        ``N`` group ids would otherwise take ``N`` lines); objects and lists of lists
        are still indented.
    flat_records : bool, default False
        Write every object of a list of flat objects (records: no list or object
        inside) on one line, one record per line, as well as what ``flat_lists``
        flattens: a replay's 100,000 event rows take 100,000 lines instead of 1.4
        million, and are written by ``json``'s C encoder.

    Returns
    -------
    str

    Raises
    ------
    SpareError
        The document holds a NaN or infinite number.
    """
    from .errors import SpareError

    try:
        if flat_records and indent is not None:  # leaves converted as they are written: no round trip
            return _dumps_flat(document, indent, 0, True)
        if flat_lists and indent is not None:
            return _dumps_flat(json.loads(json.dumps(document, default=json_default, allow_nan=False)), indent, 0)
        return json.dumps(document, indent=indent, default=json_default, allow_nan=False)
    except ValueError as exc:
        if "JSON compliant" not in str(exc):
            raise
        raise SpareError("internal error: a result holds a NaN or infinite number, which JSON cannot hold") from None


def _dumps_flat(value, indent, level, records=False):
    """JSON of a plain document (already JSON types), lists of scalars (and, with
    ``records``, objects of a list of flat objects) on one line."""
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(key)}: {_dumps_flat(item, indent, level + 1, records)}"
                 for key, item in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and any(isinstance(item, (list, dict)) for item in value):
        if records and all(isinstance(item, dict) and not any(isinstance(v, (list, dict)) for v in item.values())
                           for item in value):
            return "[\n" + ",\n".join(inner + _leaf(item) for item in value) + f"\n{pad}]"
        items = [f"{inner}{_dumps_flat(item, indent, level + 1, records)}" for item in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return _leaf(value)


def _leaf(value):
    """One value on one line (numpy converted, NaN refused)."""
    return _LEAF_ENCODER.encode(value)


_LEAF_ENCODER = json.JSONEncoder(default=json_default, allow_nan=False)


def read_json_file(path, error, what, expected="JSON", malformed="malformed JSON"):
    """Read and parse a JSON file; every failure becomes one ``error`` line naming the file.

    The one JSON reader of spare-opt (layouts, failure sets, fault traces); the text is
    parsed by :func:`parse_json_text`.

    Parameters
    ----------
    path : pathlib.Path
        The file (already checked by :func:`as_path`).
    error : type
        The :class:`~spare_opt._core.errors.SpareError` subclass to raise.
    what : str
        How the file is called in messages (``"layout file"``, ``"fault trace"``).
    expected : str
        What a text file was expected to be, for the message on binary input.
    malformed : str
        How a parse failure is worded.

    Returns
    -------
    object
        The parsed document.

    Raises
    ------
    error
        The file is missing, a folder, unreadable, not UTF-8 text, or not JSON
        (including JSON nested too deeply for Python's parser, an object with a
        duplicated key, an integer too long to convert).
    """
    with reading(path, error, what, expected):
        text = path.read_text(encoding="utf-8")
    return parse_json_text(text, error, str(path), malformed)


class _DuplicateKey(Exception):
    """Raised by the ``object_pairs_hook`` of :func:`parse_json_text` (never escapes it)."""


def _unique_keys(pairs):
    """``object_pairs_hook``: the object as a dict, refusing a key given twice."""
    result = dict(pairs)
    if len(result) != len(pairs):  # rare: find the first key given twice
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def parse_json_text(text, error, source, malformed="malformed JSON"):
    """Parse JSON text strictly; every failure becomes one ``error`` line naming ``source``.

    Stricter than :func:`json.loads` where it would silently pick an answer or fail with
    a bare exception:

    * an object with a **duplicated key** is refused (``json.loads`` keeps the last
      value, so ``{"events": [...], "events": []}`` would read as no events);
    * an **integer too long to convert** (more than Python's 4300-digit limit) is
      refused with one line instead of a ``ValueError`` from ``int()``;
    * JSON **nested too deeply** for Python's parser is refused instead of a
      ``RecursionError``.

    ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON, are refused as well.

    Parameters
    ----------
    text : str
    error : type
        The :class:`~spare_opt._core.errors.SpareError` subclass to raise.
    source : str
        The file (or document) named in messages.
    malformed : str
        How a parse failure is worded.

    Returns
    -------
    object

    Raises
    ------
    error
        As above, or any other JSON syntax error (line and column given).
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _DuplicateKey as exc:
        raise error(f"{source}: {malformed} (duplicated key {_quoted(exc.args[0])} in an object)") from None
    except _NonStandard as exc:
        raise error(f"{source}: {malformed} ({exc.args[0]} is not a JSON number)") from None
    except json.JSONDecodeError as exc:
        raise error(f"{source}: {malformed} ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise error(f"{source}: {malformed} (nested too deeply)") from None
    except ValueError as exc:
        # int() of a literal beyond sys.get_int_max_str_digits(): "Exceeds the limit (4300 digits)..."
        if "integer string conversion" not in str(exc):
            raise
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise error(f"{source}: {malformed} (an integer has more than {limit} digits, "
                    "too long to convert)") from None


class _NonStandard(Exception):
    """Raised by the ``parse_constant`` hook of :func:`parse_json_text` (never escapes it)."""


def _no_constant(name):
    raise _NonStandard(name)


def check_version(doc, expected, source, error, format_name):
    """Check the ``version`` field of a versioned document: an ``int`` (not ``true``, not ``1.0``) equal to ``expected``.

    The one version check of every reader (layouts, ``spare-failure-trace``): ``1.0``
    and ``true`` compare equal to ``1`` in Python but are not version numbers.

    Parameters
    ----------
    doc : dict
    expected : int
    source : str
        The file named in messages.
    error : type
        The :class:`~spare_opt._core.errors.SpareError` subclass to raise.
    format_name : str
        The format named in messages (``"spare-layout"``).

    Raises
    ------
    error
        ``version`` is missing, not an integer, or not ``expected``.
    """
    version = doc.get("version")
    if type(version) is not int or version != expected:
        if "version" not in doc:
            shown = "(missing)"
        elif type(version) is int:
            shown = str(version) if abs(version) < 10**40 else "(a huge integer)"
        elif isinstance(version, (bool, float, type(None))):
            shown = repr(version)
        elif isinstance(version, str):
            shown = repr(version[:40])
        else:
            shown = f"(a JSON {'object' if isinstance(version, dict) else 'list'})"
        raise error(f"{source}: {format_name} version {shown} is not supported (expected the integer {expected})")


def optional_object(doc, key, source, error):
    """The optional object field ``key`` of a document: ``{}`` when missing or ``null``, else a dict.

    The one rule of every reader for an optional object (``metadata``): ``[]``, ``0``,
    ``""`` and ``false`` are refused like ``1``, not taken as an empty object.

    Raises
    ------
    error
        The field is present and neither ``null`` nor an object.
    """
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise error(f"{source}: {key!r} must be an object or null, got a JSON {_json_kind(value)}")
    return value


def has_bool(rows):
    """Whether a list of lists (a parsed JSON matrix) holds a ``true`` or ``false`` anywhere.

    ``numpy.asarray`` turns ``[[0, true]]`` into integers; the readers refuse booleans
    where numbers are expected, as ``version``, ``groups`` and ``offsets`` do.
    """
    from itertools import chain

    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return False  # the shape check names what is wrong
    return bool in set(map(type, chain.from_iterable(rows)))


def _json_kind(value):
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else type(value).__name__


@contextmanager
def reading(path, error, what, expected):
    """Turn the operating-system errors of reading ``path`` into one ``error`` line.

    Parameters
    ----------
    path : pathlib.Path
    error : type
        The :class:`~spare_opt._core.errors.SpareError` subclass to raise.
    what : str
        How the file is called in messages (``"layout file"``...).
    expected : str
        What the file was expected to hold, for the message on non-UTF-8 input.

    Raises
    ------
    error
        The file is missing, a folder, unreadable or not UTF-8 text.
    """
    try:
        yield
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory") from None
    except PermissionError:
        raise error(f"{what} {path} is not readable (permission denied)") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file (expected {expected})") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
