"""Plain CSV fault logs: one row per fault, ``node,start,end`` with optional ``domain`` and ``kind``.

:func:`parse_fault_csv` reads the text of a log: a header ``node,start,end`` with
optional ``domain`` and ``kind`` columns, one row per fault, times as ISO-8601
timestamps (any UTC offset) or as numbers in a given unit (:data:`TIME_UNITS`), ``end``
empty while a fault is open (``docs/formats.md``).  The rows become fault events, and
:func:`spare_opt.traces.trace._build_trace` handles what is irregular in them exactly
as for the JSON formats.  :func:`spare_opt.read_fault_trace` reads a CSV file.
"""

import csv
import datetime
import io
import re


from .._core import validation as check
from .._core.errors import TraceError
from .trace import _Events, _build_trace, _shown_text

__all__ = [
    "TIME_UNITS",
    "CSV_COLUMNS",
    "CSV_OPTIONAL_COLUMNS",
    "parse_fault_csv",
]
#: Units of the numeric times of a CSV fault log, in days.
TIME_UNITS = {"seconds": 1.0 / 86400.0, "minutes": 1.0 / 1440.0, "hours": 1.0 / 24.0, "days": 1.0}
#: Columns of a CSV fault log: the required ones, then the optional ones.
CSV_COLUMNS = ("node", "start", "end")
CSV_OPTIONAL_COLUMNS = ("domain", "kind")
#: Fault class of a CSV row whose ``kind`` is empty or absent.
UNSPECIFIED_KIND = "unspecified"


# ------------------------------------------------------------------------- CSV fault logs
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?",
    re.ASCII | re.IGNORECASE,
)


def parse_fault_csv(text, source="<memory>", *, time_unit=None):
    """Build a :class:`FaultTrace` from the text of a CSV fault log.

    The format (``docs/formats.md``): a header line naming the columns ``node``,
    ``start``, ``end`` (required) and ``domain``, ``kind`` (optional), in any order,
    then one row per fault: the node, when the fault started and when it ended
    (empty while the fault is still open), the node's failure domain (a rack, a
    switch...; may be empty) and the fault class.  Times are either all ISO-8601
    timestamps (``2024-03-01T12:30:00Z``; converted to days since the earliest time
    of the file, kept in ``metadata["time_origin"]``) or all numbers in ``time_unit``.
    Blank lines are skipped.  Each row is a ``fault_start`` event and, when ``end`` is
    given, a ``fault_end`` event.

    Parameters
    ----------
    text : str
        The file's text.
    source : str
        The file named in messages and kept in :attr:`FaultTrace.source`.
    time_unit : {"seconds", "minutes", "hours", "days"}, optional
        The unit of numeric times; needed when the times are numbers, refused when
        they are timestamps (it would do nothing).

    Returns
    -------
    FaultTrace
        ``format`` is ``"csv"``; ``node_domains`` holds each node's domain (``None``
        when not given); ``fault_class`` the ``kind`` column (``"unspecified"`` when
        empty or absent).

    Raises
    ------
    ParameterTypeError
        ``text`` is not a ``str`` (bytes: decode them first, or use
        :func:`~spare_opt.read_fault_trace` on the file).
    TraceError
        One line naming ``source``, the line number and the problem: no header; a
        column missing, unknown or given twice; a row with the wrong number of fields;
        an empty node; a time that is neither a timestamp nor a number, a number
        that is not finite or overflows, numbers without ``time_unit``, timestamps with
        ``time_unit``, timestamps mixed with numbers or with and without a UTC offset;
        an end before its start; a node given two different domains.

    Notes
    -----
    Rows need not be in time order.  At one instant, the end of a fault comes before
    the start of another (back-to-back faults), and the end of a zero-length fault
    after its own start.  A row whose fault starts while its node is already down is
    irregular (``start-while-down``): the whole row (its start and its end) is
    ignored and the node stays down until the end of the fault that holds it.
    """
    check.instance("text", text, str, " (the file's text; read_fault_trace reads a file)")
    if time_unit is not None:
        time_unit = check.choice("time_unit", time_unit, tuple(TIME_UNITS))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    raw = _Events()
    domains = {}
    domain_line = {}
    columns = None
    style = None         # "iso" or "number", fixed by the first time read
    style_line = None
    aware = None         # ISO: whether times carry a UTC offset
    iso_times = []       # ISO: (event index, datetime), converted to days at the end
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue  # a blank line
            if columns is None:
                columns = _csv_header(fields, source, line)
                continue
            if len(fields) != len(columns):
                raise TraceError(f"{source}, line {line}: expected {len(columns)} fields "
                                 f"({','.join(columns)}), got {len(fields)}")
            row = dict(zip(columns, (f.strip() for f in fields)))
            node = row["node"]
            if not node:
                raise TraceError(f"{source}, line {line}: empty node")
            values = {}
            for key in ("start", "end"):
                value = row[key]
                if not value:
                    if key == "start":
                        raise TraceError(f"{source}, line {line}: empty start (every fault has a start; "
                                         "leave only end empty for a fault still open)")
                    continue
                kind, parsed = _csv_time(value, key, source, line)
                if style is None:
                    style, style_line = kind, line
                    if kind == "number" and time_unit is None:
                        raise TraceError(f"{source}, line {line}: times are numbers; give their unit "
                                         f"(--time-unit / time_unit: {', '.join(TIME_UNITS)})")
                    if kind == "iso" and time_unit is not None:
                        raise TraceError(f"{source}, line {line}: times are ISO-8601 timestamps, which carry "
                                         f"their unit; --time-unit / time_unit ({time_unit}) would do nothing")
                elif kind != style:
                    said = "an ISO-8601 timestamp" if kind == "iso" else "a number"
                    other = "ISO-8601 timestamps" if style == "iso" else "numbers"
                    raise TraceError(f"{source}, line {line}: {key} is {said}, but line {style_line} "
                                     f"uses {other}; use one kind of time in a file")
                if kind == "iso":
                    has_offset = parsed.tzinfo is not None
                    if aware is None:
                        aware = has_offset
                    elif has_offset != aware:
                        raise TraceError(f"{source}, line {line}: {key} {'has' if has_offset else 'has no'} UTC "
                                         f"offset, but line {style_line} {'has none' if has_offset else 'has one'}; "
                                         "times with and without an offset cannot be compared")
                values[key] = parsed
            if "end" in values and values["end"] < values["start"]:
                raise TraceError(f"{source}, line {line}: end {row['end']} is before start {row['start']}")
            domain = row.get("domain") or None
            if domain is not None:
                known = domains.get(node)
                if known is not None and known != domain:
                    raise TraceError(f"{source}, line {line}: node {_shown_text(node)} is in domain "
                                     f"{_shown_text(domain)}, but line {domain_line[node]} puts it in "
                                     f"{_shown_text(known)}; a node has one failure domain")
                domains[node] = domain
                domain_line.setdefault(node, line)
            fault_class = row.get("kind") or UNSPECIFIED_KIND
            start_index = len(raw.times)
            has_end = "end" in values
            for key in ("start", "end") if has_end else ("start",):
                index = len(raw.times)
                if style == "iso":
                    iso_times.append((index, values[key]))
                    raw.times.append(0.0)
                else:
                    raw.times.append(values[key] * TIME_UNITS[time_unit])
                raw.starts.append(key == "start")
                raw.ids.append(node)
                raw.classes.append(fault_class)
                raw.where.append(f"line {line}")
                raw.partner.append(-1)
            if has_end:
                raw.partner[start_index] = start_index + 1
                raw.partner[start_index + 1] = start_index
    except csv.Error as exc:
        raise TraceError(f"{source}, line {reader.line_num}: not a valid CSV row ({exc})") from None
    if columns is None:
        raise TraceError(f"{source}: empty file (expected a header line {','.join(CSV_COLUMNS)}"
                         f"[,{'][,'.join(CSV_OPTIONAL_COLUMNS)}])")
    metadata = {}
    if iso_times:
        origin = min(value for _, value in iso_times)
        for index, value in iso_times:
            raw.times[index] = (value - origin).total_seconds() / 86400.0
        metadata["time_origin"] = origin.isoformat()
    elif style == "number":
        metadata["time_unit"] = time_unit
    return _build_trace(raw, source=source, fmt="csv", metadata=metadata, node_domains=domains, csv_rows=True)


