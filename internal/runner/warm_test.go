package runner

import (
	"reflect"
	"strings"
	"testing"
)

// TestWarmRunsLikeCold: a driver started ahead of its work and handed the
// request produces exactly what the cold command line produces.
func TestWarmRunsLikeCold(t *testing.T) {
	files := map[string]string{
		"main.py":   "import os, sys\nfrom helper import twice\nprint(sys.argv, os.environ.get('GREETING'), twice(21))\nprint(sys.stdin.read())\nx = 1\nundefined_name\n",
		"helper.py": "def twice(n):\n    return 2 * n\n",
	}
	base := testEnv()
	env := append(append([]string(nil), base...), "GREETING=hello")
	forEachPython(t, func(t *testing.T, python string) {
		opts := Options{Entrypoint: "main.py", Args: []string{"a", "b c"}, EvalLastExpr: true}
		dir := writeFiles(t, files) // one directory: tracebacks name it
		cold := execDriver(t, dir, Argv(python, opts), env, "piped", nil, 0)
		warmArgv, request, ok := Warm(Argv(python, opts), env, base)
		if !ok {
			t.Fatal("Warm refused a driver command line")
		}
		warm := execDriver(t, dir, warmArgv, base, "piped", request, 0)
		if cold.stdout != warm.stdout || cold.exitCode != warm.exitCode {
			t.Fatalf("cold %q (exit %d) != warm %q (exit %d); warm stderr %s", cold.stdout, cold.exitCode, warm.stdout, warm.exitCode, warm.stderr)
		}
		cr, wr := cold.mustReport(t), warm.mustReport(t)
		if !reflect.DeepEqual(cr, wr) {
			t.Fatalf("reports differ:\ncold %+v %+v\nwarm %+v %+v", cr, cr.Error, wr, wr.Error)
		}
		if !strings.Contains(warm.stdout, "['main.py', 'a', 'b c'] hello 42") {
			t.Errorf("warm stdout %q", warm.stdout)
		}
	})
}

func TestWarmRefuses(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/work"}
	cold := Argv("/usr/bin/python3", Options{})
	cases := []struct {
		name string
		argv []string
		env  []string
	}{
		{"not the driver", []string{"/bin/sh", "-c", "echo"}, base},
		{"startup variable", cold, append(append([]string(nil), base...), "PYTHONHASHSEED=0")},
		{"base variable removed", cold, []string{"PATH=/usr/bin"}},
		{"NUL in an argument", append(append([]string(nil), cold...), "a\x00b"), base},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, ok := Warm(c.argv, c.env, base); ok {
				t.Fatal("Warm accepted it")
			}
		})
	}
}
