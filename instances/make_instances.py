"""Write the project's own instances: small clusters and generated failure sequences.

Run from anywhere (``python instances/make_instances.py [--force]``); it writes

* ``instances/failures-N400-seed0.json``: the demo's generated failure sequence for the
  400-node traced cluster (``spare_opt.demo.default_trace_document``, what
  ``spare-opt demo --generated`` replays);
* ``instances/small/layout-N12-r3-sidon.json``: a 12-group Sidon layout (offsets 0, 1, 3);
* ``instances/small/layout-N12-r3-consecutive.json``: the consecutive layout (0, 1, 2);
* ``instances/small/failures-N12-seed1.json``: a generated 30-day sequence for 12 nodes;
* ``instances/small/irregular-N12.json``: a hand-written InfiniteHBD-format trace with
  every kind of irregular event (for the docs and the CLI help);
* ``instances/small/fault-log-N12.csv``: a hand-written CSV fault log (ISO-8601 times,
  failure domains, fault kinds, an open fault, back-to-back faults and an overlapping
  row), the format of ``docs/formats.md``.

Everything is deterministic: running it twice writes the same bytes.  Existing files are
kept unless ``--force`` is given.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from spare_opt import Layout  # noqa: E402
from spare_opt.demo import default_trace_document
from spare_opt._core.errors import OutputExistsError
from spare_opt.traces.synthetic import synthetic_fault_trace
from spare_opt.traces.json_format import write_fault_trace

SMALL_GROUPS = 12
#: File name of the demo's generated failure sequence.
DEFAULT_TRACE_NAME = "failures-N400-seed0.json"


def circulant(groups, offsets, method):
    """The circulant layout ``stacks[g, l] = (g + offsets[l]) mod N``."""
    stacks = (np.arange(groups)[:, None] + np.asarray(offsets)[None, :]) % groups
    return Layout(stacks, method=method, offsets=offsets, metadata={"written_by": "instances/make_instances.py"})


def irregular_events():
    """A small InfiniteHBD-format trace with each irregular kind, in file order."""
    def event(node, day, kind, cls="GPU"):
        return {"node_id": node, "event_time": day, "event_type": kind,
                "fault_type": {"Level": "Hardware Failure", "Class": cls, "Desc": "hand-written"}}
    return [
        event("a", 1.0, "fault_start"),
        event("b", 1.0, "fault_start", "NIC"),           # same instant as a: one batch
        event("a", 2.0, "fault_start", "Fan"),           # start-while-down
        event("a", 3.0, "fault_end"),
        event("a", 3.5, "fault_end", "Fan"),             # end-without-start
        event("c", 2.5, "fault_start"),                  # out-of-order (file order)
        event("d", 4.0, "fault_end"),                    # end-without-start (never down)
        event("b", 5.0, "fault_end", "NIC"),
        event("c", 6.0, "fault_end"),
    ]


#: The CSV fault log: one row per fault (node, start, end, domain, kind), hand-written.
FAULT_LOG_ROWS = [
    ("node", "start", "end", "domain", "kind"),
    ("gpu-node-03", "2024-03-01T08:00:00Z", "2024-03-01T20:30:00Z", "rack-1", "GPU"),
    ("gpu-node-07", "2024-03-02T14:15:00Z", "2024-03-04T09:00:00Z", "rack-2", "NIC"),
    ("gpu-node-08", "2024-03-02T14:15:00Z", "2024-03-03T02:00:00Z", "rack-2", "NIC"),   # same instant as 07
    ("gpu-node-03", "2024-03-03T06:00:00Z", "2024-03-03T11:00:00Z", "rack-1", "Fan"),
    ("gpu-node-07", "2024-03-03T10:00:00Z", "2024-03-03T12:00:00Z", "rack-2", "Fan"),   # overlaps its NIC fault
    ("gpu-node-11", "2024-03-05T00:00:00Z", "2024-03-05T06:45:00Z", "rack-3", "ECC"),
    ("gpu-node-11", "2024-03-05T06:45:00Z", "2024-03-06T01:00:00Z", "rack-3", "GPU"),   # back to back
    ("gpu-node-01", "2024-03-06T18:20:00Z", "", "rack-1", "PSU"),                       # still open
    ("gpu-node-05", "2024-03-07T09:00:00Z", "2024-03-07T09:30:00Z", "", ""),            # no domain, no kind
]


def fault_log_text():
    """The CSV fault log of ``FAULT_LOG_ROWS``, one row per line."""
    return "".join(",".join(row) + "\n" for row in FAULT_LOG_ROWS)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    args = parser.parse_args(argv)
    import json

    from spare_opt._core.io import write_atomic

    small = HERE / "small"
    small.mkdir(exist_ok=True)
    default = default_trace_document()
    jobs = [
        (HERE / "failures-N400-seed0.json", lambda p: write_fault_trace(default, p, force=args.force)),
        (small / "layout-N12-r3-sidon.json", lambda p: circulant(SMALL_GROUPS, [0, 1, 3], "sidon").save(p, force=args.force)),
        (small / "layout-N12-r3-consecutive.json",
         lambda p: circulant(SMALL_GROUPS, [0, 1, 2], "consecutive").save(p, force=args.force)),
        (small / "failures-N12-seed1.json",
         lambda p: write_fault_trace(synthetic_fault_trace(nodes=SMALL_GROUPS, days=30.0, seed=1, incidents_per_day=0.5,
                                                           repair_median_days=2.0), p, force=args.force)),
        (small / "irregular-N12.json",
         lambda p: write_atomic(p, json.dumps(irregular_events(), indent=1) + "\n", force=args.force)),
        (small / "fault-log-N12.csv", lambda p: write_atomic(p, fault_log_text(), force=args.force)),
    ]
    for path, write in jobs:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            write(path)
            print(f"wrote {path.relative_to(ROOT)}")
        except OutputExistsError:
            print(f"kept {path.relative_to(ROOT)} (exists; --force to overwrite)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
