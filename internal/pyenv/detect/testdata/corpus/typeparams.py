import typing

type Pair[T] = tuple[T, T]

def first[T](items: list[T]) -> T:
    return items[0]

class Box[T: (int, str)]:
    def __init__(self, item: T) -> None:
        self.item = typing.cast(T, item)

print(first([Box(1).item]))
