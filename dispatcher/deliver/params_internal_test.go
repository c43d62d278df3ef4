package deliver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxParams is the most parameters a function on the delivery path takes,
// ctx counted, a method's receiver not: past it, what a call carries is
// one value (a Request, like internal/destination's Message, or a
// package's own struct), so that a call cannot swap two strings unseen and
// a new field costs no change to every caller.
const maxParams = 5

// deliveryPath are the packages the rule holds in, relative to this one,
// each with the packages below it (internal/destination's kinds).
var deliveryPath = []string{".", "../publish", "../poll", "../../internal/destination"}

// TestDeliveryPathParams fails for each function, function literal or
// interface method of the delivery path's code (tests aside) that takes
// more than maxParams parameters.
func TestDeliveryPathParams(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range deliveryPath {
		files := 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, o := range overParams(f) {
				t.Errorf("%s: %s takes %d parameters, more than %d: pass one request value instead",
					fset.Position(o.pos), o.name, o.count, maxParams)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files == 0 {
			// A package moved away must not leave the rule checking nothing.
			t.Errorf("%s: no Go file found; update deliveryPath", root)
		}
	}
}

// TestOverParams shows what the rule counts.
func TestOverParams(t *testing.T) {
	const src = `package p

import "context"

type T struct{}

func five(ctx context.Context, a, b string, c []byte, d int) {}
func six(ctx context.Context, a, b string, c []byte, d, e int) {}
func (t *T) methodFive(ctx context.Context, a, b, c, d string) {}
func (t *T) methodSix(ctx context.Context, a, b, c, d, e string) {}
func unnamed(context.Context, string, string, []byte, int, int) {}
func variadic(a, b, c, d, e int, more ...int) {}

type I interface {
	Five(a, b, c, d, e int)
	Six(a, b, c, d, e, f int)
}

var lit = func(a, b, c, d, e, f int) {}
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range overParams(f) {
		got = append(got, o.name)
	}
	want := "six methodSix unnamed variadic Six func literal"
	if strings.Join(got, " ") != want {
		t.Fatalf("over the bound: %q, want %q", strings.Join(got, " "), want)
	}
}

// overParam is a function that takes too many parameters.
type overParam struct {
	pos   token.Pos
	name  string
	count int
}

// overParams are f's functions, function literals and interface methods
// that take more than maxParams parameters, in the file's order.
func overParams(f *ast.File) []overParam {
	var out []overParam
	check := func(pos token.Pos, name string, ft *ast.FuncType) {
		if n := ft.Params.NumFields(); n > maxParams {
			out = append(out, overParam{pos: pos, name: name, count: n})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncDecl:
			check(x.Pos(), x.Name.Name, x.Type)
		case *ast.FuncLit:
			check(x.Pos(), "func literal", x.Type)
		case *ast.InterfaceType:
			for _, m := range x.Methods.List {
				if ft, ok := m.Type.(*ast.FuncType); ok && len(m.Names) == 1 {
					check(m.Pos(), m.Names[0].Name, ft)
				}
			}
		}
		return true
	})
	return out
}
