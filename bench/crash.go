package bench

import (
	"context"
	"sync"
	"time"
)

// crashDetection is W8's measurement, the same for every system: renew
// renews instance i (of names) for three rounds a second apart, recording
// when each renewal was acknowledged; then renewals stop, and listed (B's
// view of the application) is polled every 50 ms until every name is gone
// or CrashTimeout passes. Each instance is timed from its last acknowledged
// renewal until the first poll that no longer lists it; the ones never seen
// gone count as timeouts. what names a renewal in the log ("renewal",
// "keep-alive").
func (s *Suite) crashDetection(ctx context.Context, system, what string, names []string,
	renew func(ctx context.Context, i int) error, listed func(ctx context.Context) (map[string]bool, error)) Measurement {
	k := len(names)
	lastAck := make([]time.Time, k)
	var mu sync.Mutex
	for round := range 3 {
		if round > 0 {
			sleepCtx(ctx, time.Second)
		}
		err := parallel(ctx, min(k, 32), k, func(ctx context.Context, i int) error {
			if err := renew(ctx, i); err != nil {
				return err
			}
			mu.Lock()
			lastAck[i] = time.Now()
			mu.Unlock()
			return nil
		})
		if err != nil {
			s.logf(system, "W8: %s round %d: %v", what, round+1, err)
		}
	}
	s.logf(system, "W8: %ss stopped; watching B for up to %s", what, s.CrashTimeout)
	gone := map[string]time.Time{}
	deadline := time.Now().Add(s.CrashTimeout)
	for len(gone) < k && time.Now().Before(deadline) && ctx.Err() == nil {
		present, err := listed(ctx)
		at := time.Now()
		if err == nil {
			for _, name := range names {
				if _, seen := gone[name]; !seen && !present[name] {
					gone[name] = at
				}
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	var d []time.Duration
	for i, name := range names {
		if t, ok := gone[name]; ok && !lastAck[i].IsZero() {
			d = append(d, t.Sub(lastAck[i]))
		}
	}
	return FromSamples(d, int64(k-len(gone)))
}
