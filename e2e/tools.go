package e2e

import (
	"os"
	"testing"
)

// RequireToolsEnv, set to 1 (as `make test` does), turns a missing external
// tool (a browser, a JVM, node, Docker) into a test failure instead of a skip.
const RequireToolsEnv = "HEUREKA_REQUIRE_TOOLS"

// ToolOrSkip ends a test that cannot run because err says a tool it needs
// is missing: a skip with the reason, or a failure under RequireToolsEnv=1.
// A nil err does nothing.
func ToolOrSkip(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatalf("%s=1 and the %s test cannot run: %v", RequireToolsEnv, what, err)
	}
	t.Skipf("skipping the %s test: %v", what, err)
}
