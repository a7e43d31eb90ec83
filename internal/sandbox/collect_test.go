package sandbox

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*.csv", "a.csv", true},
		{"*.csv", "out/a.csv", false},
		{"out/*.csv", "out/a.csv", true},
		{"**/*.png", "chart.png", true},
		{"**/*.png", "a/b/c/chart.png", true},
		{"**/*.png", "a/b/chart.jpg", false},
		{"out/**", "out/a/b", true},
		{"out/**", "other/a", false},
		{"a/**/z", "a/z", true},
		{"a/**/z", "a/b/c/z", true},
		{"a/**/z", "a/b/c/y", false},
		{"report.[ct]sv", "report.tsv", true},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+" "+tc.name, func(t *testing.T) {
			if got := matchGlob(tc.pattern, tc.name); got != tc.want {
				t.Errorf("matchGlob(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
			}
		})
	}
}

func TestCollectValidate(t *testing.T) {
	cases := []struct {
		name    string
		collect *Collect
		ok      bool
	}{
		{"none", nil, true},
		{"defaults", &Collect{}, true},
		{"globs", &Collect{Globs: []string{"out/*.csv", "**/*.png"}}, true},
		{"absolute glob", &Collect{Globs: []string{"/etc/*"}}, false},
		{"malformed glob", &Collect{Globs: []string{"a["}}, false},
		{"negative cap", &Collect{MaxFiles: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Argv: []string{"/bin/true"}, Collect: tc.collect}
			err := spec.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidSpec)) {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// allBytes is a binary file holding every byte value, twice.
func allBytes() []byte {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// filesByPath indexes collected files.
func filesByPath(fs []CollectedFile) map[string][]byte {
	m := make(map[string][]byte, len(fs))
	for _, f := range fs {
		m[f.Path] = f.Data
	}
	return m
}

func TestCollectFiles(t *testing.T) {
	m := needJail(t)
	bin := allBytes()
	inputs := []File{{Path: "data/in.bin", Data: bin}, {Path: "keep.txt", Data: []byte("same\n")},
		{Path: "edit.txt", Data: []byte("before\n")}}
	cases := []struct {
		name        string
		code        string
		collect     Collect
		wantFiles   map[string][]byte
		wantOmitted int
	}{
		{name: "created and changed files, byte for byte",
			code: "import os\nos.makedirs('out')\n" +
				"open('out/report.csv', 'w').write('a,b\\n1,2\\n')\n" +
				"open('chart.png', 'wb').write(open('data/in.bin', 'rb').read())\n" +
				"open('edit.txt', 'a').write('after\\n')\n",
			wantFiles: map[string][]byte{"out/report.csv": []byte("a,b\n1,2\n"), "chart.png": bin,
				"edit.txt": []byte("before\nafter\n")}},
		{name: "links, fifos and links to directories are not followed",
			code: "import os\nos.symlink('/etc/passwd', 'passwd')\nos.symlink('/etc', 'etc')\n" +
				"os.symlink('../../../../etc/shadow', 'shadow')\nos.mkfifo('fifo')\n" +
				"os.link('keep.txt', 'hard.txt')\nopen('real.txt', 'w').write('r')\n",
			wantFiles: map[string][]byte{"real.txt": []byte("r"), "hard.txt": []byte("same\n")}},
		{name: "globs select files, changed or not",
			code:      "open('x.csv', 'w').write('x')\nopen('y.txt', 'w').write('y')\n",
			collect:   Collect{Globs: []string{"**/*.csv", "keep.*"}},
			wantFiles: map[string][]byte{"x.csv": []byte("x"), "keep.txt": []byte("same\n")}},
		{name: "count cap",
			code:        "for i in range(5):\n    open('f%d' % i, 'w').write('f')\n",
			collect:     Collect{MaxFiles: 3},
			wantOmitted: 2},
		{name: "byte cap skips what does not fit and goes on",
			code:        "open('big', 'w').write('b' * 4096)\nopen('small', 'w').write('s')\n",
			collect:     Collect{MaxBytes: 100},
			wantFiles:   map[string][]byte{"small": []byte("s")},
			wantOmitted: 1},
		{name: "a background writer is stopped before the walk",
			code: "import subprocess, sys\n" +
				"subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True:\\n    open(\"bg.txt\", \"a\").write(\"x\")\\n    time.sleep(0.001)'])\n" +
				"import os, time\nwhile not os.path.exists('bg.txt'):\n    time.sleep(0.01)\n" + // the writer has started, however slow the machine
				"time.sleep(0.2)\nopen('done.txt', 'w').write('d')\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.collect
			res := runPy(t, m, tc.code, withFiles(inputs...), func(s *Spec) { s.Collect = &c })
			if res.Status != StatusOK {
				t.Fatalf("status %s (%s), stderr:\n%s", res.Status, res.Reason, res.Stderr)
			}
			got := filesByPath(res.Files)
			switch {
			case tc.name == "count cap":
				if len(got) != 3 || res.FilesOmitted != 2 {
					t.Errorf("%d files, %d omitted; want 3 and 2", len(got), res.FilesOmitted)
				}
				return
			case strings.HasPrefix(tc.name, "a background writer"):
				if string(got["done.txt"]) != "d" || len(got["bg.txt"]) == 0 {
					t.Errorf("files %v, want done.txt and a partial bg.txt", slices.Collect(maps.Keys(got)))
				}
				return
			}
			if !maps.EqualFunc(got, tc.wantFiles, bytes.Equal) {
				t.Errorf("files %q, want %q", got, tc.wantFiles)
			}
			if res.FilesOmitted != tc.wantOmitted {
				t.Errorf("omitted %d, want %d", res.FilesOmitted, tc.wantOmitted)
			}
		})
	}
}

func TestCollectNothingAfterATimeout(t *testing.T) {
	m := needJail(t)
	res := runPy(t, m, "open('partial.txt', 'w').write('p')\nwhile True:\n    pass\n",
		withLimits(Limits{WallTime: 500 * time.Millisecond}), func(s *Spec) { s.Collect = &Collect{} })
	if res.Status != StatusTimeout || len(res.Files) != 0 {
		t.Errorf("status %s with %d files, want a timeout and none", res.Status, len(res.Files))
	}
}

func TestBinaryInputArrivesIntact(t *testing.T) {
	m := needJail(t)
	bin := allBytes()
	res := runPy(t, m, "import sys\nsys.stdout.buffer.write(open('in.bin', 'rb').read())\n",
		withFiles(File{Path: "in.bin", Data: bin}))
	if !bytes.Equal(res.Stdout, bin) {
		t.Errorf("payload read %d bytes that differ from the %d sent", len(res.Stdout), len(bin))
	}
}

func TestStreamChannel(t *testing.T) {
	m := needJail(t)
	var live []byte
	spec := Spec{
		Argv:          []string{python, "-c", fetchChannel + "os.write(CH, b'one\\n')\nos.write(CH, b'two\\n')\n"},
		ResultChannel: true,
		StreamChannel: true,
	}
	res, err := m.Run(t.Context(), spec, func(s Stream, p []byte) {
		if s == Channel {
			live = append(live, p...)
		}
	})
	if err != nil || res.Status != StatusOK {
		t.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
	}
	if string(live) != "one\ntwo\n" || string(res.Channel) != "one\ntwo\n" {
		t.Errorf("live %q, kept %q; want both one\\ntwo\\n", live, res.Channel)
	}
}
