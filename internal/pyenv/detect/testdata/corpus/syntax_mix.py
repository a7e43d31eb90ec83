import asyncio, contextlib, collections.abc as cabc
from itertools import (chain,
                       islice as take)

x = 1; y = 2; import math; z = math.floor(x / y)
if x: import heapq; heapq.heappush([], 1)
while False: pass
for i in range(3): print(i)
data = [i ** 2 for i in range(10) if (j := i % 3)]
lookup = {k: v for k, v in zip("abc", range(3))}
squares = list(map(lambda n: n * n, take(chain([1], [2, 3]), 2)))
total = sum(
    value
    for value in squares
) \
    + 1
label = "yes" if total > 3 else "no"
matrix = [[1, 2], [3, 4]]
product = matrix @ matrix if False else None
print(total, label, lookup[...] if False else None, data[1:3:1], matrix[0][::-1])

async def main():
    async with contextlib.AsyncExitStack() as stack:
        async for item in agen():
            await asyncio.sleep(0)
    return await asyncio.gather(*(asyncio.sleep(0) for _ in range(2)))

async def agen():
    yield 1

def gen():
    yield from range(3)
    try:
        raise KeyError("k") from None
    except* KeyError:
        pass

def pos_only(a, b, /, c, *, d=cabc.Mapping.register(dict)):
    global total
    nonlocal_ = lambda q=collections.OrderedDict(): q
    del nonlocal_
    assert a is not b, "different"
    return a

class Meta(type):
    def __new__(mcs, name, bases, ns, **kw):
        return super().__new__(mcs, name, bases, ns)

class Thing(object, metaclass=Meta):
    """A docstring that says: import os."""
    count: int = 0
    def method(self): return self.count

print(asyncio.run(main()))
