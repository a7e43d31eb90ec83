package interp

import (
	"reflect"
	"testing"
)

func TestParsePythons(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []pinned
		wantErr string
	}{
		{name: "empty", in: ""},
		{name: "two entries with spaces and a trailing comma",
			in:   "3.12=/opt/py312/bin/python3, 3.11 = /usr/bin/python3.11 ,",
			want: []pinned{{minor{3, 12}, "/opt/py312/bin/python3"}, {minor{3, 11}, "/usr/bin/python3.11"}}},
		{name: "path is cleaned", in: "3.13=/opt//py/../py313/bin/python3",
			want: []pinned{{minor{3, 13}, "/opt/py313/bin/python3"}}},
		{name: "no equals sign", in: "/usr/bin/python3",
			wantErr: `python entry "/usr/bin/python3": want VERSION=PATH, e.g. 3.12=/usr/bin/python3.12`},
		{name: "no path", in: "3.12=",
			wantErr: `python entry "3.12=": want VERSION=PATH, e.g. 3.12=/usr/bin/python3.12`},
		{name: "patch version", in: "3.12.1=/opt/py/bin/python3",
			wantErr: `python entry "3.12.1=/opt/py/bin/python3": version "3.12.1" is not MAJOR.MINOR, e.g. 3.12`},
		{name: "not a version", in: "py312=/opt/py/bin/python3",
			wantErr: `python entry "py312=/opt/py/bin/python3": version "py312" is not MAJOR.MINOR, e.g. 3.12`},
		{name: "relative path", in: "3.12=bin/python3",
			wantErr: `python entry "3.12=bin/python3": path "bin/python3" is not absolute`},
		{name: "duplicate version", in: "3.12=/a/python3,3.12=/b/python3",
			wantErr: `python entry "3.12=/b/python3": version 3.12 is already set to /a/python3`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePythons(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
