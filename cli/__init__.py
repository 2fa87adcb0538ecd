"""The ``spare-opt`` command-line interface (installed as ``spare_opt_cli``).

Commands only parse arguments, call :mod:`spare_opt` and print; all logic lives in
the library.  ``main.py`` holds the click group, ``options.py`` the shared options and
parameter types, and each other module one command.
"""
