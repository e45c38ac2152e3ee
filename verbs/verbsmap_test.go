package verbs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVerbsMap: every Go name docs/verbs-map.md gives as a counterpart
// exists: a function, a method (Type.Method) or a field of package verbs,
// or of package ibv when written ibv.Name, so that the table does not
// drift from the API.
func TestVerbsMap(t *testing.T) {
	doc, err := os.ReadFile("../docs/verbs-map.md")
	must(t, err)
	names := map[string]map[string]bool{"verbs": {}, "ibv": {}}
	for pkg, dir := range map[string]string{"verbs": ".", "ibv": "../ibv"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		must(t, err)
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			must(t, err)
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					n := d.Name.Name
					if d.Recv != nil {
						typ := d.Recv.List[0].Type
						if s, ok := typ.(*ast.StarExpr); ok {
							typ = s.X
						}
						id, ok := typ.(*ast.Ident)
						if !ok {
							continue // a generic type's method
						}
						n = id.Name + "." + n
					}
					names[pkg][n] = true
				case *ast.GenDecl:
					for _, sp := range d.Specs {
						ts, ok := sp.(*ast.TypeSpec)
						if !ok {
							continue
						}
						st, ok := ts.Type.(*ast.StructType)
						if !ok {
							continue
						}
						for _, fl := range st.Fields.List {
							for _, id := range fl.Names {
								names[pkg][ts.Name.Name+"."+id.Name] = true
							}
							if len(fl.Names) == 0 { // embedded
								typ := fl.Type
								if s, ok := typ.(*ast.StarExpr); ok {
									typ = s.X
								}
								if id, ok := typ.(*ast.Ident); ok {
									names[pkg][ts.Name.Name+"."+id.Name] = true
								}
							}
						}
					}
				}
			}
		}
	}
	row := regexp.MustCompile("^\\| `([a-z_0-9]+)` \\| ([^|]*) \\|")
	ident := regexp.MustCompile("`((?:ibv\\.)?[A-Z][A-Za-z]*(?:\\.[A-Z][A-Za-z]*)?)(?:\\([^)]*\\))?`")
	rows := 0
	for _, l := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		rows++
		for _, g := range ident.FindAllStringSubmatch(m[2], -1) {
			pkg, n := "verbs", g[1]
			if rest, ok := strings.CutPrefix(n, "ibv."); ok {
				pkg, n = "ibv", rest
			}
			// A field chain (QueryDevice().NodeGUID) names its method.
			if !names[pkg][n] {
				t.Errorf("docs/verbs-map.md: %s: %s.%s does not exist", m[1], pkg, n)
			}
		}
	}
	if rows < 150 {
		t.Errorf("docs/verbs-map.md has %d rows, want every call of verbs.h (157)", rows)
	}
}
