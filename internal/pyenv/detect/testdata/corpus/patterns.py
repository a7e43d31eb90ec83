import json

def describe(value):
    match value:
        case {"type": "point", "x": x, "y": y}:
            return f"point {x},{y}"
        case [first, *rest] if len(rest) > json.loads("1"):
            import statistics
            return statistics.mean([first, *rest])
        case Point(x=0) | Point(y=0):
            return "on an axis"
        case str() as s:
            return s.upper()
        case _:
            return None

match = {"a": 1}
match["b"] = 2
case = match.get("a")
print(describe([1, 2, 3]), match, case)
