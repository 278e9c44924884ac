// Package size holds the checks on how large heureka's pieces grow, so
// that each can still be read whole: no package holds more than MaxPackage
// lines of non-test Go code (TestPackageSize), and no function on the main
// paths (tree.Main) has a body longer than MaxFunc lines
// (TestFunctionLength); a longer one is cut into named steps.
//
// It imports internal/checks/tree only.
package size

import (
	"go/ast"
	"go/scanner"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/heureka-registry/heureka/internal/checks/tree"
)

const (
	// MaxPackage is the most lines of non-test Go code one package holds.
	MaxPackage = 5000
	// MaxFunc is the most lines one function body on a main path spans.
	MaxFunc = 80
)

// PackageLines counts the lines of code of a package's non-test Go files:
// the lines that hold a token, so neither blank lines nor comments count
// (a package is not made smaller by documenting it less).
func PackageLines(t *tree.Tree, p *tree.Package) (int, error) {
	n := 0
	for _, f := range p.Files {
		c, err := CodeLines(t.Fset.File(f.Pos()).Name())
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// CodeLines counts the lines of a Go file that hold a token; a token
// spanning lines (a raw string) counts each.
func CodeLines(filename string) (int, error) {
	src, err := os.ReadFile(filename)
	if err != nil {
		return 0, err
	}
	fset := token.NewFileSet()
	file := fset.AddFile(filename, -1, len(src))
	var s scanner.Scanner
	var errs scanner.ErrorList
	s.Init(file, src, func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	lines := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end
		}
		first := file.Line(pos)
		for l := first; l <= first+strings.Count(lit, "\n"); l++ {
			lines[l] = true
		}
	}
	return len(lines), errs.Err()
}

// Func is one function declaration and the length of its body.
type Func struct {
	// Pos is file:line of the declaration, relative to the tree's root.
	Pos string
	// Name is the function's name, with its receiver's type for a method
	// (Server.eureka).
	Name string
	// Lines is how many lines lie between the body's braces.
	Lines int
}

// Funcs lists the function declarations of a package that have a body,
// in file and line order.
func Funcs(t *tree.Tree, p *tree.Package) []Func {
	var out []Func
	for _, f := range p.Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			open, end := t.Fset.Position(fd.Body.Lbrace), t.Fset.Position(fd.Body.Rbrace)
			pos := t.Fset.Position(fd.Pos())
			file := strings.TrimPrefix(strings.TrimPrefix(pos.Filename, t.Root), "/")
			out = append(out, Func{Pos: file + ":" + strconv.Itoa(pos.Line), Name: funcName(fd), Lines: max(end.Line-open.Line-1, 0)})
		}
	}
	slices.SortFunc(out, func(a, b Func) int { return comparePos(a.Pos, b.Pos) })
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// comparePos orders file:line positions by file, then numerically by line.
func comparePos(a, b string) int {
	af, al, _ := strings.Cut(a, ":")
	bf, bl, _ := strings.Cut(b, ":")
	if c := strings.Compare(af, bf); c != 0 {
		return c
	}
	if c := len(al) - len(bl); c != 0 {
		return c
	}
	return strings.Compare(al, bl)
}
