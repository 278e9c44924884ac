package layers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/internal/checks/tree"
)

// TestDesignNamesEveryPackage: the package picture of docs/design.md,
// "Packages" names every package by its path, so the map holds the whole
// house.
func TestDesignNamesEveryPackage(t *testing.T) {
	tr := tree.ModuleOrFail(t)
	b, err := os.ReadFile(filepath.Join(tr.Root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Packages\n")
	if start < 0 {
		t.Fatal(`docs/design.md has no section "Packages"`)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, p := range tr.Packages {
		if !regexp.MustCompile(`(^|[^\w/])` + regexp.QuoteMeta(p.Path) + `($|[^\w/])`).MatchString(section) {
			t.Errorf(`docs/design.md, "Packages" does not name %s`, p.Path)
		}
	}
}
