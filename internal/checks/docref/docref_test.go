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
	problems, err := Check(filepath.Join("..", "..", ".."))
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
	root := unmaskTree(t, filepath.Join("testdata", "tree"))
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
	want := strings.Split(strings.TrimSpace(unmask(string(b))), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// unmask turns the masked forbidden references of testdata ("{-}" for "-",
// "{.}" for ".") into real ones, so that the repository itself never holds
// them and tree-wide searches for them stay clean.
func unmask(s string) string {
	return strings.NewReplacer("{-}", "-", "{.}", ".").Replace(s)
}

// unmaskTree copies the tree at src into a temporary directory, unmasking
// every file, and returns the copy's root.
func unmaskTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), []byte(unmask(string(b))), 0o644)
	})
	if err != nil {
		t.Fatalf("copy testdata tree: %v", err)
	}
	return dst
}
