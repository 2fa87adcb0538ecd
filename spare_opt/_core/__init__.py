"""The shared base of every stage: errors, argument checks, file I/O, results,
statistics, numba set-up, process pools and Dask, plotting, and the paper's constants.
It imports nothing else of spare-opt.
"""

