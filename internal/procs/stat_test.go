package procs

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// comm may hold spaces and parentheses; fields count from the last ')'.
	line := "4242 (odd) name)) S 1 1 1 0 -1 4194304 100 0 0 0 150 50 7 3 20 0 1 0 100 1000 10"
	st, err := ParseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "odd) name)" || st.PPID != 1 || st.CPU != 2.1 {
		t.Fatalf("got %+v, want comm %q, ppid 1 and 2.1 CPU s", st, "odd) name)")
	}
	if _, err := ParseStat("no parens here"); err == nil {
		t.Error("malformed line accepted")
	}
	if st, err := ReadStat(os.Getpid()); err != nil || st.PPID != os.Getppid() {
		t.Errorf("own /proc/self/stat: %+v, %v; want the parent %d", st, err, os.Getppid())
	}
}
