// Package detect finds what a Python project imports and calls, for
// dependency detection and policy rules: it parses every .py file with the
// target interpreter's own ast module, inside a jail without network, and
// drops the standard library and the project's own modules.
//
// It never imports or executes the project's code.
package detect
