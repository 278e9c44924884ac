package layers

import (
	"slices"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/internal/checks/tree"
)

func TestImportsPointOneWay(t *testing.T) {
	imports := map[string][]string{}
	for _, p := range tree.ModuleOrFail(t).Packages {
		imports[p.Path] = p.Imports
	}
	for _, p := range Check(imports, Allowed) {
		t.Error(p)
	}
}

// The check itself, on made-up import lists: a back-arrow (fsm importing
// httpapi) is reported, and so is a package nobody placed; "*" allows
// anything.
func TestCheckRejectsBackArrow(t *testing.T) {
	got := Check(map[string][]string{
		"fsm":         {"httpapi"},
		"httpapi":     {"cluster", "fsm"},
		"cluster":     {"fsm"},
		"newpkg":      nil,
		"cmd/heureka": {"httpapi", "store"},
	}, map[string][]string{
		"fsm":         nil,
		"cluster":     {"fsm"},
		"httpapi":     {"cluster", "fsm"},
		"cmd/heureka": {"*"},
	})
	want := []string{
		"fsm imports httpapi; it may import only []",
		"package newpkg has no entry in allowed: say which heureka packages it may import",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The real table refuses the same back-arrow.
	if got := Check(map[string][]string{"fsm": {"httpapi"}}, Allowed); len(got) != 1 || !strings.Contains(got[0], "fsm imports httpapi") {
		t.Fatalf("Allowed lets fsm import httpapi: %v", got)
	}
}

// TestDocsListImports: every package comment that lists the package's
// imports lists exactly them, and every package on the main paths has
// such a list.
func TestDocsListImports(t *testing.T) {
	tr := tree.ModuleOrFail(t)
	known := map[string]bool{}
	for _, p := range tr.Packages {
		known[p.Path] = true
	}
	for _, p := range tr.Packages {
		listed, ok := Listed(p.Doc)
		if !ok {
			if tree.OnMainPath(p.Path) {
				t.Errorf("%s: the package comment does not say what it imports (\"It imports ...\"); it imports %s", p.Path, orNone(p.Imports))
			}
			continue
		}
		for _, name := range listed {
			if !known[name] {
				t.Errorf("%s: the package comment lists %q, which is no heureka package", p.Path, name)
			}
		}
		if !slices.Equal(listed, p.Imports) {
			t.Errorf("%s: the package comment says it imports %s; it imports %s", p.Path, orNone(listed), orNone(p.Imports))
		}
	}
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "no heureka package"
	}
	return strings.Join(list, ", ")
}

func TestListed(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want []string
		ok   bool
	}{
		{"Package a does things.\n\nIt imports fsm, nodeapi, store and opapi only; it must not\nimport httpapi.", []string{"fsm", "nodeapi", "opapi", "store"}, true},
		{"It imports fsm (change notices), internal/runtime/tick (its\nrefresh loop) and opapi (its counters' wire type) only.", []string{"fsm", "internal/runtime/tick", "opapi"}, true},
		{"It imports only internal/testkit/launch and opapi of heureka; it must not import the server.", []string{"internal/testkit/launch", "opapi"}, true},
		{"It imports no heureka package, and must import none.", []string{}, true},
		{"It imports cluster (for the preamble) only.", []string{"cluster"}, true},
		{"It imports no heureka package.", []string{}, true},
		{"It owns only this check and imports nothing of heureka.", nil, false},
		{"It imports nothing of heureka.", []string{}, true},
		{"Package a says nothing of its imports.", nil, false},
	} {
		got, ok := Listed(c.doc)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("Listed(%q) = %q, %v; want %q, %v", c.doc, got, ok, c.want, c.ok)
		}
	}
}
