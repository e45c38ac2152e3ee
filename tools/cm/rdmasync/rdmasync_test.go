package rdmasync

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs/cm"
)

func newCMs(t *testing.T) []*cm.CM {
	t.Helper()
	cms, _ := tooltest.CMs(t, "10.0.0.1", "10.0.0.2")
	return cms
}

func TestPair(t *testing.T) {
	cms := newCMs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var so, se, co, ce bytes.Buffer
	var sst, cst int
	tooltest.Pair(func() {
		sst = RunServer(ctx, "7471", toolnic.Env{CM: cms[0], Out: &so, Err: &se, Stall: 20 * time.Second})
	}, func() bool {
		co.Reset()
		ce.Reset()
		cst = RunClient(ctx, "10.0.0.1", "7471", toolnic.Env{CM: cms[1], Out: &co, Err: &ce, Stall: 20 * time.Second})
		return cst != 0 && strings.HasPrefix(ce.String(), "rdma_connect: ")
	})
	if sst != 0 || so.String() != "rdma_server: start\nrdma_server: end 0\n" {
		t.Errorf("server: status %d\n%s%s", sst, so.String(), se.String())
	}
	if cst != 0 || co.String() != "rdma_client: start\nrdma_client: end 0\n" {
		t.Errorf("client: status %d\n%s%s", cst, co.String(), ce.String())
	}
}

// TestNoServer: rdma_connect fails (the REQ is rejected), the client
// prints perror's line and ends with -1.
func TestNoServer(t *testing.T) {
	cms := newCMs(t)
	var o, e bytes.Buffer
	st := RunClient(context.Background(), "10.0.0.1", "7471", toolnic.Env{CM: cms[1], Out: &o, Err: &e, Stall: 10 * time.Second})
	if st != 255 || o.String() != "rdma_client: start\nrdma_client: end -1\n" || !strings.HasPrefix(e.String(), "rdma_connect: ") {
		t.Errorf("status %d\n%s%s", st, o.String(), e.String())
	}
}
