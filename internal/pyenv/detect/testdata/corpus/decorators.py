import functools
import subprocess as sp

@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

@np.vectorize
@tool.register(name="norm")
def norm(x) -> out.kind(float):
    import numpy as np
    import toolkit as tool
    import typing as out
    return np.sqrt(x)

class Registry:
    @staticmethod
    @sp.check_call
    def run(cmd):
        return sp.run(cmd, check=False)

    @property
    def size(self):
        return len(self.__dict__)

@dataclass(frozen=True)
class Point:
    from dataclasses import dataclass
    x: float = field(default=0.0)
    y: float = dataclasses.field(default_factory=lambda: 0.0)

def outer():
    @inner_deco()
    def inner():
        import inner_deco_mod as inner_deco
    return inner
