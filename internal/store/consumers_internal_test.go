package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// storeImport is this package's import path.
const storeImport = "github.com/webhookd/webhookd/internal/store"

// moduleRoot is the module's directory, relative to this package's.
const moduleRoot = "../.."

// storeFreeExempt are the directories, relative to the module's root and
// each with those below it, whose code may hold a *Store: the one place the
// Store is opened and assembled (cmd), the store itself with its test
// helpers, and the test fixtures, which are test code
// (TestOnlyTestsImportFixtures).
var storeFreeExempt = []string{"cmd", "internal/store", "internal/testfixtures"}

// wiringInputs are the only struct fields and parameters outside
// storeFreeExempt that may be a *Store, keyed "dir: Type.Field" (or
// "dir: func(param)"), each with why: they are the wiring's input, which
// hands every part it builds the narrow interface that part declares.
var wiringInputs = map[string]string{
	"dispatcher: Config.Store": "dispatcher.New and the worker role build the publisher, redeliverer, " +
		"poller, checker, dropper, deliver.Worker and the maintenance jobs from it, each given the parts it uses",
	"admin: Config.Store": "admin.New hands the handler groups and middleware, subscriptions, sessions " +
		"and merchants the parts they use, each taking its own interface",
	"admin: Config.ReadStore": "the replica, whose parts admin.New hands the read routes as their narrow reads interfaces",
}

// TestNoStoreHolders fails for each struct field or function parameter of
// type *store.Store (at any depth of its type: a slice of them, a function
// taking one) declared by non-test code outside storeFreeExempt, other than
// wiringInputs: a part that needs the database declares the small interface
// of the methods it calls, as river's drivers do, so that what it touches
// is read in its own file and a fake of it is a few methods.
func TestNoStoreHolders(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "module "+strings.TrimSuffix(storeImport, "/internal/store")+"\n") {
		t.Fatalf("%s is not the module's root; update moduleRoot", moduleRoot)
	}
	fset := token.NewFileSet()
	allowed := map[string]bool{}
	files := 0
	err = filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(moduleRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || slices.Contains(storeFreeExempt, rel)) {
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
		for _, h := range storeHolders(f) {
			key := filepath.ToSlash(filepath.Dir(rel)) + ": " + h.name
			if _, ok := wiringInputs[key]; ok {
				allowed[key] = true
				continue
			}
			t.Errorf("%s: %s is a *store.Store: declare, beside it, the interface of the methods it calls",
				fset.Position(h.pos), h.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no Go file found under %s", moduleRoot)
	}
	for key := range wiringInputs {
		if !allowed[key] {
			// The list must shrink with the code, not outlive it.
			t.Errorf("wiringInputs: %s holds no *store.Store any more; remove it", key)
		}
	}
}

// TestStoreHolders shows what the rule counts.
func TestStoreHolders(t *testing.T) {
	const src = `package p

import (
	"context"

	db "github.com/webhookd/webhookd/internal/store"
)

type Config struct {
	Store   *db.Store
	Others  []*db.Store
	Value   db.Store
	Narrow  interface{ GetEvent(ctx context.Context) error }
	Wide    interface{ Take(st *db.Store) }
	OnStore func(*db.Store)
	*db.Store
}

type lister interface {
	List(st *db.Store) error
}

func open() (*db.Store, error) { return nil, nil }

func use(ctx context.Context, st *db.Store) {
	var local *db.Store
	_ = local
	_ = struct{ held *db.Store }{}
	go func(st2 *db.Store) {}(st)
}

func (c *Config) handOn(m map[string]*db.Store) {}
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range storeHolders(f) {
		got = append(got, h.name)
	}
	// A Store value (not a pointer, so never passed), results, locals
	// and narrow interfaces are not what the rule is about; a function
	// type or an interface that takes a Store counts as its parameter.
	want := "Config.Store Config.Others Config.(embedded) interface.Take(st) func type(param) lister.List(st) " +
		"use(st) struct.held func literal(st2) handOn(m)"
	if strings.Join(got, " ") != want {
		t.Fatalf("holders: %q\nwant      %q", strings.Join(got, " "), want)
	}
}

// storeHolder is a field or parameter of f that is a *store.Store.
type storeHolder struct {
	pos  token.Pos
	name string
}

// storeHolders are f's struct fields and function parameters whose type
// mentions *store.Store, in the order f is walked; none when f does not
// import the store.
func storeHolders(f *ast.File) []storeHolder {
	pkg := ""
	for _, imp := range f.Imports {
		if path, err := strconv.Unquote(imp.Path.Value); err == nil && path == storeImport {
			pkg = "store"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" || pkg == "_" {
		return nil
	}
	mentions := func(typ ast.Expr) bool {
		found := false
		ast.Inspect(typ, func(n ast.Node) bool {
			star, ok := n.(*ast.StarExpr)
			if !ok {
				// A function's or a method's parameters are checked
				// as parameters, where they are declared.
				_, fn := n.(*ast.FuncType)
				_, iface := n.(*ast.InterfaceType)
				return !found && !fn && !iface
			}
			switch x := star.X.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == pkg && x.Sel.Name == "Store" {
					found = true
				}
			case *ast.Ident:
				if pkg == "." && x.Name == "Store" {
					found = true
				}
			}
			return !found
		})
		return found
	}
	var out []storeHolder
	// params adds the parameters of ft, named owner(param).
	params := func(owner string, ft *ast.FuncType) {
		for _, p := range ft.Params.List {
			if !mentions(p.Type) {
				continue
			}
			if len(p.Names) == 0 {
				out = append(out, storeHolder{pos: p.Pos(), name: owner + "(param)"})
			}
			for _, n := range p.Names {
				out = append(out, storeHolder{pos: n.Pos(), name: owner + "(" + n.Name + ")"})
			}
		}
	}
	// fields adds the fields of st, named owner.Field.
	fields := func(owner string, st *ast.StructType) {
		for _, fl := range st.Fields.List {
			if !mentions(fl.Type) {
				continue
			}
			if len(fl.Names) == 0 {
				out = append(out, storeHolder{pos: fl.Pos(), name: owner + ".(embedded)"})
			}
			for _, n := range fl.Names {
				out = append(out, storeHolder{pos: n.Pos(), name: owner + "." + n.Name})
			}
		}
	}
	// named are the struct, interface and function types checked under
	// a name (their type's, their function's, their method's) rather than
	// again without one.
	named := map[ast.Node]bool{}
	// methods adds the parameters of the methods of it, named
	// owner.Method(param).
	methods := func(owner string, it *ast.InterfaceType) {
		for _, m := range it.Methods.List {
			if ft, ok := m.Type.(*ast.FuncType); ok && len(m.Names) == 1 {
				params(owner+"."+m.Names[0].Name, ft)
				named[ft] = true
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.TypeSpec:
			switch t := x.Type.(type) {
			case *ast.StructType:
				fields(x.Name.Name, t)
				named[t] = true
			case *ast.InterfaceType:
				methods(x.Name.Name, t)
				named[t] = true
			}
		case *ast.StructType:
			if !named[x] {
				fields("struct", x)
			}
		case *ast.InterfaceType:
			if !named[x] {
				methods("interface", x)
			}
		case *ast.FuncDecl:
			params(x.Name.Name, x.Type)
			named[x.Type] = true
		case *ast.FuncLit:
			params("func literal", x.Type)
			named[x.Type] = true
		case *ast.FuncType:
			if !named[x] {
				// A function type: a field's, a parameter's, a type's.
				params("func type", x)
			}
		}
		return true
	})
	return out
}
