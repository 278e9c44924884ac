package layers

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Allowed lists, per package, the heureka packages its non-test code may
// import ("*": any). A package missing here fails TestImportsPointOneWay
// until it is given a line.
var Allowed = map[string][]string{
	"fsm":               nil,
	"store":             nil,
	"opapi":             nil,
	"eureka":            {"fsm"},
	"cache":             {"fsm", "internal/runtime/tick", "opapi"},
	"limits":            {"fsm"},
	"nodeapi":           {"fsm", "opapi"},
	"cluster":           {"fsm", "internal/runtime/tick", "limits", "nodeapi", "store", "opapi"},
	"httpapi/dashboard": {"cache", "cluster", "fsm", "nodeapi"},
	"httpapi":           {"cache", "cluster", "eureka", "fsm", "httpapi/dashboard", "internal/runtime/collect", "internal/runtime/tick", "limits", "nodeapi", "opapi"},
	"faultproxy":        {"cluster"},
	"peering":           {"fsm", "eureka", "internal/runtime/collect"},
	"region":            {"fsm", "eureka", "internal/runtime/collect"},
	"lab":               {"faultproxy", "internal/testkit/instance", "internal/testkit/launch", "opapi"},
	"bench":             {"internal/runtime/memlimit", "internal/testkit/instance", "internal/testkit/launch", "internal/runtime/tick", "opapi"},
	"e2e":               {"internal/testkit/instance", "internal/testkit/launch", "internal/runtime/tick", "opapi"},
	"e2e/compose":       {"e2e", "opapi"},
	"cmd/heureka":       {"*"},

	"internal/checks/docref":    nil,
	"internal/checks/layers":    {"internal/checks/tree"},
	"internal/checks/size":      {"internal/checks/tree"},
	"internal/checks/tree":      nil,
	"internal/runtime/collect":  nil,
	"internal/runtime/memlimit": {"internal/runtime/tick"},
	"internal/runtime/tick":     nil,
	"internal/testkit/instance": nil,
	"internal/testkit/launch":   {"opapi"},

	// The intruder speaks the node-to-node protocols (its package comment).
	"e2e/intruder":         {"cluster", "fsm", "internal/testkit/launch", "nodeapi"},
	"e2e/compose/intruder": {"e2e/intruder", "internal/testkit/launch", "opapi"},
}

// Check returns a problem for each package of imports (package path →
// the heureka packages it imports) that has no entry in allowed, and for
// each import its entry does not allow, in package order.
func Check(imports map[string][]string, allowed map[string][]string) []string {
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var problems []string
	for _, pkg := range pkgs {
		ok, known := allowed[pkg]
		if !known {
			problems = append(problems, fmt.Sprintf("package %s has no entry in allowed: say which heureka packages it may import", pkg))
			continue
		}
		if len(ok) == 1 && ok[0] == "*" {
			continue
		}
		var bad []string
		for _, dep := range imports[pkg] {
			if !slices.Contains(ok, dep) && !slices.Contains(bad, dep) {
				bad = append(bad, dep)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("%s imports %s; it may import only %v", pkg, strings.Join(bad, ", "), ok))
		}
	}
	return problems
}

var (
	importsSentence = regexp.MustCompile(`\bIt imports (.*)`)
	parenthetical   = regexp.MustCompile(`\s*\([^()]*\)`)
	listEnd         = regexp.MustCompile(`;|\.(\s|$)| only\b| of heureka\b|,? and must\b`)
	listSep         = regexp.MustCompile(`,\s*(?:and\s+)?|\s+and\s+`)
)

// Listed reads the import list of a package comment (see the package
// comment): the module-relative paths it names, sorted, and whether the
// comment has such a sentence at all. It does not check that the names
// are packages.
func Listed(doc string) (imports []string, ok bool) {
	text := strings.Join(strings.Fields(doc), " ")
	m := importsSentence.FindStringSubmatch(text)
	if m == nil {
		return nil, false
	}
	rest := m[1]
	for {
		next := parenthetical.ReplaceAllString(rest, "")
		if next == rest {
			break
		}
		rest = next
	}
	if loc := listEnd.FindStringIndex(rest); loc != nil {
		rest = rest[:loc[0]]
	}
	rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "only "))
	if rest == "no heureka package" || rest == "nothing" {
		return []string{}, true
	}
	for _, name := range listSep.Split(rest, -1) {
		if name = strings.TrimSpace(name); name != "" {
			imports = append(imports, name)
		}
	}
	sort.Strings(imports)
	return imports, true
}
