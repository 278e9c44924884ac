package tick

import (
	"testing"
	"time"
)

func TestEveryCallsUntilStopCloses(t *testing.T) {
	stop := make(chan struct{})
	calls := 0
	Every(stop, time.Millisecond, func() {
		calls++
		if calls == 3 {
			close(stop)
		}
	})
	if calls != 3 {
		t.Fatalf("fn ran %d times, want 3 (Every returns once stop is closed)", calls)
	}
}

func TestUntilStopsWhenDone(t *testing.T) {
	calls := 0
	Until(make(chan struct{}), time.Millisecond, func() bool {
		calls++
		return calls == 2
	})
	if calls != 2 {
		t.Fatalf("done ran %d times, want 2 (Until returns once done says so)", calls)
	}
}

func TestUntilReturnsOnClosedStop(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	Until(stop, time.Hour, func() bool {
		t.Fatal("done ran after stop closed")
		return true
	})
}

func TestStoppedOnceStopCloses(t *testing.T) {
	stop := make(chan struct{})
	if Stopped(stop) {
		t.Fatal("Stopped before stop is closed")
	}
	close(stop)
	if !Stopped(stop) {
		t.Fatal("not Stopped after stop is closed")
	}
}
