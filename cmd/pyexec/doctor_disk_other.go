//go:build !linux

package main

import "errors"

// errFreeUnknown: this platform cannot tell free space here.
var errFreeUnknown = errors.New("free space unknown")

// freeBytes is not measured off Linux, where pyexec serves nothing.
func freeBytes(string) (uint64, error) { return 0, errFreeUnknown }
