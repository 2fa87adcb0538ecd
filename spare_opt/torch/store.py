"""Host a SPARe job's store: ``python -m spare_opt.torch.store --port P``.

The store must outlive every DP group (a store hosted by one group's rank dies with
it), so it runs in a process of its own: on the SLURM batch host, in a Kubernetes
``Deployment`` behind a ``Service``, or beside the ``torchrun`` commands on one machine.
It is torch's own ``TCPStore`` server; this entry point only starts it, prints
``spare-store listening on HOST:PORT``, and serves until SIGTERM or SIGINT (or until
every group finished with ``--exit-when-done``).
"""

import argparse
import datetime
import operator
import signal
import socket
import sys
import threading

import spare_opt

__all__ = ["serve_store"]


#: Seconds a lookup of the store's host may take before it counts as not resolving (a resolver that does not answer
#: must not hold the entry point for ever; getaddrinfo's own retries take 10 to 20 s with glibc's defaults).
_RESOLVE_SECONDS = 30.0


def _check_host(host):
    """Refuse at once a ``host`` this machine cannot listen on (one that does not resolve, or another machine's).

    torch's server connects to itself at ``host`` to check that it is up: for such a
    host it retries for a minute and logs C++ stacks before it gives up.  The lookup
    runs in a thread of its own, given up after :data:`_RESOLVE_SECONDS`.
    """
    from .launchers import _resolve

    try:
        addresses = {info[4][0] for info in _resolve(host, None, _RESOLVE_SECONDS)}
    except (socket.gaierror, UnicodeError) as exc:
        raise spare_opt.ParameterError(f"cannot listen on host {host!r}: it does not resolve "
                                       f"({getattr(exc, 'strerror', None) or exc})") from None
    except TimeoutError:
        raise spare_opt.ParameterError(f"cannot listen on host {host!r}: it does not resolve (no answer from the "
                                       f"resolver within {_RESOLVE_SECONDS:g} s)") from None
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((address, 0))
            return
        except OSError:
            continue
    raise spare_opt.ParameterError(f"cannot listen on host {host!r}: none of its addresses "
                                   f"({', '.join(sorted(addresses))}) is one of this machine's")


def _port_taken(exc):
    """Whether torch's failure to start a ``TCPStore`` server says that the port is in use."""
    text = str(exc)
    return "EADDRINUSE" in text or "address already in use" in text.lower()


def serve_store(host="0.0.0.0", port=29600, *, ready=None, stop=None, exit_when_done=False, poll=0.5):
    """Run a ``TCPStore`` server on ``host:port`` until ``stop`` is set (or the job ended).

    Parameters
    ----------
    host : str, default "0.0.0.0"
        The address to listen on.
    port : int, default 29600
        0 picks a free port (printed, and passed to ``ready``).
    ready : callable, optional
        Called with the port once the server listens.
    stop : threading.Event, optional
        Set it to stop serving (default: a new event that SIGTERM and SIGINT set when
        called from the main thread).
    exit_when_done : bool, default False
        Stop once the current generation's job is marked ended (``"done"``).
    poll : float, default 0.5
        Seconds between checks of ``stop`` and of the end marker.

    Returns
    -------
    int
        The port it served on.

    Raises
    ------
    spare_opt.ParameterError
        ``host`` does not resolve (within 30 s) or is not an address of this machine,
        ``port`` is not in ``[0, 65535]``, or something already listens on the port (a
        store of another job, another program): the message says so in one line.
    RuntimeError
        torch's server could not start for another reason.
    """
    import torch.distributed as dist

    try:
        number = None if isinstance(port, bool) else operator.index(port)
    except TypeError:
        number = None
    if number is None or not 0 <= number <= 65535:
        raise spare_opt.ParameterError(f"the store's port must be an integer in [0, 65535], got {port!r}")
    port = number
    _check_host(host)
    try:
        server = dist.TCPStore(host, int(port), is_master=True, wait_for_workers=False,
                               timeout=datetime.timedelta(seconds=60), use_libuv=True)
    except RuntimeError as exc:  # torch's DistNetworkError: its text is C++'s, several fields on one line
        if not _port_taken(exc):
            raise
        raise spare_opt.ParameterError(f"port {port} on {host} is taken: a store (or another program) already "
                                       "listens there; pick another --port, or stop what listens there") from None
    if stop is None:
        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
    if ready is not None:
        ready(server.port)
    while not stop.wait(poll):
        if exit_when_done and server.check(["generation"]):
            generation = server.get("generation").decode()
            if server.check([f"gen/{generation}/ended"]) and server.get(f"gen/{generation}/ended") == b"done":
                break
    return server.port


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m spare_opt.torch.store",
                                     description="Host a SPARe job's TCPStore until SIGTERM.")
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=29600, help="port (default 29600; 0: any free port)")
    parser.add_argument("--exit-when-done", action="store_true",
                        help="exit once the job is marked finished (end_job)")
    options = parser.parse_args(argv)
    if not 0 <= options.port <= 65535:
        parser.error(f"--port must be in [0, 65535], got {options.port}")

    def ready(port):
        print(f"spare-store listening on {options.host}:{port}", flush=True)

    try:
        serve_store(options.host, options.port, ready=ready, exit_when_done=options.exit_when_done)
    except (spare_opt.ParameterError, RuntimeError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
