package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// fakeLeader answers a writeForwarder's calls and records them; a call
// waits while hold is set, until release.
type fakeLeader struct {
	mu      sync.Mutex
	calls   [][]string // the entries of each call, in order
	hold    chan struct{}
	failOn  string // an entry whose batch fails as a whole
	refuse  string // an entry answered with ErrInstanceNotFound
	nextIdx uint64
}

func (l *fakeLeader) record(entries ...[]byte) (uint64, bool) {
	l.mu.Lock()
	var names []string
	fail := false
	for _, e := range entries {
		names = append(names, string(e))
		fail = fail || string(e) == l.failOn
	}
	l.calls = append(l.calls, names)
	l.nextIdx += uint64(len(entries))
	idx, hold := l.nextIdx, l.hold
	l.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return idx, fail
}

func (l *fakeLeader) forwarder() *writeForwarder {
	return newWriteForwarder(time.Second,
		func(ctx context.Context, addr string, entry []byte) (uint64, error) {
			idx, fail := l.record(entry)
			if fail {
				return 0, fmt.Errorf("call to %s: %w", addr, errUnreachable)
			}
			if string(entry) == l.refuse {
				return 0, fsm.ErrInstanceNotFound
			}
			return idx, nil
		},
		func(ctx context.Context, addr string, entries [][]byte) ([]error, uint64, error) {
			idx, fail := l.record(entries...)
			if fail {
				return nil, 0, fmt.Errorf("call to %s: %w", addr, errUnreachable)
			}
			res := make([]error, len(entries))
			for i, e := range entries {
				if string(e) == l.refuse {
					res[i] = fsm.ErrInstanceNotFound
				}
			}
			return res, idx, nil
		})
}

func (l *fakeLeader) callsSeen() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// waiting is how many writes wait for addr's line.
func (f *writeForwarder) waiting(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.lines[addr])
}

type forwardAnswer struct {
	idx uint64
	err error
}

// forwardWhileHeld sends first, holds its call, queues the others behind
// it, then lets every call go, and returns each write's answer by entry.
func forwardWhileHeld(t *testing.T, l *fakeLeader, f *writeForwarder, first string, others []string) map[string]forwardAnswer {
	t.Helper()
	l.hold = make(chan struct{})
	var mu sync.Mutex
	got := map[string]forwardAnswer{}
	var wg sync.WaitGroup
	send := func(e string) {
		defer wg.Done()
		idx, err := f.forward(context.Background(), "leader", []byte(e))
		mu.Lock()
		got[e] = forwardAnswer{idx, err}
		mu.Unlock()
	}
	wg.Add(1)
	go send(first)
	waitUntil(t, "the first call out", func() bool { return len(l.callsSeen()) == 1 })
	for _, e := range others {
		wg.Add(1)
		go send(e)
	}
	waitUntil(t, "the others waiting", func() bool { return f.waiting("leader") == len(others) })
	l.mu.Lock()
	close(l.hold)
	l.hold = nil
	l.mu.Unlock()
	wg.Wait()
	return got
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A write with nothing else on its way leaves at once, through the
// one-write call.
func TestWriteForwarder_LoneWriteGoesAlone(t *testing.T) {
	l := &fakeLeader{}
	f := l.forwarder()
	for i := range 3 {
		idx, err := f.forward(t.Context(), "leader", []byte(fmt.Sprint("w", i)))
		if err != nil || idx != uint64(i+1) {
			t.Fatalf("write %d: index %d, %v", i, idx, err)
		}
	}
	if got := l.callsSeen(); !slices.EqualFunc(got, [][]string{{"w0"}, {"w1"}, {"w2"}}, slices.Equal) {
		t.Fatalf("calls: %v, want one per write", got)
	}
	// The goroutine that made the last call removes the line once it
	// finds nothing left, just after that call's answer.
	waitUntil(t, "no line left after the writes", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.lines) == 0
	})
}

