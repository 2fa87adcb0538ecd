"""Where the tasks of a Monte-Carlo run on a two-worker local Dask cluster, and how long each computes.

Usage::

    python benchmarks/bench_dask_tasks.py [--groups 100000] [--redundancy 17] [--trials 12] [--chunk 2]

Starts ``spare_opt._core.parallel.local_cluster_options(2)``, warms both workers (imports and
numba cache loads), runs ``monte_carlo`` on the cluster under
``distributed.get_task_stream`` and prints, per task, the worker and its compute time;
then the same trials in this process.  The numbers of both runs are compared.
"""

import argparse
import json
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--redundancy", type=int, default=17)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--chunk", type=int, default=2)
    args = parser.parse_args()

    from distributed import Client, LocalCluster, get_task_stream

    from spare_opt import monte_carlo, sidon
    from spare_opt._core.parallel import local_cluster_options

    layout = sidon(args.groups, args.redundancy, time_limit=10)
    report = {}
    with LocalCluster(**local_cluster_options(2)) as cluster, Client(cluster) as client:
        executor = client.get_executor()
        monte_carlo(layout, trials=2, seed=1, executor=executor, chunk_size=1)  # warm both workers
        with get_task_stream(client) as stream:
            started = time.perf_counter()
            on_dask = monte_carlo(layout, trials=args.trials, seed=0, executor=executor, chunk_size=args.chunk)
            report["dask wall seconds"] = round(time.perf_counter() - started, 2)
        report["tasks"] = [
            {"worker": task["worker"],
             "compute seconds": round(sum(s["stop"] - s["start"] for s in task["startstops"]
                                          if s["action"] == "compute"), 2)}
            for task in stream.data
        ]
    started, cpu = time.perf_counter(), time.process_time()
    serial = monte_carlo(layout, trials=args.trials, seed=0, chunk_size=args.chunk)
    report["one process"] = {"wall seconds": round(time.perf_counter() - started, 2),
                             "cpu seconds": round(time.process_time() - cpu, 2)}
    report["identical"] = bool((serial.masked == on_dask.masked).all()
                               and (serial.sbar_per_trial == on_dask.sbar_per_trial).all())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
