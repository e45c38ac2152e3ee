package cmkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

func TestEnd(t *testing.T) {
	cms, _ := tooltest.CMs(t, "10.0.0.1")
	for _, ret := range []int{0, -110, 1} {
		var b strings.Builder
		printf := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
		destroyed := false
		err := End(printf, ret, func() {
			destroyed = true
			b.WriteString("[destroy]\n")
		}, cms[0].CreateEventChannel())
		want := fmt.Sprintf("test complete\n[destroy]\nreturn status %d\n", ret)
		if b.String() != want || !destroyed {
			t.Errorf("End(%d) printed %q, want %q", ret, b.String(), want)
		}
		var st *Status
		switch {
		case ret == 0 && err != nil:
			t.Errorf("End(0) = %v, want nil", err)
		case ret != 0 && (!errors.As(err, &st) || st.Code != ret || err.Error() != fmt.Sprintf("return status %d", ret)):
			t.Errorf("End(%d) = %v, want a *Status of %d", ret, err, ret)
		}
	}
}

func TestAllocNodes(t *testing.T) {
	cms, _ := tooltest.CMs(t, "10.0.0.1")
	type node struct {
		i  int
		id *cm.ID
	}
	ch := cms[0].CreateEventChannel()
	defer ch.Close()
	mk := func(i int) *node { return &node{i: i} }
	// Without IDs (a server's nodes wait for requests).
	nodes, err := AllocNodes(cms[0], ch, 3, mk, false, cm.PSTCP, ibv.QPTypeRC, func(*node, *cm.ID) { t.Fatal("set called") })
	if err != nil || len(nodes) != 3 || nodes[2].i != 2 || nodes[0].id != nil {
		t.Fatalf("AllocNodes without IDs = %v, %v", nodes, err)
	}
	// With IDs, each node its ID's context.
	nodes, err = AllocNodes(cms[0], ch, 2, mk, true, cm.PSTCP, ibv.QPTypeRC, func(n *node, id *cm.ID) { n.id = id })
	if err != nil || len(nodes) != 2 {
		t.Fatalf("AllocNodes with IDs = %v, %v", nodes, err)
	}
	for _, n := range nodes {
		if n.id == nil || n.id.Context() != any(n) {
			t.Errorf("node %d: ID %v", n.i, n.id)
		}
		n.id.Destroy()
	}
}

// TestSkeleton: a server's nodes are taken by requests in turn and a
// request beyond them is rejected with cmatose.c's line; a node given
// back loses its ID; the listener names the step that failed.
func TestSkeleton(t *testing.T) {
	cms, _ := tooltest.CMs(t, "10.0.0.1", "10.0.0.2")
	var out strings.Builder
	env := &toolnic.Env{CM: cms[0], Out: &out, Err: &out, Stall: 5 * time.Second}
	st, err := NewTest("cmatose", env, 1, false, cm.PSTCP, ibv.QPTypeRC)
	if err != nil || len(st.Nodes) != 1 || st.Nodes[0].ID != nil || st.ConnectsLeft != 1 {
		t.Fatalf("NewTest = %+v, %v", st, err)
	}
	lid, step, err := st.Listen(cm.PSTCP, ibv.QPTypeRC, netip.Addr{}, 7471)
	if err != nil {
		t.Fatalf("Listen: %s: %v", step, err)
	}
	defer lid.Destroy()
	if _, step, err := st.Listen(cm.PSTCP, ibv.QPTypeRC, netip.Addr{}, 7471); err == nil || step != "bind address failed" {
		t.Errorf("a second listener on the port: %q, %v; want the bind to fail", step, err)
	}

	// A client's two requests: the first takes the node, the second is
	// rejected.
	cst, err := NewTest("cmatose", &toolnic.Env{CM: cms[1], Out: io.Discard, Err: io.Discard, Stall: 5 * time.Second},
		2, true, cm.PSTCP, ibv.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	if err := cst.ResolveAll(netip.Addr{}, netip.MustParseAddrPort("10.0.0.1:7471")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pd := make([]*verbs.PD, 2)
	cst.Events(ctx, &cst.ConnectsLeft, func(ev *cm.Event) int {
		n := cst.Node(ev.ID)
		switch ev.Type {
		case cm.EventAddrResolved:
			ev.ID.ResolveRoute(ResolveTimeout)
		case cm.EventRouteResolved:
			var err error
			if pd[n.Idx], err = ev.ID.Device().AllocPD(); err != nil {
				t.Fatal(err)
			}
			cq, _ := ev.ID.Device().CreateCQ(1, nil)
			n.CQ[SendCQ], n.PD = cq, pd[n.Idx]
			if _, err := ev.ID.CreateQP(n.PD, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
				Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
				t.Fatal(err)
			}
			ev.ID.Connect(&cm.ConnParam{})
			cst.ConnectsLeft--
		}
		return 0
	})
	var taken []*Node
	left := 2
	st.Events(ctx, &left, func(ev *cm.Event) int {
		if ev.Type == cm.EventConnectRequest {
			n, ret := st.Take(ev.ID)
			if ret == 0 {
				taken = append(taken, n)
			} else if ret != -12 {
				t.Errorf("Take beyond the nodes: %d, want -12", ret)
			}
			left--
		}
		return 0
	})
	if len(taken) != 1 || taken[0] != st.Nodes[0] || st.Node(taken[0].ID) != taken[0] || st.ConnIndex != 1 {
		t.Fatalf("taken %v, index %d", taken, st.ConnIndex)
	}
	if want := "cmatose: failing connection request\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	id := taken[0].ID
	st.Release(taken[0])
	if taken[0].ID != nil || st.Node(id) != nil {
		t.Errorf("Release left the ID")
	}
	id.Reject(nil)
	id.Destroy()
	cst.End(0)
	st.End(0)
}
