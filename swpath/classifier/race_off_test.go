//go:build !race

package classifier

// raceDetector: the tests run under the race detector.
const raceDetector = false
