// Package tree reads heureka's Go packages from source for the checks on
// the tree (packages layers and size): each package's path, its package
// comment, the heureka packages its non-test code imports, and its parsed
// non-test files. It reads every non-test file whatever its build
// constraints, so a check sees the code of every platform and build tag.
//
// It imports no heureka package.
package tree

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Module is heureka's module path.
const Module = "github.com/heureka-registry/heureka"

// Package is one Go package of the module.
type Package struct {
	// Path is the package's import path relative to the module root
	// ("httpapi/dashboard"; "." for the root itself).
	Path string
	// Doc is the text of the package comment (of every file that has one,
	// in file order).
	Doc string
	// Imports are the module-relative paths of the heureka packages the
	// non-test files import, sorted, each once.
	Imports []string
	// Files are the non-test files, parsed with comments, by file name.
	Files map[string]*ast.File
}

// Tree is the module's packages, read from source.
type Tree struct {
	Root     string
	Fset     *token.FileSet
	Packages []*Package // by Path
}

// Package returns the package at the module-relative path p, or nil.
func (t *Tree) Package(p string) *Package {
	for _, pkg := range t.Packages {
		if pkg.Path == p {
			return pkg
		}
	}
	return nil
}

// FindRoot returns the module root above the working directory: the
// nearest directory with a go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// skipDir reports the directories the go command ignores, and the ones
// that hold no Go code of the module.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || name == "node_modules" ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// Load reads every package under root.
func Load(root string) (*Tree, error) {
	t := &Tree{Root: root, Fset: token.NewFileSet()}
	byDir := map[string]*Package{}
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
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(t.Fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		pkg := byDir[rel]
		if pkg == nil {
			pkg = &Package{Path: rel, Files: map[string]*ast.File{}}
			byDir[rel] = pkg
			t.Packages = append(t.Packages, pkg)
		}
		pkg.Files[name] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, pkg := range t.Packages {
		names := make([]string, 0, len(pkg.Files))
		for name := range pkg.Files {
			names = append(names, name)
		}
		slices.Sort(names)
		var doc []string
		for _, name := range names {
			f := pkg.Files[name]
			if f.Doc != nil {
				doc = append(doc, f.Doc.Text())
			}
			for _, imp := range f.Imports {
				ip, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					return nil, err
				}
				if rel, ok := Relative(ip); ok && !slices.Contains(pkg.Imports, rel) {
					pkg.Imports = append(pkg.Imports, rel)
				}
			}
		}
		pkg.Doc = strings.Join(doc, "\n")
		slices.Sort(pkg.Imports)
	}
	slices.SortFunc(t.Packages, func(a, b *Package) int { return strings.Compare(a.Path, b.Path) })
	return t, nil
}

// Main are the packages on the main paths of a request and of a write,
// from the command down to the data directory, and the codec; a package
// below one of them (httpapi/dashboard) is on a main path too. The checks
// hold them to more than the rest: their comments must list their imports
// (package layers), and their functions stay short (package size).
var Main = []string{"cmd/heureka", "cluster", "fsm", "store", "cache", "httpapi", "eureka"}

// OnMainPath reports whether the package path p is one of Main or below
// one.
func OnMainPath(p string) bool {
	return slices.ContainsFunc(Main, func(m string) bool { return Under(p, m) })
}

// LoadModule reads every package of the module the working directory is
// in, and refuses a tree of fewer than ten packages (a wrong root).
func LoadModule() (*Tree, error) {
	root, err := FindRoot()
	if err != nil {
		return nil, err
	}
	t, err := Load(root)
	if err != nil {
		return nil, err
	}
	if len(t.Packages) < 10 {
		return nil, fmt.Errorf("read only %d packages under %s", len(t.Packages), root)
	}
	return t, nil
}

// Fataler is the part of testing.TB that ModuleOrFail uses.
type Fataler interface {
	Helper()
	Fatal(args ...any)
}

// ModuleOrFail is LoadModule for a test: it fails the test on an error.
func ModuleOrFail(tb Fataler) *Tree {
	tb.Helper()
	t, err := LoadModule()
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// Relative returns the module-relative path of a heureka import path, and
// whether it is one.
func Relative(importPath string) (string, bool) {
	if importPath == Module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(importPath, Module+"/")
	return path.Clean(rel), ok
}

// Under reports whether the package path p is dir or below it.
func Under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
