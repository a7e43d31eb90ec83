package runner_test

import (
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/runner"
)

func ExampleParseReport() {
	// What the jail returned on the result channel (sandbox.Result.Channel).
	channel := []byte(`{"result":null,"error":{"name":"NameError","value":"name 'x' is not defined",` +
		`"traceback":"...","line":3,"file":"main.py"},"exit_code":1}` + "\n")
	rep, err := runner.ParseReport(channel)
	switch {
	case errors.Is(err, runner.ErrNoReport), errors.Is(err, runner.ErrMalformedReport):
		fmt.Println("no report: use the exit code alone")
	case rep.Error != nil:
		fmt.Printf("%s on line %d of %s\n", rep.Error.Name, rep.Error.Line, rep.Error.File)
	}
	// Output: NameError on line 3 of main.py
}

func ExampleArgv() {
	argv := runner.Argv("/usr/bin/python3", runner.Options{Entrypoint: "main.py", Args: []string{"-v"}})
	fmt.Println(argv[0], argv[1], argv[2], "<driver>", argv[4:])
	// Output: /usr/bin/python3 -B -c <driver> [--report-fd 3 -- main.py -v]
}
