package runner

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseReport(t *testing.T) {
	two := "2"
	cases := []struct {
		name    string
		in      string
		want    Report
		wantErr error
	}{
		{name: "result", in: `{"result":"2","error":null,"exit_code":0}` + "\n",
			want: Report{Result: &two}},
		{name: "error with unknown line",
			in:   `{"result":null,"error":{"name":"KeyboardInterrupt","value":"","traceback":"KeyboardInterrupt\n","line":null,"file":null},"exit_code":130}`,
			want: Report{ExitCode: 130, Error: &Error{Name: "KeyboardInterrupt", Traceback: "KeyboardInterrupt\n"}}},
		{name: "error",
			in: `{"result":null,"error":{"name":"NameError","value":"name 'x' is not defined","traceback":"T","line":3,"file":"main.py"},"exit_code":1}`,
			want: Report{ExitCode: 1, Error: &Error{Name: "NameError", Value: "name 'x' is not defined",
				Traceback: "T", Line: 3, File: "main.py"}}},
		{name: "user bytes before the report are ignored",
			in:   "garbage the user wrote\n{\"exit_code\":0,\"result\":null,\"error\":null,\"extra\":1}\n",
			want: Report{}},
		{name: "unknown fields are ignored", in: `{"exit_code":3,"new_field":[1,2]}`, want: Report{ExitCode: 3}},
		{name: "empty channel", in: "", wantErr: ErrNoReport},
		{name: "only whitespace", in: "\n \n", wantErr: ErrNoReport},
		{name: "cut short", in: `{"result":"2","err`, wantErr: ErrMalformedReport},
		{name: "not an object", in: `[1]`, wantErr: ErrMalformedReport},
		{name: "no exit code", in: `{"result":"2"}`, wantErr: ErrMalformedReport},
		{name: "exit code out of range", in: `{"exit_code":256}`, wantErr: ErrMalformedReport},
		{name: "nameless error", in: `{"exit_code":1,"error":{"value":"x"}}`, wantErr: ErrMalformedReport},
		{name: "negative line", in: `{"exit_code":1,"error":{"name":"E","line":-1}}`, wantErr: ErrMalformedReport},
		{name: "user bytes after the report", in: `{"exit_code":0}` + "\nlater", wantErr: ErrMalformedReport},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseReport([]byte(tc.in))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestArgv(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		tail []string // argv after the driver source
	}{
		{"defaults", Options{}, []string{"--report-fd", "3", "--", "main.py"}},
		{"everything", Options{Entrypoint: "app/run.py", Args: []string{"--", "-x"}, EvalLastExpr: true, ReportFD: 7},
			[]string{"--report-fd", "7", "--eval-last-expr", "--", "app/run.py", "--", "-x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			argv := Argv("/usr/bin/python3", tc.opts)
			head := []string{"/usr/bin/python3", "-B", "-c", driverSource}
			if !reflect.DeepEqual(argv[:len(head)], head) {
				t.Errorf("argv starts %q", argv[:3])
			}
			if !reflect.DeepEqual(argv[len(head):], tc.tail) {
				t.Errorf("argv tail %q, want %q", argv[len(head):], tc.tail)
			}
		})
	}
}
