package launch

import (
	"time"

	"github.com/heureka-registry/heureka/internal/tick"
)

// Every calls fn every d, the first time after d, until stop is closed. It
// paces the background load, progress lines and pollers the tools run next
// to a cluster; fn runs on the caller's goroutine, so a slow call delays the
// next rather than overlapping it. The loop is tick's, which the node's own
// background work shares.
func Every(stop <-chan struct{}, d time.Duration, fn func()) { tick.Every(stop, d, fn) }
