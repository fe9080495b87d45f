package headroom_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLayout holds the Layout table of docs/development.md to the code:
// every package of the module has a row, every row is a package, no
// package imports one listed below it, and the packages under internal/
// import none of the module. Only the packages' own files count; tests
// may import from anywhere. Every .go file is read whatever its build constraints, so
// an import on another platform counts too.
func TestLayout(t *testing.T) {
	module := modulePath(t)
	rows := layoutTable(t)
	rank := map[string]int{}
	for i, p := range rows {
		if _, dup := rank[p]; dup {
			t.Errorf("the Layout table of docs/development.md lists %s twice", p)
		}
		rank[p] = i
	}

	imports := packageImports(t, module)
	pkgs := slices.Sorted(maps.Keys(imports))
	for _, p := range pkgs {
		if _, ok := rank[p]; !ok {
			t.Errorf("package %s has no row in the Layout table of docs/development.md", p)
		}
	}
	for _, p := range rows {
		if _, ok := imports[p]; !ok {
			t.Errorf("the Layout table of docs/development.md lists %s, which is not a package of the module", p)
		}
	}
	for _, p := range pkgs {
		rp, ok := rank[p]
		if !ok {
			continue
		}
		if strings.HasPrefix(p, "internal/") && len(imports[p]) > 0 {
			t.Errorf("%s imports %v: docs/development.md says internal/ holds only helpers that import nothing of the module", p, slices.Sorted(maps.Keys(imports[p])))
		}
		for _, d := range slices.Sorted(maps.Keys(imports[p])) {
			rd, ok := rank[d]
			if !ok {
				t.Errorf("%s imports %s, which has no row in the Layout table of docs/development.md", p, d)
			} else if rd >= rp {
				t.Errorf("%s (row %d) imports %s (row %d): the Layout table of docs/development.md lists it below", p, rp+1, d, rd+1)
			}
		}
	}
}

// modulePath reads the module line of go.mod.
func modulePath(t *testing.T) string {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

var layoutRow = regexp.MustCompile("^\\| `([^`]+)` \\|")

// layoutTable returns the packages of the Layout table of
// docs/development.md, top row first.
func layoutTable(t *testing.T) []string {
	f, err := os.Open("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	in, table := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = line == "## Layout"
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if table {
				break // the table ended
			}
			continue
		}
		table = true
		if m := layoutRow.FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("docs/development.md has no Layout table")
	}
	return rows
}

// packageImports maps each package of the module (by its path relative to
// the module root) to the module's packages its non-test files import. A
// directory with only test files (this one) is no package here.
func packageImports(t *testing.T, module string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || name == "node_modules" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		deps := out[pkg]
		if deps == nil {
			deps = map[string]bool{}
			out[pkg] = deps
		}
		for _, spec := range f.Imports {
			ip, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if rel, ok := strings.CutPrefix(ip, module+"/"); ok {
				deps[rel] = true
			} else if ip == module {
				deps["."] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("found no packages")
	}
	return out
}
