package docref

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryReferences is the check itself: every documentation file
// and heading the repository names exists, and nothing points outside it.
func TestRepositoryReferences(t *testing.T) {
	problems, err := Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckFindsEachKindOfProblem runs the check on testdata/tree, a small
// tree with good references and one of each broken kind.
func TestCheckFindsEachKindOfProblem(t *testing.T) {
	root := filepath.Join("testdata", "tree")
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	// The expected problems live in a file so this one does not hold the
	// broken references itself.
	b, err := os.ReadFile(filepath.Join("testdata", "want.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
