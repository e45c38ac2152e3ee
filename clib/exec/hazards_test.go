package exec

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The hazards of a Go runtime inside a C process, each with a small C
// program of testdata/ built here against the system's libibverbs headers
// and run over softnic's library: fork, signals, a late dlopen, threads
// posting to one QP; and the cost of a call into the engine.

var (
	cbinOnce sync.Once
	cbinDir  string
	cbinErr  string
)

// cprog returns the path of testdata program name, building them all once.
func cprog(t *testing.T, name string) string {
	t.Helper()
	needLibs(t)
	cbinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "softnic-cbin-")
		if err != nil {
			cbinErr = err.Error()
			return
		}
		cleanup = append(cleanup, dir)
		cflags := []string{"-O2", "-g", "-Wall", "-Werror", "-std=gnu11"}
		for _, b := range [][]string{
			{"fork", "fork.c", "-libverbs"},
			{"signals", "signals.c", "-libverbs"},
			{"threads", "threads.c", "-libverbs", "-lpthread"},
			{"calls", "calls.c", "-libverbs", "-lpthread"},
			{"recvs", "recvs.c", "-libverbs", "-lpthread"},
			{"bench", "bench.c", "-libverbs", "-ldl"},
			{"libloopplugin.so", "plugin.c", "-shared", "-fPIC", "-libverbs"},
			{"dlopen", "dlopen.c", "-ldl", "-lpthread"},
			{"rsock", "rsock.c", "-lrdmacm", "-lpthread"},
			{"tcpecho", "tcpecho.c"},
		} {
			args := append(append(append([]string{}, cflags...), "-o", filepath.Join(dir, b[0]),
				filepath.Join("testdata", b[1])), b[2:]...)
			if out, err := osexec.Command("gcc", args...).CombinedOutput(); err != nil {
				cbinErr = "gcc " + strings.Join(args, " ") + ": " + err.Error() + "\n" + string(out)
				return
			}
		}
		cbinDir = dir
	})
	if cbinErr != "" {
		t.Fatal(cbinErr)
	}
	return filepath.Join(cbinDir, name)
}

// runC runs a testdata program over softnic and returns its output,
// failing t when it fails.
func runC(t *testing.T, opts Options, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := command(ctx, opts, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// A process that forks before it opens a device is unaffected (the
// engine is loaded by the first ibv_open_device, so listing devices
// starts no Go runtime): parent and child each open one and move data.
// A child forked after the engine started gets ENODEV from every call
// that needs it (open, alloc, post; poll returns an error), never hangs,
// and its parent moves data on.
func TestForkHazard(t *testing.T) {
	prog := cprog(t, "fork")
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog, "before")))
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog, "after")))
}

// A SIGALRM handler installed with plain signal() once the device is
// open, as perftest installs its own, and needing 64 KiB of stack, runs
// every 200 µs while the program posts and polls, mostly inside the
// engine, and breaks nothing: the library gives it SA_ONSTACK (without
// it a handler can run on a goroutine stack and break the Go runtime:
// "fatal: systemstack called from unexpected goroutine"), and the thread
// that opens the device an alternate stack larger than Go's 32 KiB. And
// every thread of the engine blocks the program's asynchronous signals,
// so a signal sent to the process reaches one of the program's threads.
func TestSignalHazard(t *testing.T) {
	prog := cprog(t, "signals")
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog, "handler")))
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog, "mask")))
}

// libibverbs loaded by dlopen in a program that runs threads already and
// never linked it, then by a plugin that links it and moves data: the
// engine, loaded by a nested dlopen, finds the static TLS it needs.
func TestLateDlopenHazard(t *testing.T) {
	prog := cprog(t, "dlopen")
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog, filepath.Join(filepath.Dir(prog), "libloopplugin.so"))))
}

// Four threads posting RDMA WRITEs to one QP while another polls: every
// work request completes once and every value lands.
func TestThreadsPostingToOneQP(t *testing.T) {
	prog := cprog(t, "threads")
	t.Log(strings.TrimSpace(runC(t, Options{Addr: testAddr(0)}, prog)))
}

// The cost of the calls into the engine, in nanoseconds a call (see
// testdata/bench.c), beside the same calls made in Go over verbs in this
// process; logged, not checked: the figures are the machine's, and its
// load's (run it alone: go test -run TestCallCost -v ./clib/exec).
func TestCallCost(t *testing.T) {
	prog := cprog(t, "bench")
	const n = 100000
	c := runC(t, Options{Addr: testAddr(0)}, prog, strconv.Itoa(n))
	for _, name := range []string{"go_call", "poll_empty", "post_send", "write_rtt"} {
		if !strings.Contains(c, name+" ") {
			t.Errorf("bench printed no %s:\n%s", name, c)
		}
	}
	g := goCallCost(t, n)
	t.Logf("ns per call, C through the library:\n%sns per call, Go over verbs:\n%s", c, g)
}