// Writes that arrive while a call is out leave together in the next call,
// in their order, and each gets its own answer.
func TestWriteForwarder_WritesDuringACallGoTogether(t *testing.T) {
	l := &fakeLeader{refuse: "b3"}
	f := l.forwarder()
	others := []string{"b1", "b2", "b3", "b4"}
	got := forwardWhileHeld(t, l, f, "a", others)
	calls := l.callsSeen()
	if len(calls) != 2 || !slices.Equal(calls[0], []string{"a"}) {
		t.Fatalf("calls: %v, want [a] then one batch of the others", calls)
	}
	batch := slices.Clone(calls[1])
	slices.Sort(batch)
	if !slices.Equal(batch, others) {
		t.Fatalf("the batch: %v, want %v", calls[1], others)
	}
	if a := got["a"]; a.err != nil || a.idx != 1 {
		t.Fatalf("the first write: %+v", a)
	}
	for _, e := range others {
		a := got[e]
		if e == "b3" {
			if !errors.Is(a.err, fsm.ErrInstanceNotFound) || a.idx != 0 {
				t.Fatalf("the refused write in the batch: %+v, want ErrInstanceNotFound", a)
			}
			continue
		}
		if a.err != nil || a.idx != 5 {
			t.Fatalf("write %s in the batch: %+v, want the batch's index 5", e, a)
		}
	}
}

// A call that fails answers every write it carried with its error (none of
// them is known applied, and the caller retries each).
func TestWriteForwarder_FailedCallAnswersEveryWrite(t *testing.T) {
	l := &fakeLeader{failOn: "b2"}
	f := l.forwarder()
	got := forwardWhileHeld(t, l, f, "a", []string{"b1", "b2", "b3"})
	if got["a"].err != nil {
		t.Fatalf("the first write: %v", got["a"].err)
	}
	for _, e := range []string{"b1", "b2", "b3"} {
		if a := got[e]; !errors.Is(a.err, errUnreachable) || a.idx != 0 {
			t.Fatalf("write %s of the failed call: %+v, want the call's error", e, a)
		}
	}
}

// A batch holds at most maxForwardBatch writes; the rest go in the next.
func TestWriteForwarder_BatchBound(t *testing.T) {
	l := &fakeLeader{}
	f := l.forwarder()
	var others []string
	for i := range maxForwardBatch + 10 {
		others = append(others, fmt.Sprint("b", i))
	}
	got := forwardWhileHeld(t, l, f, "a", others)
	var sizes []int
	for _, c := range l.callsSeen() {
		sizes = append(sizes, len(c))
	}
	if !slices.Equal(sizes, []int{1, maxForwardBatch, 10}) {
		t.Fatalf("call sizes: %v, want [1 %d 10]", sizes, maxForwardBatch)
	}
	for e, a := range got {
		if a.err != nil {
			t.Fatalf("write %s: %v", e, a.err)
		}
	}
}

