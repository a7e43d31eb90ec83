package pyenv_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/pyexec/pyexec/internal/pyenv"
)

func ExampleVersionFromImage() {
	v, ok := pyenv.VersionFromImage("python:3.12-slim")
	fmt.Println(v, ok)
	_, ok = pyenv.VersionFromImage("python:latest")
	fmt.Println(ok)
	// Output:
	// 3.12 true
	// false
}

func ExampleInterpreters_Lookup() {
	pythons, err := pyenv.Discover(context.Background(), pyenv.OptionsFromEnv(os.Getenv))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = pythons.Lookup("2.7")
	fmt.Println(errors.Is(err, pyenv.ErrUnknownVersion))
	// Output: true
}
