package docref

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Problem is one reference that cannot be followed.
type Problem struct {
	File string // slash path relative to the root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

var (
	// fileRef is a root-relative documentation file, with the headings that
	// follow it on the same line.
	fileRef = regexp.MustCompile(`\b(docs/[A-Za-z0-9_.-]+\.md|README\.md|BENCHMARKS\.md)((?:, "[^"]+")*)`)
	heading = regexp.MustCompile(`"([^"]+)"`)
	// mdLink is a relative Markdown link to another Markdown file.
	mdLink = regexp.MustCompile(`\]\(([A-Za-z0-9_./-]+\.md)(#[A-Za-z0-9_-]*)?\)`)
	// outside names what must never be referenced: design and specification
	// files that live elsewhere, and paths leaving the tree. The strings are
	// split so this file does not match itself.
	outside = regexp.MustCompile(`\bspec/eureka` + `-rest` + `\.md|(^|[^/a-z])DESIGN` + `\.md|STYLE` + `\.md|\.\./shared|§` + `[0-9]|\b[Ii]ssue ` + `#?[0-9]`)
)

// scanned reports whether the file at rel is checked.
func scanned(rel string) bool {
	base := path.Base(rel)
	switch path.Ext(base) {
	case ".go", ".md", ".sh", ".yml", ".yaml":
		return true
	}
	return base == "Makefile" || base == "Dockerfile"
}

// skipDir reports directories that hold no references of ours.
func skipDir(name string) bool {
	return name == ".git" || name == "node_modules" || name == "testdata" || name == "bin"
}

// Check walks the tree under root and returns every reference that names a
// missing file or heading, or points outside the repository.
func Check(root string) ([]Problem, error) {
	headings := map[string]map[string]bool{} // file → heading texts
	headingsOf := func(rel string) (map[string]bool, bool) {
		if h, ok := headings[rel]; ok {
			return h, h != nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			headings[rel] = nil
			return nil, false
		}
		headings[rel] = Headings(b)
		return headings[rel], true
	}
	var problems []Problem
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		relOS, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(relOS)
		if !scanned(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			report := func(format string, args ...any) {
				problems = append(problems, Problem{File: rel, Line: n, Msg: fmt.Sprintf(format, args...)})
			}
			if m := outside.FindString(line); m != "" {
				report("reference outside the repository: %q", strings.TrimSpace(m))
			}
			for _, m := range fileRef.FindAllStringSubmatch(line, -1) {
				hs, ok := headingsOf(m[1])
				if !ok {
					report("no file %s", m[1])
					continue
				}
				for _, h := range heading.FindAllStringSubmatch(m[2], -1) {
					if !hs[h[1]] {
						report("%s has no heading %q", m[1], h[1])
					}
				}
			}
			if path.Ext(rel) == ".md" {
				for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
					target := path.Join(path.Dir(rel), m[1])
					if strings.HasPrefix(target, "../") {
						report("link %s leaves the repository", m[1])
						continue
					}
					if _, ok := headingsOf(target); !ok {
						report("link to missing file %s", m[1])
					}
				}
			}
		}
		return sc.Err()
	})
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].File < problems[j].File })
	return problems, err
}

// Headings returns the text of every ATX heading ("# Title") of a Markdown
// document, outside fenced code blocks.
func Headings(md []byte) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(md), "\n") {
		t := strings.TrimRight(line, " \t\r")
		if strings.HasPrefix(t, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(t, "#") {
			continue
		}
		text := strings.TrimLeft(t, "#")
		if len(text) == len(t) || (text != "" && text[0] != ' ') {
			continue
		}
		out[strings.TrimSpace(text)] = true
	}
	return out
}
