package launch

import "time"

// Every calls fn every d, the first time after d, until stop is closed. It
// paces the background load, progress lines and pollers the tools run next
// to a cluster; fn runs on the caller's goroutine, so a slow call delays the
// next rather than overlapping it.
func Every(stop <-chan struct{}, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		fn()
	}
}
