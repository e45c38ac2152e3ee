package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// run feeds the events of a small go test -json run to a summary.
func run(t *testing.T, evs []event) (string, int) {
	t.Helper()
	var out bytes.Buffer
	s := newSummary(&out)
	for i := range evs {
		b, err := json.Marshal(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		s.add(&e)
	}
	rc := s.finish()
	return out.String(), rc
}

const pkg = "github.com/softnic/softnic/capture"

func TestSummary(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ok := []event{
		{Time: t0, Action: "start", Package: pkg},
		{Action: "run", Package: pkg, Test: "TestTshark"},
		{Action: "output", Package: pkg, Test: "TestTshark", Output: "=== RUN   TestTshark\n"},
		{Action: "output", Package: pkg, Test: "TestTshark", Output: "    tshark_test.go:29: tshark is not installed (apt-get install tshark): exec: not found\n"},
		{Action: "output", Package: pkg, Test: "TestTshark", Output: "--- SKIP: TestTshark (0.00s)\n"},
		{Action: "skip", Package: pkg, Test: "TestTshark"},
		{Action: "output", Package: pkg, Output: "ok  \tgithub.com/softnic/softnic/capture\t0.5s\n"},
		{Action: "pass", Package: pkg, Elapsed: 0.5},
	}
	out, rc := run(t, ok)
	if rc != 0 {
		t.Errorf("exit status %d for a passing run, want 0:\n%s", rc, out)
	}
	for _, want := range []string{"ok  \tcapture\t0.5s\n", "capture TestTshark", "1 packages ok, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The reason is printed with its "file.go:NN: " prefix removed.
	if !strings.Contains(out, "  1  tshark is not installed (apt-get install tshark): exec: not found\n") {
		t.Errorf("skip reason missing or not grouped:\n%s", out)
	}

	fail := []event{
		{Time: t0, Action: "start", Package: pkg},
		{Action: "output", Package: pkg, Test: "TestX", Output: "    x_test.go:3: got 1, want 2\n"},
		{Action: "output", Package: pkg, Test: "TestX", Output: "--- FAIL: TestX (0.00s)\n"},
		{Action: "fail", Package: pkg, Test: "TestX"},
		{Action: "output", Package: pkg, Output: "FAIL\tgithub.com/softnic/softnic/capture\t0.1s\n"},
		{Action: "fail", Package: pkg, Elapsed: 0.1},
	}
	out, rc = run(t, fail)
	if rc != 1 {
		t.Errorf("exit status %d for a failing run, want 1:\n%s", rc, out)
	}
	for _, want := range []string{"got 1, want 2", "0 packages ok, 1 failed", "FAIL capture TestX"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A test that never ended (a timeout's dump) keeps its output.
	hung := []event{
		{Time: t0, Action: "start", Package: pkg},
		{Action: "output", Package: pkg, Test: "TestSpin", Output: "goroutine 7 [running]:\n"},
		{Action: "output", Package: pkg, Output: "FAIL\tgithub.com/softnic/softnic/capture\t600.0s\n"},
		{Action: "fail", Package: pkg, Elapsed: 600},
	}
	if out, rc = run(t, hung); rc != 1 || !strings.Contains(out, "--- unfinished: capture TestSpin\ngoroutine 7 [running]:") {
		t.Errorf("unfinished test: exit status %d, output:\n%s", rc, out)
	}

	build := []event{
		{Action: "build-output", ImportPath: pkg + " [" + pkg + ".test]", Output: "capture/x.go:1: syntax error\n"},
		{Action: "build-fail", ImportPath: pkg + " [" + pkg + ".test]"},
	}
	if out, rc = run(t, build); rc != 1 || !strings.Contains(out, "syntax error") {
		t.Errorf("build failure: exit status %d, output:\n%s", rc, out)
	}
}

func TestTick(t *testing.T) {
	var out bytes.Buffer
	s := newSummary(&out)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s.add(&event{Time: t0, Action: "start", Package: "github.com/softnic/softnic/verbs"})
	s.add(&event{Time: t0.Add(25 * time.Second), Action: "start", Package: pkg})
	s.tick(t0.Add(30 * time.Second))
	if got, want := out.String(), "... still running: verbs (30s)\n"; got != want {
		t.Errorf("tick wrote %q, want %q", got, want)
	}
}
