//go:build chaos

package e2e

import (
	"testing"
	"time"
)

// TestLinearizabilityCPLong runs 20 randomized fault schedules (seeds 1..20):
//
//	go test -tags chaos ./e2e -run LinearizabilityCPLong -timeout 60m -v
func TestLinearizabilityCPLong(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run("", func(t *testing.T) { runLinearizability(t, seed, 30*time.Second) })
	}
}
