package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Measurements taken the same way for every system the bench drives.

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

// memory is W7: each node's resident set size from /proc when its PID is
// known, else what other(i) reports (bytes, source; ok false when it has
// nothing). Nodes are named prefix1, prefix2, ...
func (s *Suite) memory(system, prefix string, pids []int, nodes int, other func(i int) (int64, string, bool)) Measurement {
	var m Measurement
	for i := range nodes {
		nm := NodeMemory{Node: fmt.Sprintf("%s%d", prefix, i+1), Bytes: -1}
		if i < len(pids) && pids[i] > 0 {
			nm.Bytes, nm.Source = RSS(pids[i]), "rss"
		} else if b, src, ok := other(i); ok {
			nm.Bytes, nm.Source = b, src
		}
		m.Nodes = append(m.Nodes, nm)
	}
	s.logf(system, "W7 memory: %s", FormatCell(KindMemory, m))
	return m
}

// termChange notes in events a change of Raft term from before (taken
// when W1 began; 0 if unknown) to now: a leader election happened during
// the run, and writes around it may have failed.
func (s *Suite) termChange(system string, events *[]string, before, now uint64) {
	if before > 0 && now > before {
		*events = append(*events, fmt.Sprintf("Raft term went from %d to %d (a leader election)", before, now))
		s.logf(system, "Raft term went from %d to %d during the run", before, now)
	}
}

// registered records W1's row from res and the CPU it took, then waits
// until reader B holds want items (count tells how many it holds): reads
// from B must see the whole registry before they are measured. what names
// the items in messages ("instances", "keys").
func (s *Suite) registered(ctx context.Context, system, what string, sys *System, res Result, cpu *cpuMeter,
	want int64, count func(ctx context.Context) (int64, error)) error {
	wl := s.Workload
	m := FromResult(res)
	m.CPUPerOp = cpu.perOp(res.Requests)
	m.DriverCPUPerOp, m.MachineBusy = cpu.machine(res.Requests)
	m.MachineStolen = cpu.stolenShare()
	if m.MachineBusy > 0 {
		s.logf(system, "W1: the machine was %.0f %% busy (%.0f %% stolen by the hypervisor); the driver used %s CPU a write, the servers %s",
			m.MachineBusy*100, m.MachineStolen*100, fmtCPU(m.DriverCPUPerOp), fmtCPU(m.CPUPerOp))
	}
	if res.Requests < int64(wl.Instances) {
		m.Note = fmt.Sprintf("only %s of %s within %s", group(res.Requests), group(int64(wl.Instances)), s.RegisterTimeout)
	}
	sys.Set(RowRegister, m)
	t0 := time.Now()
	err := waitFor(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, error) {
		got, err := count(ctx)
		return got >= want, err
	})
	if err != nil {
		return fmt.Errorf("reader B never held all %d %s: %w", want, what, err)
	}
	s.logf(system, "B holds all %s %s after W1 ended", what, time.Since(t0).Round(time.Millisecond))
	return nil
}
