"""Fault traces and the failure model fitted to them.

* :mod:`.trace` - :class:`FaultTrace`, the trace model, and the failure instants it gives;
* :mod:`.json_format` - :func:`read_fault_trace` (any format), InfiniteHBD and
  ``spare-failure-trace`` JSON, :func:`write_fault_trace`;
* :mod:`.csv_format` - :func:`parse_fault_csv`, plain CSV fault logs;
* :mod:`.synthetic` - :func:`synthetic_fault_trace`;
* :mod:`.placement` - :class:`Placement` of trace nodes on DP groups;
* :mod:`.failure_model` - :class:`FailureModel`, what simulations sample failures from;
* :mod:`.fit` - :func:`fit_trace`, which fits a :class:`FailureModel` to a trace;
* :mod:`.window` - :func:`window_trace`, a trace cut to an observation window.
"""

from .trace import (
    FaultTrace,
    Instant,
    IrregularEvent,
    IRREGULAR_KINDS,
    TRACE_FORMAT,
    TRACE_VERSION,
    trace_instants,
    instant_batches,
)
from .csv_format import TIME_UNITS, CSV_COLUMNS, CSV_OPTIONAL_COLUMNS, parse_fault_csv
from .json_format import (
    TRACE_FILE_FORMATS,
    read_fault_trace,
    parse_fault_events,
    trace_file_format,
    write_fault_trace,
)
from .synthetic import synthetic_fault_trace
from .placement import Placement, PLACEMENT_FORMAT, PLACEMENT_VERSION
from .failure_model import (
    FAILURE_MODEL_FORMAT,
    FAILURE_MODEL_VERSION,
    MAX_SAMPLE_EVENTS,
    REPAIR_DISTRIBUTIONS,
    Estimate,
    FailureModel,
)
from .window import OPEN_AT_START_CLASS, window_day, window_text, window_trace
from .rates import failure_model_from_rates, node_mtbf_from_rates
from .fit import DEFAULT_RESAMPLES, DEFAULT_WINDOW_MINUTES, MAX_RESAMPLES, FitResult, fit_trace

__all__ = [
    "FaultTrace",
    "Instant",
    "IrregularEvent",
    "IRREGULAR_KINDS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "trace_instants",
    "instant_batches",
    "TIME_UNITS",
    "CSV_COLUMNS",
    "CSV_OPTIONAL_COLUMNS",
    "parse_fault_csv",
    "TRACE_FILE_FORMATS",
    "read_fault_trace",
    "parse_fault_events",
    "trace_file_format",
    "write_fault_trace",
    "synthetic_fault_trace",
    "Placement",
    "PLACEMENT_FORMAT",
    "PLACEMENT_VERSION",
    "FAILURE_MODEL_FORMAT",
    "FAILURE_MODEL_VERSION",
    "MAX_SAMPLE_EVENTS",
    "REPAIR_DISTRIBUTIONS",
    "Estimate",
    "FailureModel",
    "failure_model_from_rates",
    "node_mtbf_from_rates",
    "DEFAULT_RESAMPLES",
    "DEFAULT_WINDOW_MINUTES",
    "MAX_RESAMPLES",
    "FitResult",
    "fit_trace",
    "OPEN_AT_START_CLASS",
    "window_day",
    "window_text",
    "window_trace",
]
