package interp_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/pyexec/pyexec/internal/pyenv/interp"
)

func ExampleVersionFromImage() {
	v, ok := interp.VersionFromImage("python:3.12-slim")
	fmt.Println(v, ok)
	_, ok = interp.VersionFromImage("python:latest")
	fmt.Println(ok)
	// Output:
	// 3.12 true
	// false
}

func ExampleInterpreters_Lookup() {
	pythons, err := interp.Discover(context.Background(), interp.OptionsFromEnv(os.Getenv))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = pythons.Lookup("2.7")
	fmt.Println(errors.Is(err, interp.ErrUnknownVersion))
	// Output: true
}
