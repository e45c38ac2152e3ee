package demo

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestSummaries(t *testing.T) {
	cli := []byte("  local address:  LID 0x0000, QPN 0x000011, PSN 0x60756d, GID ::ffff:127.0.0.2\n" +
		"  remote address: LID 0x0000, QPN 0x000011, PSN 0x136a0b, GID ::ffff:127.0.0.1\n" +
		"1638400 bytes in 0.04 seconds = 319.31 Mbit/sec\n200 iters in 0.04 seconds = 205.24 usec/iter\n")
	s, err := pingpongSummary(cli, nil)
	if err != nil || !strings.Contains(s, "200 SEND ping-pongs") || !strings.Contains(s, "319.31 Mbit/s") {
		t.Errorf("pingpong: got %q, %v", s, err)
	}
	if _, err := pingpongSummary(cli, []byte("invalid data in page 0\n")); err == nil {
		t.Error("invalid data: got no error")
	}
	if _, err := pingpongSummary([]byte("garbage"), nil); err == nil {
		t.Error("garbage: got no error")
	}
	bw := bwSummary("RDMA WRITEs")
	c := []byte(`{"tool":"write_bw","side":"client","bw":[{"size":65536,"iterations":2000,"bw_peak":879.43,"bw_average":255.81,"msg_rate_mpps":0.0041}],"checked":false}`)
	srv := []byte(`{"tool":"write_bw","side":"server","checked":true}`)
	s, err = bw(c, srv)
	if err != nil || !strings.Contains(s, "2000 RDMA WRITEs: 255.81 MB/s average, 879.43 MB/s peak") {
		t.Errorf("bw: got %q, %v", s, err)
	}
	if _, err := bw(c, []byte(`{"checked":false}`)); err == nil {
		t.Error("nothing checked: got no error")
	}
	if _, err := bw([]byte("x"), srv); err == nil {
		t.Error("bad JSON: got no error")
	}
	if _, err := bw(append([]byte("Warning: on stdout\n"), c...), srv); err == nil {
		t.Error("a warning before the JSON: got no error")
	}
	if _, err := bw(c, append(srv, " Failed to exchange data between server and clients\n"...)); err == nil {
		t.Error("text after the JSON: got no error")
	}
}

func TestRunReportsFailures(t *testing.T) {
	var out strings.Builder
	err := Run(context.Background(), Config{Exe: "/nonexistent/softnic", A: netip.MustParseAddr("127.0.0.1"),
		B: netip.MustParseAddr("127.0.0.2")}, &out)
	if !errors.Is(err, ErrFailed) || !strings.Contains(out.String(), "4 of 4 runs failed.") {
		t.Errorf("got %v\n%s", err, out.String())
	}
}
