package pyenv

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
)

func TestParseRequirements(t *testing.T) {
	cases := []struct {
		name    string
		text    string
		want    []string // specs
		wantErr string
	}{
		{name: "names versions extras markers",
			text: "PyYAML >= 6.0\nrequests[Socks] ==2.*  # http\n\n# comment\nnumpy; python_version >= '3.9'\nZope.Interface\n",
			want: []string{"pyyaml>=6.0", "requests[Socks]==2.*", "numpy; python_version >= '3.9'", "zope-interface"}},
		{name: "continuation lines", text: "rich \\\n  >=13\n", want: []string{"rich>=13"}},
		{name: "index option refused", text: "--index-url https://evil.example/simple\nrequests\n", wantErr: `option "--index-url" is not supported`},
		{name: "nested file refused", text: "-r other.txt\n", wantErr: `option "-r"`},
		{name: "editable refused", text: "-e .\n", wantErr: `option "-e"`},
		{name: "direct url refused", text: "pkg @ https://example.com/pkg.whl\n", wantErr: "no URLs or paths"},
		{name: "local path refused", text: "./pkg\n", wantErr: "does not start with a distribution name"},
		{name: "garbage after name", text: "requests 2.0\n", wantErr: `unexpected "2.0"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequirements(tc.text, FromRequest)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrBadRequirement) {
					t.Fatalf("error %v, want ErrBadRequirement containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var specs []string
			for _, r := range got {
				specs = append(specs, r.Spec)
			}
			if !slices.Equal(specs, tc.want) {
				t.Errorf("specs %q, want %q", specs, tc.want)
			}
		})
	}
}

func TestMergePrecedence(t *testing.T) {
	req := []Requirement{{Name: "numpy", Spec: "numpy==1.26.4", Source: FromRequest}}
	project := []Requirement{{Name: "numpy", Spec: "numpy>=2", Source: FromProject}, {Name: "rich", Spec: "rich", Source: FromProject}}
	script := []Requirement{{Name: "httpx", Spec: "httpx<1", Source: FromScript}}
	detected := []Requirement{
		{Name: "httpx", Spec: "httpx", Source: FromDetection},
		{Name: "ujson", Spec: "ujson", Optional: true, Source: FromDetection},
		{Name: "rich", Spec: "rich", Optional: true, Source: FromDetection},
	}
	got := Merge(req, project, script, detected)
	want := []string{"httpx<1", "numpy==1.26.4", "rich", "ujson"}
	if !slices.Equal(got.Specs(), want) {
		t.Fatalf("merged %q, want %q", got.Specs(), want)
	}
	if opt := got.Optional(); len(opt) != 1 || opt[0].Name != "ujson" {
		t.Errorf("optional %v, want only ujson (rich is required by the project)", opt)
	}
	if len(got.Required()) != 3 {
		t.Errorf("required %v", got.Required())
	}
}

func TestScriptDependencies(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		want    []string
		wantErr string
	}{
		{name: "no block", src: "import os\n"},
		{name: "multi-line array", src: "# /// script\n# requires-python = \">=3.11\"\n# dependencies = [\n#   \"requests<3\",  # http\n#   'Rich',\n# ]\n# [tool.x]\n# dependencies = [\"no\"]\n# ///\nimport requests\n",
			want: []string{"requests<3", "rich"}},
		{name: "one line", src: "#!/usr/bin/env python\n# /// script\n# dependencies = [\"pyyaml\"]\n# ///\n", want: []string{"pyyaml"}},
		{name: "block without dependencies", src: "# /// script\n# requires-python = \">=3.8\"\n# ///\n"},
		{name: "unclosed", src: "# /// script\n# dependencies = []\nimport os\n", wantErr: "not closed"},
		{name: "two blocks", src: "# /// script\n# ///\n# /// script\n# ///\n", wantErr: "second script metadata block"},
		{name: "not an array", src: "# /// script\n# dependencies = \"x\"\n# ///\n", wantErr: "not an array"},
		{name: "bad requirement", src: "# /// script\n# dependencies = [\"x @ file:///etc\"]\n# ///\n", wantErr: "no URLs or paths"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ScriptDependencies(tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrBadRequirement) {
					t.Fatalf("error %v, want ErrBadRequirement containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var specs []string
			for _, r := range got {
				specs = append(specs, r.Spec)
			}
			if !slices.Equal(specs, tc.want) {
				t.Errorf("specs %q, want %q", specs, tc.want)
			}
		})
	}
}

func TestImportMap(t *testing.T) {
	m := DefaultImportMap()
	if m.Len() < 150 {
		t.Errorf("the curated table has %d entries, want at least 150", m.Len())
	}
	extra, err := ParseImportMap("cv2 opencv-contrib-python\nmycorp.internal mycorp-internal-tools\n")
	if err != nil {
		t.Fatal(err)
	}
	m = m.With(extra)
	for module, want := range map[string]string{
		"PIL.Image": "pillow", "cv2": "opencv-contrib-python", "sklearn.linear_model": "scikit-learn",
		"yaml": "pyyaml", "bs4": "beautifulsoup4", "google.protobuf.json_format": "protobuf",
		"mycorp.internal.x": "mycorp-internal-tools", "requests": "requests", "Some_Thing": "some-thing",
		"_private": "", "dateutil.parser": "python-dateutil",
	} {
		t.Run(module, func(t *testing.T) {
			got, ok := m.Distribution(module)
			if got != want || ok != (want != "") {
				t.Errorf("Distribution(%q) = %q, %v; want %q", module, got, ok, want)
			}
		})
	}
	for name, text := range map[string]string{"duplicate": "a b\na c\n", "url": "a https://x/y\n", "three fields": "a b c\n"} {
		t.Run("rejects "+name, func(t *testing.T) {
			if _, err := ParseImportMap(text); err == nil {
				t.Errorf("ParseImportMap(%q) accepted", text)
			}
		})
	}
}

func TestPolicy(t *testing.T) {
	p := Policy{Rules: []Rule{
		{Name: "no-shell", Action: Deny, Calls: []string{"os.system", "subprocess"}, Message: "use the provided helpers"},
		{Name: "eval-warning", Action: Warn, Calls: []string{"eval"}},
		{Name: "no-sockets", Action: Warn, Imports: []string{"socket"}},
	}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		imports  []detect.Import
		calls    []detect.Call
		warnings int
		denied   string
	}{
		{name: "clean", imports: []detect.Import{{Module: "os", File: "main.py", Line: 1}}, calls: []detect.Call{{Name: "os.path.join", File: "main.py", Line: 2}}},
		{name: "denied call through a submodule", calls: []detect.Call{{Name: "subprocess.run", File: "main.py", Line: 3}},
			denied: `policy rule "no-shell": call of subprocess.run at main.py:3 is not allowed: use the provided helpers`},
		{name: "warnings", imports: []detect.Import{{Module: "socket", File: "a.py", Line: 1}}, calls: []detect.Call{{Name: "eval", File: "a.py", Line: 2}, {Name: "eval", File: "a.py", Line: 4}}, warnings: 3},
		{name: "prefix is not a match", calls: []detect.Call{{Name: "os.systemd", File: "a.py", Line: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := p.Check(tc.imports, tc.calls)
			if tc.denied != "" {
				if !errors.Is(err, ErrPolicy) || err.Error() != tc.denied {
					t.Fatalf("error %v, want %q", err, tc.denied)
				}
				return
			}
			if err != nil || len(w) != tc.warnings {
				t.Errorf("warnings %q, error %v; want %d warnings", w, err, tc.warnings)
			}
		})
	}
	bad := Policy{Rules: []Rule{{Name: "x", Action: "block", Calls: []string{"eval"}}}}
	if err := bad.Validate(); err == nil {
		t.Error("an unknown action was accepted")
	}
}

// TestRequirementListsAreBounded: a requirement list or a script block of
// more than maxRequirements entries is a 400, and megabytes of lines cost
// memory in proportion to their size at most.
func TestRequirementListsAreBounded(t *testing.T) {
	if _, err := ParseRequirements(strings.Repeat("pkg\n", maxRequirements+1), FromRequest); !errors.Is(err, ErrBadRequirement) {
		t.Errorf("%d requirements: error %v, want ErrBadRequirement", maxRequirements+1, err)
	}
	block := "# /// script\n# dependencies = [\n" + strings.Repeat("#   \"a\",\n", maxRequirements+1) + "# ]\n# ///\n"
	if _, err := ScriptDependencies(block); !errors.Is(err, ErrBadRequirement) {
		t.Errorf("a script block of %d dependencies: error %v, want ErrBadRequirement", maxRequirements+1, err)
	}
	for name, text := range map[string]string{
		"10 MB of blank lines":              strings.Repeat("\n", 10<<20),
		"10 MB of comment lines in a block": "# /// script\n" + strings.Repeat("#\n", 5<<20) + "# ///\n",
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err1 := ParseRequirements(text, FromRequest)
		_, err2 := ScriptDependencies(text)
		runtime.ReadMemStats(&after)
		if err1 != nil || err2 != nil {
			t.Errorf("%s: errors %v, %v", name, err1, err2)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(3*len(text)) {
			t.Errorf("%s: %d MiB allocated for %d MiB", name, alloc>>20, len(text)>>20)
		}
	}
}
