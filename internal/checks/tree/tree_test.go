package tree

import "testing"

func TestOnMainPath(t *testing.T) {
	for p, want := range map[string]bool{"httpapi": true, "httpapi/dashboard": true, "cmd/heureka": true, "eureka": true,
		"peering": false, "internal/runtime/tick": false, "cachex": false} {
		if OnMainPath(p) != want {
			t.Errorf("OnMainPath(%s) = %v", p, !want)
		}
	}
}

// Load reads this module: its own package, with its comment and no
// heureka import, and the imports of another.
func TestLoad(t *testing.T) {
	tr, err := LoadModule()
	if err != nil {
		t.Fatal(err)
	}
	self := tr.Package("internal/checks/tree")
	if self == nil || len(self.Imports) != 0 || self.Doc == "" || self.Files["tree.go"] == nil || self.Files["tree_test.go"] != nil {
		t.Fatalf("internal/checks/tree read as %+v", self)
	}
	if p := tr.Package("internal/runtime/memlimit"); p == nil || len(p.Imports) != 1 || p.Imports[0] != "internal/runtime/tick" {
		t.Fatalf("internal/runtime/memlimit read as %+v", p)
	}
	if tr.Package("internal/checks/docref/testdata/tree") != nil {
		t.Fatal("read a package under testdata")
	}
}
