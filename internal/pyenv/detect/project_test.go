package detect

import "testing"

func TestProjectModules(t *testing.T) {
	files := []File{{Path: "main.py"}, {Path: "helper.py"}, {Path: "pkg/__init__.py"}, {Path: "ns/mod.py"},
		{Path: "src/app.py"}, {Path: "src/util.py"}, {Path: "native.cpython-311-x86_64-linux-gnu.so"}, {Path: "data.csv"}}
	got := projectModules(files, "src/app.py")
	for _, want := range []string{"main", "helper", "pkg", "ns", "src", "app", "util", "native"} {
		if !got[want] {
			t.Errorf("%s is not a project module: %v", want, got)
		}
	}
	if got["data"] {
		t.Errorf("data.csv counted as a module")
	}
}