// A caller whose context ends stops waiting at once, answered as a write
// no leader took in time (ErrNoLeader, the client's 503); the call it was
// in goes on for the others. A write whose caller gave up before it left
// is taken out of the line, not sent, and says so.
func TestWriteForwarder_CallerGivesUp(t *testing.T) {
	l := &fakeLeader{hold: make(chan struct{})}
	f := l.forwarder()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := f.forward(ctx, "leader", []byte("a"))
		done <- err
	}()
	waitUntil(t, "the call out", func() bool { return len(l.callsSeen()) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "may still be applied") {
			t.Fatalf("the abandoned write: %v, want context.Canceled and ErrNoLeader, maybe applied", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller still waits after its context ended")
	}
	// b waits behind the held call and its caller gives up; c waits too.
	bctx, bcancel := context.WithCancel(t.Context())
	bdone := make(chan error, 1)
	go func() {
		_, err := f.forward(bctx, "leader", []byte("b"))
		bdone <- err
	}()
	waitUntil(t, "b waiting", func() bool { return f.waiting("leader") == 1 })
	bcancel()
	if err := <-bdone; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "before the write was sent") {
		t.Fatalf("the abandoned waiting write: %v, want context.Canceled and ErrNoLeader, not sent", err)
	}
	if n := f.waiting("leader"); n != 0 {
		t.Fatalf("%d writes wait after b withdrew, want 0", n)
	}
	cdone := make(chan error, 1)
	go func() {
		_, err := f.forward(t.Context(), "leader", []byte("c"))
		cdone <- err
	}()
	waitUntil(t, "c waiting", func() bool { return f.waiting("leader") == 1 })
	l.mu.Lock()
	close(l.hold)
	l.hold = nil
	l.mu.Unlock()
	if err := <-cdone; err != nil {
		t.Fatalf("the write behind the abandoned one: %v", err)
	}
	if got := l.callsSeen(); !slices.EqualFunc(got, [][]string{{"a"}, {"c"}}, slices.Equal) {
		t.Fatalf("calls: %v, want [a] then [c] (b abandoned before it left)", got)
	}
	if idx, err := f.forward(t.Context(), "leader", []byte("d")); err != nil || idx != 3 {
		t.Fatalf("the next write: index %d, %v", idx, err)
	}
}

// Concurrent writes on a follower reach the leader in fewer calls than
// writes; each is answered as a lone forward would be: applied and read
// back on the follower when its Apply returns, or, for an instance the
// leader does not hold, refused without an entry in the log.
func TestMem_ConcurrentForwardsShareCalls(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	const n = 24
	regs := make([][]byte, n)
	for i := range regs {
		regs[i] = registerEntry(t, "SHARE", fmt.Sprint(i))
	}
	unknown := cancelEntry(t, "SHARE", "never-registered")
	// Hold the first forwarded call until the rest are waiting behind it.
	release := make(chan struct{})
	var once sync.Once
	c.net.mu.Lock()
	c.net.intercept = func(from string, r *http.Request) *http.Response {
		if from == f.self.HTTPAddr && r.URL.Path == pathApply {
			once.Do(func() { <-release })
		}
		return nil
	}
	c.net.mu.Unlock()
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	apply := func(i int, entry []byte) {
		defer wg.Done()
		_, errs[i] = f.Apply(t.Context(), entry)
		if errs[i] == nil && !inFSM(f.Node, "SHARE", fmt.Sprint(i)) {
			errs[i] = fmt.Errorf("registration %d not readable on the follower when its Apply returned", i)
		}
	}
	wg.Add(1)
	go apply(0, regs[0])
	waitUntil(t, "the first forward out", func() bool { return c.net.callCount(f.self.HTTPAddr, pathApply) == 1 })
	for i := 1; i < n; i++ {
		wg.Add(1)
		go apply(i, regs[i])
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errs[n] = f.Apply(t.Context(), unknown)
	}()
	waitUntil(t, "the writes waiting behind it", func() bool { return f.fwd.waiting(leader.self.HTTPAddr) == n })
	close(release)
	wg.Wait()
	for i, err := range errs[:n] {
		if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	if !errors.Is(errs[n], fsm.ErrInstanceNotFound) {
		t.Fatalf("cancel of an unknown instance in a batch: %v, want ErrInstanceNotFound", errs[n])
	}
	calls := c.net.callCount(f.self.HTTPAddr, pathApply) + c.net.callCount(f.self.HTTPAddr, nodeapi.PathApplyBatch)
	if calls != 2 {
		t.Fatalf("%d writes took %d calls to the leader, want 2 (one held, one batch)", n+1, calls)
	}
	log := leader.committed(t, "SHARE")
	if len(log) != n || slices.ContainsFunc(log, func(s string) bool { return s == "cancel never-registered" }) {
		t.Fatalf("leader's log for SHARE: %v, want the %d registrations and no cancel", log, n)
	}
}