def _csv_header(fields, source, line):
    """The column names of a CSV fault log's header line, checked."""
    names = [f.strip() for f in fields]
    known = CSV_COLUMNS + CSV_OPTIONAL_COLUMNS
    seen = set()
    for name in names:
        if name in seen:
            raise TraceError(f"{source}, line {line}: column {_shown_text(name)!r} is given twice")
        seen.add(name)
        if name not in known:
            raise TraceError(f"{source}, line {line}: unknown column {_shown_text(name)!r} (the header names "
                             f"the columns {', '.join(CSV_COLUMNS)} and optionally {', '.join(CSV_OPTIONAL_COLUMNS)})")
    missing = [name for name in CSV_COLUMNS if name not in seen]
    if missing:
        raise TraceError(f"{source}, line {line}: the header has no column {', '.join(missing)} "
                         f"(expected {','.join(CSV_COLUMNS)}[,{'][,'.join(CSV_OPTIONAL_COLUMNS)}])")
    return names


def _csv_time(value, key, source, line):
    """``("iso", datetime)`` or ``("number", float)`` for one time field, or TraceError."""
    match = _ISO.fullmatch(value)
    if match:
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        try:
            tz = None
            if zone is not None:
                if zone.upper() == "Z":
                    tz = datetime.timezone.utc
                else:
                    sign = -1 if zone[0] == "-" else 1
                    digits = zone[1:].replace(":", "")
                    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
                    if minutes >= 60 or hours >= 24:  # timedelta would carry +05:99 into +06:39
                        raise ValueError(f"a UTC offset is -23:59 to +23:59, got {zone}")
                    tz = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
            micro = int((fraction or "0")[:6].ljust(6, "0"))
            stamp = datetime.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                                      int(second or 0), micro, tzinfo=tz)
        except ValueError as exc:
            raise TraceError(f"{source}, line {line}: {key} {_shown_text(value)!r} is not a valid timestamp "
                             f"({exc})") from None
        return "iso", stamp
    try:
        return "number", check.parse_float(value, key, error=TraceError)
    except TraceError as exc:
        reason = str(exc).split(": ", 1)[1]
        if "not a finite decimal number" in reason:
            reason = f"{_shown_text(value)!r} is neither an ISO-8601 timestamp nor a finite number"
        raise TraceError(f"{source}, line {line}: {key} {reason}") from None
