//go:build race

package delta

// raceDetector is set in a build with the race detector.
const raceDetector = true
