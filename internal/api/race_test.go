//go:build race

package api

// raceDetector tells tests that the race detector slows this build.
const raceDetector = true
