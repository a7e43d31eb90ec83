package pool

import (
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// TestForkedStdlibImportsAreTheServers: a forked execution that imports
// common standard-library modules gets the fork server's, imported once
// (they are in the heap the server froze, which a fresh import's objects
// are not), and sees the interpreter a cold run sees: the same modules
// in sys.modules after the import, the same specs, a working module.
func TestForkedStdlibImportsAreTheServers(t *testing.T) {
	const probe = `import gc, sys
before = sorted(sys.modules)
import json, re, datetime, collections, decimal, typing, dataclasses, pathlib
ids = {id(o) for o in gc.get_objects()}
print("fresh", [m.__name__ for m in (json, re, datetime, collections, decimal, typing, dataclasses, pathlib) if id(m) in ids])
print(sorted(set(sys.modules) - set(before)))
print(json.__spec__.name, json.__spec__.origin == json.__file__, type(json.__loader__).__name__)
print(json.dumps({"a": re.sub("b", "c", "abc")}), datetime.date(2026, 1, 2).isoformat())
`
	p := newPool(t, Config{ForkServer: true})
	s := spec(probe)
	cold := run(t, p, s)
	if cold.Status != sandbox.StatusOK || cold.ExitCode != 0 {
		t.Fatalf("cold: status %s exit %d stderr %s", cold.Status, cold.ExitCode, cold.Stderr)
	}
	forked, _ := runForked(t, p, s)
	if forked.Status != sandbox.StatusOK || forked.ExitCode != 0 {
		t.Fatalf("forked: status %s exit %d stderr %s", forked.Status, forked.ExitCode, forked.Stderr)
	}
	coldLines, forkedLines := strings.SplitN(string(cold.Stdout), "\n", 2), strings.SplitN(string(forked.Stdout), "\n", 2)
	if want := "fresh ['json', 're', 'datetime', 'collections', 'decimal', 'typing', 'dataclasses', 'pathlib']"; coldLines[0] != want {
		t.Fatalf("a cold run's imports: %q, want %q", coldLines[0], want)
	}
	if want := "fresh []"; forkedLines[0] != want {
		t.Fatalf("a forked run imported afresh: %q, want %q", forkedLines[0], want)
	}
	if forkedLines[1] != coldLines[1] {
		t.Fatalf("after the imports a forked execution sees another interpreter than a cold one:\nforked %s\ncold   %s",
			forkedLines[1], coldLines[1])
	}
}

// TestForkedStdlibModulesDoNotCarryOver: what one execution does to a
// standard-library module the fork server imported for all of them is not
// seen by the next.
func TestForkedStdlibModulesDoNotCarryOver(t *testing.T) {
	const probe = `import json, re
print(getattr(json, "MARK", None), json.dumps([1]), re.escape("a.b"))
json.MARK = "set by an earlier execution"
json.dumps = lambda *a, **k: "patched"
re.escape = None
`
	p := newPool(t, Config{ForkServer: true})
	s := spec(probe)
	for i := range 3 {
		res, _ := runForked(t, p, s)
		if want := "None [1] a\\.b\n"; string(res.Stdout) != want {
			t.Fatalf("execution %d: stdout %q, want %q (stderr %s)", i, res.Stdout, want, res.Stderr)
		}
	}
}

// TestUserModuleShadowsAPreloadedOne: a module of the user's own that the
// search path finds before the standard library's wins over the one the
// fork server imported, as in a fresh interpreter, though the scan sends
// the code to the server for standard-library code.
func TestUserModuleShadowsAPreloadedOne(t *testing.T) {
	const probe = `with open("json.py", "w") as f:
    f.write("MINE = 'mine'\n")
import json
import re
print(getattr(json, "MINE", "the standard library's"), re.escape("a.b"))
`
	p := newPool(t, Config{ForkServer: true})
	for i := range 2 {
		res, _ := runForked(t, p, spec(probe))
		if want := "mine a\\.b\n"; string(res.Stdout) != want {
			t.Fatalf("execution %d: stdout %q, want %q (stderr %s)", i, res.Stdout, want, res.Stderr)
		}
	}
}
