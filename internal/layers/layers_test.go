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
	"fsm":               nil,
	"store":             nil,
	"opapi":             nil,
	"eureka":            {"fsm"},
	"cache":             {"fsm", "internal/tick", "opapi"},
	"limits":            {"fsm"},
	"nodeapi":           {"fsm", "opapi"},
	"cluster":           {"fsm", "internal/tick", "limits", "nodeapi", "store", "opapi"},
	"httpapi":           {"cache", "cluster", "fsm", "eureka", "internal/collect", "internal/tick", "limits", "nodeapi", "opapi"},
	"faultproxy":        {"cluster"},
	"peering":           {"fsm", "eureka", "internal/collect"},
	"lab":               {"faultproxy", "internal/instance", "internal/launch", "opapi"},
	"bench":             {"internal/instance", "internal/launch", "internal/tick", "opapi"},
	"e2e":               {"internal/instance", "internal/launch", "internal/tick", "opapi"},
	"e2e/compose":       {"e2e", "opapi"},
	"internal/collect":  nil,
	"internal/docref":   nil,
	"internal/instance": nil,
	"internal/launch":   {"opapi"},
	"internal/layers":   nil,
	"internal/memlimit": {"internal/tick"},
	"internal/tick":     nil,
	"cmd/heureka":       {"*"},

	// The intruder speaks the node-to-node protocols (its package comment).
	"e2e/intruder":         {"cluster", "fsm", "internal/launch", "nodeapi"},
	"e2e/compose/intruder": {"e2e/intruder", "internal/launch", "opapi"},
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
