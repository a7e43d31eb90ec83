import os
import datetime as dt

name = os.environ.get("USER", "nobody")
when = dt.datetime.now()
print(f"{name!r} at {when:%Y-%m-%d} {when.strftime('%H:%M')}")
print(f"{'padded':>{os.cpu_count()}}|{len(name)=}")
print(f"nested {f'{name.upper()}'.lower()} {{literal braces}} {os.path.join('a', 'b')}")
msg = (
    f"first {name.title()} "
    "plain part "
    f"second {os.getpid()} "
    rf"raw \d {os.sep}"
)
block = f"""
    multi-line: {os.path.basename(__file__)}
    {", ".join(sorted(os.listdir(".")))[:20]}
"""
bytes_ok = b"import this is bytes"
raw = r"\import"
print(f"{name:{'>' if len(name) > 3 else '<'}10}")
print(F"{dt.date.today().isoformat()}", Rf'{os.getcwd()}\n')
print(f'{dt.timedelta(days=1) + dt.timedelta(hours=2)}')
