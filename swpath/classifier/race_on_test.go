//go:build race

package classifier

// raceDetector: the tests run under the race detector, which slows a
// compile several-fold (see TestPatchStream).
const raceDetector = true
