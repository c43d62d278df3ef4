package testfixtures_test

import (
	"os/exec"
	"strings"
	"testing"
)

// module is this module's path; fixtures, the fixtures' import path,
// each below it.
const (
	module   = "github.com/webhookd/webhookd"
	fixtures = module + "/internal/testfixtures"
)

// TestOnlyTestsImportFixtures fails for each package outside
// internal/testfixtures whose non-test code imports a fixture: a fixture
// in the engine's build would ship servers, proxies and test keys with
// it. Tests import them, and fixtures one another. The go tool tells the
// imports of a package's build apart from its tests'.
func TestOnlyTestsImportFixtures(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} build{{range .Imports}} {{.}}{{end}} tests{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`,
		module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	importers := 0 // packages whose tests import a fixture: the listing saw them
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, inTests := fields[0], false
		for _, imp := range fields[1:] {
			switch {
			case imp == "build":
			case imp == "tests":
				inTests = true
			case imp != fixtures && !strings.HasPrefix(imp, fixtures+"/"):
			case inTests:
				importers++
			case pkg != fixtures && !strings.HasPrefix(pkg, fixtures+"/"):
				t.Errorf("%s imports %s outside its tests: only tests may", pkg, imp)
			}
		}
	}
	if importers == 0 {
		t.Fatal("no package's tests import a fixture: the listing is broken")
	}
}
