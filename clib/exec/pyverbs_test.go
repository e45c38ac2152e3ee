package exec

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The pyverbs suite's location in Debian's python3-pyverbs, and the
// Python it is built for (not another python3 earlier in PATH).
const (
	pyverbsTests  = "/usr/share/doc/rdma-core/tests"
	debianPython3 = "/usr/bin/python3"
)

// rdma-core's own test suite, unmodified, over softnic: every test's
// result is the one clib/pyverbs/verdicts.md records (a result the table
// lists as "FAIL/PASS" depends on timing and may be either). A test that
// changes result fails this one until the table says so, with its reason.
func TestPyverbs(t *testing.T) {
	needLibs(t)
	if _, err := os.Stat(filepath.Join(pyverbsTests, "run_tests.py")); err != nil {
		t.Skipf("rdma-core's tests are not installed (apt-get install python3-pyverbs): %v", err)
	}
	if _, err := os.Stat(debianPython3); err != nil {
		t.Skipf("%s: %v", debianPython3, err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := readVerdicts(t, filepath.Join(root, "clib", "pyverbs", "verdicts.md"))
	dir := filepath.Join(t.TempDir(), "tests")
	copySuite(t, pyverbsTests, dir)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := command(ctx, Options{Addr: testAddr(0)}, debianPython3, filepath.Join(root, "clib", "pyverbs", "run.py"), dir)
	cmd.Dir = t.TempDir()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run.py: %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) < 2 {
			t.Errorf("run.py printed %q", line)
			continue
		}
		got[f[0]] = f[1]
		counts[f[1]]++
		w, ok := want[f[0]]
		why := ""
		if len(f) == 3 {
			why = f[2]
		}
		switch {
		case !ok:
			t.Errorf("%s: %s (%s), and not in verdicts.md", f[0], f[1], why)
		case !slices.Contains(strings.Split(w, "/"), f[1]):
			t.Errorf("%s: %s (%s), verdicts.md says %s", f[0], f[1], why, w)
		}
	}
	for id := range want {
		if _, ok := got[id]; !ok {
			t.Errorf("%s: in verdicts.md, not run", id)
		}
	}
	t.Logf("pyverbs over softnic: %d tests: %d PASS, %d FAIL, %d ERROR, %d SKIP",
		len(got), counts["PASS"], counts["FAIL"], counts["ERROR"], counts["SKIP"])
}

// readVerdicts returns the softnic column of verdicts.md by test id; every
// result there but PASS must say why.
func readVerdicts(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "tests.") {
			continue
		}
		id, result := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[3])
		if result != "PASS" && strings.TrimSpace(cells[4]) == "" {
			t.Errorf("%s: %s in verdicts.md without a reason", id, result)
		}
		v[id] = result
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(v) == 0 {
		t.Fatalf("%s has no verdicts", path)
	}
	return v
}

// copySuite copies the installed suite into dir, uncompressing the files
// Debian compressed (*.py.gz).
func copySuite(t *testing.T, from, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = in
		name := e.Name()
		if strings.HasSuffix(name, ".gz") {
			gz, err := gzip.NewReader(in)
			if err != nil {
				t.Fatal(err)
			}
			r, name = gz, strings.TrimSuffix(name, ".gz")
		}
		b, err := io.ReadAll(r)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
