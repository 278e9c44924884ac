package layers

import (
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/heureka-registry/heureka/"

// allowed lists, per package, the heureka packages its non-test code may
// import. A package missing here fails the test until it is given a line.
var allowed = map[string][]string{
	"fsm":                       nil,
	"store":                     nil,
	"opapi":                     nil,
	"eureka":                    {"fsm"},
	"cache":                     {"fsm", "internal/runtime/tick", "opapi"},
	"limits":                    {"fsm"},
	"nodeapi":                   {"fsm", "opapi"},
	"cluster":                   {"fsm", "internal/runtime/tick", "limits", "nodeapi", "store", "opapi"},
	"httpapi/dashboard":         {"cache", "cluster", "fsm", "nodeapi"},
	"httpapi":                   {"cache", "cluster", "fsm", "eureka", "httpapi/dashboard", "internal/runtime/collect", "internal/runtime/tick", "limits", "nodeapi", "opapi"},
	"faultproxy":                {"cluster"},
	"peering":                   {"fsm", "eureka", "internal/runtime/collect"},
	"lab":                       {"faultproxy", "internal/testkit/instance", "internal/testkit/launch", "opapi"},
	"bench":                     {"internal/testkit/instance", "internal/testkit/launch", "internal/runtime/tick", "opapi"},
	"e2e":                       {"internal/testkit/instance", "internal/testkit/launch", "internal/runtime/tick", "opapi"},
	"e2e/compose":               {"e2e", "opapi"},
	"internal/runtime/collect":  nil,
	"internal/checks/docref":    nil,
	"internal/testkit/instance": nil,
	"internal/testkit/launch":   {"opapi"},
	"internal/checks/layers":    nil,
	"internal/runtime/memlimit": {"internal/runtime/tick"},
	"internal/runtime/tick":     nil,
	"cmd/heureka":               {"*"},

	// The intruder speaks the node-to-node protocols (its package comment).
	"e2e/intruder":         {"cluster", "fsm", "internal/testkit/launch", "nodeapi"},
	"e2e/compose/intruder": {"e2e/intruder", "internal/testkit/launch", "opapi"},
}

func TestImportsPointOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no entry in allowed: say which heureka packages it may import", pkg)
			continue
		}
		seen++
		var bad []string
		for _, imp := range f[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours || (len(ok) == 1 && ok[0] == "*") {
				continue
			}
			if !slices.Contains(ok, dep) {
				bad = append(bad, dep)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s imports %s; it may import only %v", pkg, strings.Join(bad, ", "), ok)
		}
	}
	if seen < 10 {
		t.Fatalf("go list named only %d packages:\n%s", seen, out)
	}
}
