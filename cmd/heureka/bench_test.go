package main

import (
	"testing"
	"time"
)

// TestBench_RegisterBoundFollowsInstances: W1's bound grows with the
// instances to register unless --register-timeout says otherwise, so a
// million is not cut off at the 5 minutes meant for 10,000.
func TestBench_RegisterBoundFollowsInstances(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"--instances", "10000"}, 5 * time.Minute},
		{[]string{"--instances", "1000000"}, 2000 * time.Second},
		{[]string{"--instances", "1000000", "--register-timeout", "1m"}, time.Minute},
	} {
		c, code := parseBench(tc.args)
		if c == nil {
			t.Fatalf("%v: parse failed (%d)", tc.args, code)
		}
		c.suite.Defaults()
		if got := c.suite.RegisterTimeout; got != tc.want {
			t.Errorf("%v: register bound %v, want %v", tc.args, got, tc.want)
		}
	}
}
