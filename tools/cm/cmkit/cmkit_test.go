package cmkit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/tooltest"
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
