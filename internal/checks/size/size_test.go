package size

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/heureka-registry/heureka/internal/checks/tree"
)

// TestPackageSize: no package holds more than MaxPackage lines of non-test
// Go code; a larger one is split by role.
func TestPackageSize(t *testing.T) {
	tr := tree.ModuleOrFail(t)
	for _, p := range tr.Packages {
		n, err := PackageLines(tr, p)
		if err != nil {
			t.Fatal(err)
		}
		if n > MaxPackage {
			t.Errorf("%s: %d lines of non-test Go code, more than %d", p.Path, n, MaxPackage)
		}
	}
}

// TestFunctionLength: no function on a main path (tree.Main) has a body
// of more than MaxFunc lines; a longer one reads as a line of named steps.
func TestFunctionLength(t *testing.T) {
	tr := tree.ModuleOrFail(t)
	checked := 0
	for _, p := range tr.Packages {
		if !tree.OnMainPath(p.Path) {
			continue
		}
		for _, f := range Funcs(tr, p) {
			checked++
			if f.Lines > MaxFunc {
				t.Errorf("%s: %s has a body of %d lines, more than %d", f.Pos, f.Name, f.Lines, MaxFunc)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d functions", checked)
	}
}

// Funcs measures the lines between a body's braces, and names methods by
// their receiver's type.
func TestFuncs(t *testing.T) {
	tr := tree.ModuleOrFail(t)
	var found bool
	for _, f := range Funcs(tr, tr.Package("internal/checks/size")) {
		if f.Name == "comparePos" {
			found = true
			if f.Lines != 9 {
				t.Errorf("comparePos: %d lines, want 9", f.Lines)
			}
		}
	}
	if !found {
		t.Fatal("comparePos not found")
	}
	for _, f := range Funcs(tr, tr.Package("internal/checks/tree")) {
		if f.Name == "Tree.Package" {
			return
		}
	}
	t.Fatal("the method Tree.Package not named so")
}

// CodeLines counts the lines holding code: not blank lines, not comments,
// every line of a raw string.
func TestCodeLines(t *testing.T) {
	src := "// Package p.\npackage p\n\n/* a\nblock */\nvar s = `one\ntwo`\n\nfunc f() { // trailing\n\treturn\n}\n"
	name := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := CodeLines(name); err != nil || n != 6 {
		t.Fatalf("CodeLines = %d, %v; want 6", n, err)
	}
}
