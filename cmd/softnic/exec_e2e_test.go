package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// softnic exec runs an unmodified libibverbs program over softnic's
// library, built here by scripts/clib (skipped without a C compiler and
// the rdma-core headers, or ibverbs-utils), and says how to build the
// library when it cannot find it.
func TestExec(t *testing.T) {
	if binary == "" {
		t.Skip("softnic did not build")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runProc(ctx, []string{"exec", "--lib", t.TempDir(), "--", "true"})
	if r.status != exitFail || !strings.Contains(r.errOut, "scripts/clib") {
		t.Errorf("exec without the library: status %d, %q", r.status, r.errOut)
	}
	for _, need := range []string{"gcc", "ibv_devices"} {
		if _, err := exec.LookPath(need); err != nil {
			t.Skipf("%s is not installed", need)
		}
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		t.Skip("libibverbs-dev is not installed")
	}
	lib := t.TempDir()
	if out, err := exec.CommandContext(ctx, filepath.Join("..", "..", "scripts", "clib"), "-o", lib).CombinedOutput(); err != nil {
		t.Fatalf("scripts/clib: %v\n%s", err, out)
	}
	r = runProc(ctx, []string{"exec", "--lib", lib, "--addr", "127.0.0.5", "--", "ibv_devices"})
	if r.status != exitOK || !strings.Contains(r.out, "softnic0        \t0200ffff7f000005") {
		t.Errorf("softnic exec -- ibv_devices: status %d\n%s%s", r.status, r.out, r.errOut)
	}
}
