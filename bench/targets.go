package main

import (
	"fmt"
	"strings"
	"time"
)

// targets states, from the rows of one run, how the service compares with
// the goals of the issue "Speed, second step": P1 print(1) p50 at most
// half of bare python -I -S -c; P2 the pandas + plot snippet at most 10 ms
// over its warm in-process floor (p50s); P3 throughput at c=8 at least
// twice bare spawns. A row the run did not produce is said to be missing.
func targets(rows []row) []string {
	find := func(name string) (row, bool) {
		for _, r := range rows {
			if r.name == name {
				return r, true
			}
		}
		return row{}, false
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	var out []string
	for _, k := range newCodeKinds {
		r, ok := find(newCodeName(k.name))
		if !ok {
			continue
		}
		goal, against := 0.5, "bare python -I -S -c"
		switch {
		case k.pandas:
			goal, against = 0.1, "a bare venv python importing pandas"
		case k.network:
			goal = 1.0
		}
		out = append(out, fmt.Sprintf("P1 new code (%s) p50 %s = %.2f× %s (goal ≤ %.2f×): %s",
			k.name, ms(r.p50), r.ratio, against, goal, verdict(r.ratio <= goal)))
	}
	for _, r := range rows {
		if r.rate && strings.HasPrefix(r.name, newCodeRate+" c=8:") {
			out = append(out, fmt.Sprintf("P3 new-code print throughput c=8 %.1f/s = %.2f× bare python -I -S -c %.1f/s (goal ≥ 1×): %s",
				r.value, r.value/r.base, r.base, verdict(r.value >= r.base)))
		}
	}
	if r, ok := find(p1Name); ok {
		out = append(out, fmt.Sprintf("P1 print(1) p50 %s = %.2f× bare python -I -S -c (goal ≤ 0.50×): %s",
			ms(r.p50), r.ratio, verdict(r.ratio <= 0.5)))
	} else {
		out = append(out, "P1: missing")
	}
	f, okF := find(p2Name)
	floor, okFloor := find(p2Floor)
	if okF && okFloor {
		d := f.p50 - floor.p50
		out = append(out, fmt.Sprintf("P2 pandas + PNG p50 %s − floor %s = %+.1f ms (goal ≤ 10 ms): %s",
			ms(f.p50), ms(floor.p50), float64(d.Microseconds())/1000, verdict(d <= 10*time.Millisecond)))
	} else {
		out = append(out, "P2: missing (no environment with pandas)")
	}
	for _, r := range rows {
		if r.rate && strings.HasPrefix(r.name, throughputName+" c=8:") {
			out = append(out, fmt.Sprintf("P3 throughput c=8 %.1f/s = %.2f× bare python -I -S -c %.1f/s (goal ≥ 2×): %s",
				r.value, r.value/r.base, r.base, verdict(r.value >= 2*r.base)))
		}
	}
	return out
}
