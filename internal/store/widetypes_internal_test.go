package store

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// maxMethods is the most methods a type may have (issue 39): a type with
// more does several jobs, and is split into one type per job.
const maxMethods = 20

// TestNoWideTypes fails for each named type of the module's non-test code
// whose method set (its pointer's, for a concrete type: declared,
// unexported and promoted methods alike) has more than maxMethods methods.
// It reads the types from the compiler's export data (go list -export,
// which the build cache usually holds), so that promoted methods count as
// the compiler sees them, without type-checking the module from source.
func TestNoWideTypes(t *testing.T) {
	module := strings.TrimSuffix(storeImport, "/internal/store")
	cmd := exec.Command("go", "list", "-export", "-deps",
		"-f", "{{if .Export}}{{.ImportPath}}\t{{.Export}}\t{{with .Module}}{{.Path}}{{end}}{{end}}", "./...")
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	var own []string
	lines := bufio.NewScanner(bytes.NewReader(out))
	for lines.Scan() {
		f := strings.Split(lines.Text(), "\t")
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", lines.Text())
		}
		exports[f[0]] = f[1]
		if f[2] == module {
			own = append(own, f[0])
		}
	}
	if !slices.Contains(own, storeImport) {
		t.Fatalf("go list found none of the module's packages (%d packages)", len(exports))
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	for _, path := range own {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wideTypes(pkg) {
			t.Errorf("%s.%s has %d methods, more than %d: split it into one type per job",
				path, w.name, w.methods, maxMethods)
		}
	}
}

// wideType is a type of a package with more than maxMethods methods.
type wideType struct {
	name    string
	methods int
}

// wideTypes are pkg's named types (aliases aside) with more than
// maxMethods methods, in the order of their names.
func wideTypes(pkg *types.Package) []wideType {
	var out []wideType
	for _, name := range pkg.Scope().Names() {
		tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		if n := methodCount(tn.Type()); n > maxMethods {
			out = append(out, wideType{name: name, methods: n})
		}
	}
	return out
}

// methodCount is the size of t's method set, or of *t's when t is not an
// interface (the larger of the two).
func methodCount(t types.Type) int {
	if !types.IsInterface(t) {
		t = types.NewPointer(t)
	}
	return types.NewMethodSet(t).Len()
}

// TestWideTypes shows what the rule counts: methods of either receiver,
// unexported ones, those promoted through embedded fields and embedded
// interfaces; not an alias's.
func TestWideTypes(t *testing.T) {
	var src strings.Builder
	src.WriteString("package p\n\ntype Part struct{}\n\n")
	for i := range 8 {
		fmt.Fprintf(&src, "func (Part) M%d() {}\nfunc (*Part) p%d() {}\n", i, i)
	}
	src.WriteString(`
type Whole struct {
	*Part
	named *Part
}

func (Whole) Own1() {}
func (*Whole) Own2() {}
func (Whole) Own3() {}
func (Whole) Own4() {}
func (Whole) Own5() {}

type Small struct{ named Part }

type Wide interface {
	Narrow
	W1(); W2(); W3(); W4(); W5(); W6(); W7(); W8(); W9(); W10(); W11()
}

type Narrow interface{ N1(); N2(); N3(); N4(); N5(); N6(); N7(); N8(); N9(); N10() }

type Alias = Whole
`)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src.String(), parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range wideTypes(pkg) {
		got = append(got, fmt.Sprintf("%s:%d", w.name, w.methods))
	}
	// Whole: Part's 16 promoted, its own 5; Wide: 11 and Narrow's 10.
	// Part (16), Small (0) and Narrow (10) are within the bound.
	if want := "Whole:21 Wide:21"; strings.Join(got, " ") != want {
		t.Fatalf("wide types: %q, want %q", strings.Join(got, " "), want)
	}
}
