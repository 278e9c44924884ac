package bench

import (
	"testing"
	"time"
)

// TestSoakTurns: W2S gives heureka a turn a minute (one to five) and the
// limit a tenth of the soak in turns around them, at least a second each.
func TestSoakTurns(t *testing.T) {
	for _, c := range []struct {
		soak            time.Duration
		turns           int
		turn, limitTurn time.Duration
	}{
		{2 * time.Second, 1, 2 * time.Second, time.Second},
		{90 * time.Second, 1, 90 * time.Second, 4500 * time.Millisecond},
		{3 * time.Minute, 3, time.Minute, 4500 * time.Millisecond},
		{5 * time.Minute, 5, time.Minute, 5 * time.Second},
		{10 * time.Minute, 5, 2 * time.Minute, 10 * time.Second},
	} {
		turns, turn, limitTurn := soakTurns(c.soak)
		if turns != c.turns || turn != c.turn || limitTurn != c.limitTurn {
			t.Errorf("soakTurns(%s) = %d × %s, limit %s; want %d × %s, limit %s", c.soak, turns, turn, limitTurn, c.turns, c.turn, c.limitTurn)
		}
	}
}

// TestTurnRatios: each of heureka's turns is set against the mean of the
// limit's turns either side; nothing is said without turns around each.
func TestTurnRatios(t *testing.T) {
	rate := func(r ...float64) []Result {
		var out []Result
		for _, v := range r {
			out = append(out, Result{PerSec: v})
		}
		return out
	}
	if got, want := turnRatios(rate(10, 20), rate(10, 10, 40)), "its 2 turns ×0.80–1.00 of the limit's turns either side"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := turnRatios(rate(10), rate(10, 10)); got != "" {
		t.Errorf("one turn: %q", got)
	}
	if got := turnRatios(rate(10, 20), rate(10, 10)); got != "" {
		t.Errorf("turns not around each: %q", got)
	}
}
