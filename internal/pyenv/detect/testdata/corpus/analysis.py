# A data-analysis snippet of the kind an assistant writes in one turn.
import numpy as np
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from scipy import stats

rng = np.random.default_rng(42)
df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(list("abc"), size=200)})
df["y"] = 2.5 * df["x"] + rng.normal(scale=0.3, size=len(df))
summary = df.groupby("g").agg(mean_x=("x", "mean"), n=("x", "size")).reset_index()
slope, intercept, r, p, se = stats.linregress(df["x"], df["y"])
print(f"slope={slope:.3f} r²={r**2:.3f} p={p:.2g}")
print(summary.to_string(index=False))

fig, ax = plt.subplots(figsize=(6, 4))
for name, part in df.groupby("g"):
    ax.scatter(part["x"], part["y"], s=8, label=f"group {name} (n={len(part)})")
ax.plot(np.sort(df["x"]), intercept + slope * np.sort(df["x"]), color="k")
ax.legend()
fig.savefig("plot.png", dpi=100)
