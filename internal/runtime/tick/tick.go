// Package tick runs a function on a ticker until a stop channel closes: the
// loop the node's background work (cache refresh, quorum and readiness
// watches, renewal forwarding, parked-read sweeps, the memory limit) and
// the tools' pollers share.
//
// It imports no heureka package.
package tick

import "time"

// Every calls fn every d, the first time after d, until stop is closed. fn
// runs on the caller's goroutine, so a slow call delays the next rather than
// overlapping it.
func Every(stop <-chan struct{}, d time.Duration, fn func()) {
	Until(stop, d, func() bool {
		fn()
		return false
	})
}

// Until calls done every d, the first time after d, until it returns true or
// stop is closed.
func Until(stop <-chan struct{}, d time.Duration, done func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if done() {
			return
		}
	}
}

// Stopped reports whether stop is closed, without waiting: the check at the
// top of a loop that runs back to back (a load generator) until stop.
func Stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
