package headroom_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Limits of the code's shape, which it has grown past before: a function
// longer than a screenful hides what it does, and a file past about 500
// lines is several files.
const (
	maxFuncLines = 100
	maxFileLines = 600
)

// TestCodeShape holds every non-test function to maxFuncLines lines (from
// its func keyword to its closing brace) and every non-test file to
// maxFileLines, testdata and generated files aside.
func TestCodeShape(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s: %d lines, over %d: split it", p, n, maxFileLines)
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			a, b := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := b.Line - a.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines, over %d", p, a.Line, fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFuzzTargetsListed: every fuzz target of the module is named in
// docs/development.md, so its list of them does not drift.
func TestFuzzTargetsListed(t *testing.T) {
	doc, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				n++
				if !strings.Contains(string(doc), "`"+fn.Name.Name+"`") {
					t.Errorf("%s: %s is not listed in docs/development.md", p, fn.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no fuzz target found")
	}
}
