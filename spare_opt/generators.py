"""Stack-layout generators. (STUB: owned by the generators helper.)"""

__all__ = ["consecutive", "sidon", "block", "random_latin", "generate", "METHODS"]

METHODS = ("sidon", "consecutive", "block", "random")


def consecutive(groups, redundancy):
    raise NotImplementedError


def sidon(groups, redundancy, time_limit=10.0, seed=0):
    raise NotImplementedError


def block(groups, redundancy):
    raise NotImplementedError


def random_latin(groups, redundancy, seed=0):
    raise NotImplementedError


def generate(method, groups, redundancy, seed=0, time_limit=10.0):
    raise NotImplementedError
