package interp

import (
	"errors"
	"testing"
)

func testSet(t *testing.T, def string) *Interpreters {
	t.Helper()
	s, err := newInterpreters([]Interpreter{
		{Version: "3.13", Full: "3.13.0", Path: "/py/3.13/bin/python3.13"},
		{Version: "3.10", Full: "3.10.13", Path: "/py/3.10/bin/python3.10"},
		{Version: "3.12", Full: "3.12.1", Path: "/py/3.12/bin/python3.12"},
		{Version: "3.11", Full: "3.11.7", Path: "/py/3.11/bin/python3.11"},
	}, def)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLookup(t *testing.T) {
	const unsupported = "; supported versions: 3.10, 3.11, 3.12, 3.13"
	cases := []struct {
		name    string
		def     string
		version string
		want    string // Full of the interpreter, or the error message
	}{
		{"default is the newest", "", "", "3.13.0"},
		{"configured default", "3.11", "", "3.11.7"},
		{"minor version", "", "3.12", "3.12.1"},
		{"exact patch", "", "3.12.1", "3.12.1"},
		{"other patch of an available minor", "", "3.12.7", "3.12.1"},
		{"pre-release spelling", "", "3.13.0rc1", "3.13.0"},
		{"two digit minor sorts after one digit", "", "3.10", "3.10.13"},
		{"unknown version", "", "2.7", `unsupported python_version "2.7"` + unsupported},
		{"major only", "", "3", `unsupported python_version "3"` + unsupported},
		{"not a version", "", "latest", `unsupported python_version "latest"` + unsupported},
		{"leading zero", "", "3.012", `unsupported python_version "3.012"` + unsupported},
		{"trailing garbage", "", "3.12.x", `unsupported python_version "3.12.x"` + unsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := testSet(t, tc.def).Lookup(tc.version)
			if err != nil {
				if err.Error() != tc.want {
					t.Errorf("error %q, want %q", err, tc.want)
				}
				if !errors.Is(err, ErrUnknownVersion) {
					t.Errorf("error %v does not wrap ErrUnknownVersion", err)
				}
				var ve *VersionError
				if !errors.As(err, &ve) || ve.Requested != tc.version || len(ve.Supported) != 4 {
					t.Errorf("error %#v, want a *VersionError for %q", err, tc.version)
				}
				return
			}
			if in.Full != tc.want {
				t.Errorf("got %s, want %s", in.Full, tc.want)
			}
		})
	}
}

func TestInterpretersAreImmutable(t *testing.T) {
	s, err := newInterpreters([]Interpreter{{Version: "3.12", Full: "3.12.1", Path: "/p", Mounts: []string{"/opt/py"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s.All()[0].Mounts[0] = "/"
	s.Default().Mounts[0] = "/"
	in, _ := s.Lookup("3.12")
	in.Mounts[0] = "/"
	if got, _ := s.Lookup("3.12"); got.Mounts[0] != "/opt/py" {
		t.Errorf("a caller changed the set's mounts to %v", got.Mounts)
	}
}

func TestNewInterpretersErrors(t *testing.T) {
	if _, err := newInterpreters(nil, ""); !errors.Is(err, ErrNoInterpreter) {
		t.Errorf("empty set: error %v, want ErrNoInterpreter", err)
	}
	_, err := newInterpreters([]Interpreter{{Version: "3.12"}}, "3.9")
	if !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("unavailable default: error %v, want ErrUnknownVersion", err)
	}
}
