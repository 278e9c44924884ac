package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBenchmarksPage checks the shape of BENCHMARKS.md: the generated
// summary table near the top with its date, commit and command, and the
// run-by-run history in docs/benchmarks/, every file of it linked.
func TestBenchmarksPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	lines := strings.Split(page, "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, SummaryBeginPrefix):
			begin = i
		case strings.HasPrefix(l, SummaryEndPrefix):
			end = i
		}
	}
	if begin < 0 || begin >= 60 {
		t.Fatalf("summary begin marker at line %d, want one within the first 60 lines", begin+1)
	}
	if end < begin || end >= 60 {
		t.Fatalf("summary end marker at line %d, want one after the begin marker within the first 60 lines", end+1)
	}
	table := strings.Join(lines[begin+1:end], "\n")
	for what, re := range map[string]string{
		"date":    `\b20\d\d-\d\d-\d\d \d\d:\d\d UTC\b`,
		"commit":  "commit `[0-9a-f]{7,40}",
		"command": "`heureka bench [^`]*--summary[^`]*`",
		"load":    `load average`,
		"table":   `(?m)^\| instances \| system \|`,
		"heureka": `(?m)^\| [0-9,]* ?\| heureka \|`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("the summary table has no %s (%s):\n%s", what, re, table)
		}
	}

	dir := filepath.Join("..", "docs", "benchmarks")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	dated := regexp.MustCompile(`^20\d\d-\d\d-\d\d-[a-z0-9-]+\.md$`)
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		if !dated.MatchString(e.Name()) {
			t.Errorf("docs/benchmarks/%s: history files are named YYYY-MM-DD-topic.md", e.Name())
		}
		n++
		if !strings.Contains(page, "](docs/benchmarks/"+e.Name()+")") {
			t.Errorf("BENCHMARKS.md does not link docs/benchmarks/%s", e.Name())
		}
	}
	if n == 0 {
		t.Fatal("docs/benchmarks holds no history file")
	}
}
