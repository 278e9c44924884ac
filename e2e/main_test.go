package e2e

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(fleetWatcherEnv) != "" { // a watcher process of BenchmarkParkedReadsFleet
		runFleetWatcher()
	}
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}
