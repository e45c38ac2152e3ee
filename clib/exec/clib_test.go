package exec

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests of this package run unmodified programs over softnic's
// libibverbs: Debian's (rdma-core's examples, perftest, pyverbs' suite)
// and small C programs built here. The first test that needs the
// libraries builds them with scripts/clib into a temporary directory;
// without a C compiler or the rdma-core headers the tests that need them
// skip, saying what to install (.ci/run installs them).

var (
	buildOnce sync.Once
	libDir    string   // the libraries, once built
	buildErr  string   // why they are not
	cleanup   []string // temporary directories TestMain removes
)

func TestMain(m *testing.M) {
	flag.Parse()
	pickAddrBase()
	code := m.Run()
	for _, d := range cleanup {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// buildLibs runs scripts/clib into a temporary directory when its tools
// are there.
func buildLibs() (string, string) {
	if testing.Short() {
		return "", "-short: the C library is not built"
	}
	var missing []string
	if _, err := osexec.LookPath("gcc"); err != nil {
		missing = append(missing, "gcc")
	}
	if _, err := osexec.LookPath("objdump"); err != nil {
		missing = append(missing, "binutils")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		missing = append(missing, "libibverbs-dev")
	}
	if len(missing) > 0 {
		return "", fmt.Sprintf("the C library needs %s (apt-get install %s, or run scripts/clib as root)",
			strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err.Error()
	}
	dir, err := os.MkdirTemp("", "softnic-clib-")
	if err != nil {
		return "", err.Error()
	}
	cleanup = append(cleanup, dir)
	out, err := osexec.Command(filepath.Join(root, "scripts", "clib"), "-o", dir).CombinedOutput()
	if err != nil {
		return "", fmt.Sprintf("scripts/clib failed: %v\n%s", err, out)
	}
	return dir, ""
}

// needLibs builds the libraries once, and skips t when they cannot be
// built here or fails it when their build failed.
func needLibs(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() { libDir, buildErr = buildLibs() })
	if libDir != "" {
		return
	}
	if strings.HasPrefix(buildErr, "scripts/clib failed") {
		t.Fatal(buildErr)
	}
	t.Skip(buildErr)
}

// needTools skips t when a Debian program it runs is not installed.
func needTools(t *testing.T, pkg string, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := osexec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (apt-get install %s)", p, pkg)
		}
	}
}

// Loopback addresses for the tests' NICs: 127.0.0.5 and up, clear of the
// addresses other suites' tools take (127.0.0.1-4), or three further up
// whose UDP port is free (pickAddrBase).
func testAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, addrBase + byte(i)}) }

// addrBase is the last byte of testAddr(0).
var addrBase byte = 5

// pickAddrBase moves the tests' addresses past any of 127.0.0.5 and up
// whose UDP port 4791 another program holds (another run of these tests
// on a shared machine): to the first three in a row that are free.
func pickAddrBase() {
	for b := 5; b+2 < 255; b += 3 {
		free := true
		for i := range 3 {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(b+i)), Port: 4791})
			if err != nil {
				free = false
				break
			}
			c.Close()
		}
		if free {
			addrBase = byte(b)
			return
		}
	}
}

// command returns a command running argv over softnic with opts.
func command(ctx context.Context, opts Options, argv ...string) *osexec.Cmd {
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = Environ(os.Environ(), libDir, opts)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs argv over softnic and returns its output, failing t when it
// fails.
func run(t *testing.T, opts Options, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := command(ctx, opts, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}
