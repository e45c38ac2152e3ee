package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestInteropRxe runs every tool against rdma-core's and perftest's own
// tools on a real Linux Soft-RoCE (rdma_rxe) peer, in both roles. It needs
// root and the rxe-peer harness (a qemu guest with rdma-core 44 and
// perftest 4.5 on a bridge in the softnic-rxe network namespace); it runs
// only when SOFTNIC_RXE_PEER names the harness's rxe-peer script:
//
//	SOFTNIC_RXE_PEER=/work/shared/rxe-peer/rxe-peer go test -run Interop ./cmd/softnic
//
// The guest is peer "a" at 10.77.0.2 (GID index 1); softnic runs in the
// namespace at 10.77.0.1.
func TestInteropRxe(t *testing.T) {
	peer := os.Getenv("SOFTNIC_RXE_PEER")
	if peer == "" {
		t.Skip("set SOFTNIC_RXE_PEER to the rxe-peer script to run against a real rxe peer")
	}
	if binary == "" {
		t.Fatal("the softnic binary did not build")
	}
	rxe := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, peer, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := rxe(5*time.Minute, "start", "a"); err != nil {
		t.Fatalf("rxe-peer start a: %v\n%s", err, out)
	}
	soft := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", "softnic-rxe", binary}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, tt := range []struct {
		tool string
		args []string
	}{
		{"rc_pingpong", []string{"-g", "1", "-n", "5", "-s", "5000", "-c"}},
		{"rc_pingpong", []string{"-g", "1", "-n", "20", "-s", "100000", "-m", "1024", "-e"}},
		{"uc_pingpong", []string{"-g", "1", "-n", "5", "-s", "5000", "-c"}},
		{"ud_pingpong", []string{"-g", "1", "-n", "5", "-s", "512", "-c"}},
		{"srq_pingpong", []string{"-g", "1", "-n", "20", "-q", "4", "-s", "2000", "-c"}},
		{"write_bw", []string{"-n", "200", "-F", "-x", "1", "-s", "65536", "-q", "2"}},
		{"write_bw", []string{"-n", "5", "-F", "-x", "1", "-a"}},
		{"write_lat", []string{"-n", "10", "-F", "-x", "1", "-s", "64"}},
		{"read_bw", []string{"-n", "20", "-F", "-x", "1", "-s", "1048576"}},
		{"read_lat", []string{"-n", "10", "-F", "-x", "1"}},
		{"send_bw", []string{"-n", "50", "-F", "-x", "1", "-c", "UD", "-s", "1024"}},
		{"send_bw", []string{"-n", "100", "-F", "-x", "1", "-c", "UC", "-s", "4096"}},
		{"send_lat", []string{"-n", "10", "-F", "-x", "1"}},
		{"atomic_bw", []string{"-n", "20", "-F", "-x", "1", "-A", "CMP_AND_SWAP"}},
		{"atomic_lat", []string{"-n", "10", "-F", "-x", "1"}},
	} {
		ctool := "ib_" + tt.tool
		if strings.HasSuffix(tt.tool, "pingpong") {
			ctool = "ibv_" + tt.tool
		}
		cargs := append([]string{ctool, "-d", "rxe0"}, tt.args...)
		name := tt.tool + strings.Join(tt.args, "")
		t.Run("softnic-client/"+name, func(t *testing.T) {
			id, err := rxe(2*time.Minute, append([]string{"serve", "a", "-t", "120", "--"}, cargs...)...)
			if err != nil {
				t.Fatalf("serve: %v\n%s", err, id)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, serr := soft(ctx, append(append([]string{tt.tool, "--addr", "10.77.0.1", "--timeout", "30s"}, tt.args...), "10.77.0.2")...)
			cout, cerr := rxe(2*time.Minute, "jobwait", "a", strings.TrimSpace(id), "-t", "120")
			if serr != nil || cerr != nil {
				t.Errorf("softnic client: %v\n%s\nrxe server (%s): %v\n%s", serr, out, ctool, cerr, cout)
			}
		})
		t.Run("softnic-server/"+name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			type res struct {
				out string
				err error
			}
			done := make(chan res, 1)
			go func() {
				out, err := soft(ctx, append([]string{tt.tool, "--addr", "10.77.0.1", "--timeout", "30s", "--accept-timeout", "60s"}, tt.args...)...)
				done <- res{out, err}
			}()
			time.Sleep(1500 * time.Millisecond)
			cout, cerr := rxe(2*time.Minute, append(append([]string{"exec", "a", "-t", "120", "--"}, cargs...), "10.77.0.1")...)
			s := <-done
			if s.err != nil || cerr != nil {
				t.Errorf("softnic server: %v\n%s\nrxe client (%s): %v\n%s", s.err, s.out, ctool, cerr, cout)
			}
		})
	}
}
