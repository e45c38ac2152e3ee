// Command testsum reads `go test -json` on standard input and writes what a
// person running the whole suite wants to see: a line per package as it
// finishes (as `go test` prints it), the output of every failing test and
// build, a line every half minute naming the packages still running (the
// race-enabled suite compiles and runs for minutes with nothing else to
// say), and at the end the tests that skipped, grouped by their reason
// (a missing tshark, nft or root), with the totals. It exits 1 if a
// package or a build failed, 0 otherwise.
//
// scripts/test runs it: go test -race -count=1 -json ./... | go run ./test/testsum
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// summary accumulates the events of one run.
type summary struct {
	out      io.Writer
	module   string
	running  map[string]time.Time // packages started and not finished
	output   map[string][]string  // output by package and test ("pkg\x00test")
	build    map[string][]string  // build output by import path
	skipped  map[string][]string  // skip reason → "pkg Test"
	counts   map[string]int       // packages by outcome: ok, FAIL, no tests
	failed   []string             // "pkg Test" of failed tests
	buildBad bool
}

func newSummary(out io.Writer) *summary {
	return &summary{
		out:     out,
		module:  "github.com/softnic/softnic/",
		running: map[string]time.Time{},
		output:  map[string][]string{},
		build:   map[string][]string{},
		skipped: map[string][]string{},
		counts:  map[string]int{},
	}
}

func (s *summary) short(pkg string) string { return strings.TrimPrefix(pkg, s.module) }

// add takes one event.
func (s *summary) add(e *event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "start":
		s.running[e.Package] = e.Time
	case "build-output":
		s.build[e.ImportPath] = append(s.build[e.ImportPath], e.Output)
	case "build-fail":
		s.buildBad = true
		fmt.Fprintf(s.out, "BUILD FAILED %s\n%s", s.short(e.ImportPath), strings.Join(s.build[e.ImportPath], ""))
	case "output":
		s.output[key] = append(s.output[key], e.Output)
	case "pass", "fail", "skip":
		if e.Test != "" {
			s.endTest(e, key)
			return
		}
		delete(s.running, e.Package)
		s.endPackage(e, key)
	}
}

func (s *summary) endTest(e *event, key string) {
	lines := s.output[key]
	delete(s.output, key)
	name := s.short(e.Package) + " " + e.Test
	switch e.Action {
	case "fail":
		s.failed = append(s.failed, name)
		fmt.Fprintf(s.out, "--- FAIL: %s\n%s", name, strings.Join(lines, ""))
	case "skip":
		s.skipped[skipReason(lines)] = append(s.skipped[skipReason(lines)], name)
	}
}

// skipReason is the message a test passed to t.Skip: the last line it
// logged ("    file.go:NN: message", printed before its "--- SKIP"),
// without the "file.go:NN: " prefix.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		before, after, ok := strings.Cut(l, ": ")
		if ok && strings.Contains(before, ".go:") && !strings.HasPrefix(l, "---") {
			return after
		}
	}
	return "(no reason given)"
}

func (s *summary) endPackage(e *event, key string) {
	lines := s.output[key]
	delete(s.output, key)
	// go test's own last line for the package ("ok  \tpkg\t1.2s",
	// "FAIL\tpkg ...", "?   \tpkg\t[no test files]").
	last := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "ok") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "?") {
			last = l
		}
	}
	switch {
	case e.Action == "fail":
		s.counts["FAIL"]++
		// The tests that never ended (a panic, a timeout's goroutine
		// dump, a SIGQUIT) keep their output under their names.
		var open []string
		for k := range s.output {
			if strings.HasPrefix(k, e.Package+"\x00") {
				open = append(open, k)
			}
		}
		sort.Strings(open)
		for _, k := range open {
			fmt.Fprintf(s.out, "--- unfinished: %s %s\n%s", s.short(e.Package), strings.TrimPrefix(k, e.Package+"\x00"), strings.Join(s.output[k], ""))
			delete(s.output, k)
		}
		// Output outside any test: a panic, a race report, a TestMain.
		fmt.Fprint(s.out, strings.Join(lines, ""))
		if last == "" {
			fmt.Fprintf(s.out, "FAIL\t%s\n", s.short(e.Package))
		}
		return
	case strings.HasPrefix(last, "?"):
		s.counts["no tests"]++
		return
	default:
		s.counts["ok"]++
	}
	if last == "" {
		last = fmt.Sprintf("ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
	}
	fmt.Fprint(s.out, strings.Replace(last, s.module, "", 1))
}

// tick names the packages running for more than a while.
func (s *summary) tick(now time.Time) {
	var long []string
	for p, t := range s.running {
		if d := now.Sub(t); d >= 20*time.Second {
			long = append(long, fmt.Sprintf("%s (%s)", s.short(p), d.Round(time.Second)))
		}
	}
	if len(long) > 0 {
		sort.Strings(long)
		fmt.Fprintf(s.out, "... still running: %s\n", strings.Join(long, ", "))
	}
}

// finish writes the skips and the totals and returns the exit status.
func (s *summary) finish() int {
	if len(s.skipped) > 0 {
		fmt.Fprintln(s.out, "\nSkipped tests, by reason (.ci/run installs what they need):")
		reasons := make([]string, 0, len(s.skipped))
		for r := range s.skipped {
			reasons = append(reasons, r)
		}
		sort.Slice(reasons, func(i, j int) bool { return len(s.skipped[reasons[i]]) > len(s.skipped[reasons[j]]) })
		for _, r := range reasons {
			tests := s.skipped[r]
			slices.Sort(tests)
			show := tests
			if len(show) > 3 {
				show = append(show[:3:3], fmt.Sprintf("and %d more", len(tests)-3))
			}
			fmt.Fprintf(s.out, "  %3d  %s\n       %s\n", len(tests), r, strings.Join(show, ", "))
		}
	}
	n := 0
	for _, r := range s.skipped {
		n += len(r)
	}
	fmt.Fprintf(s.out, "\n%d packages ok, %d failed, %d without tests; %d tests failed, %d skipped\n",
		s.counts["ok"], s.counts["FAIL"], s.counts["no tests"], len(s.failed), n)
	for _, f := range s.failed {
		fmt.Fprintf(s.out, "  FAIL %s\n", f)
	}
	if s.counts["FAIL"] > 0 || len(s.failed) > 0 || s.buildBad {
		return 1
	}
	return 0
}

func main() {
	s := newSummary(os.Stdout)
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
		close(lines)
	}()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case now := <-tick.C:
			s.tick(now)
		case l, ok := <-lines:
			if !ok {
				os.Exit(s.finish())
			}
			var e event
			if json.Unmarshal(l, &e) != nil {
				// Not an event: go test's own messages (a build error
				// before any package ran) pass through.
				fmt.Fprintln(s.out, string(l))
				continue
			}
			s.add(&e)
		}
	}
}
