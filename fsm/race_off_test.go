//go:build !race

package fsm

// raceDetector is whether the tests run with the race detector, which
// drops some of what is put in a sync.Pool: allocation counts mean
// nothing then.
const raceDetector = false
