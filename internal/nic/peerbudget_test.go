package nic

import (
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/transport/rc"
)

// One QP alone keeps its whole window under the default budget, at the
// largest path MTU: the budget binds only when several QPs send at once.
func TestDefaultPeerBudgetHoldsAWindow(t *testing.T) {
	if need := rc.MaxUnackedPSNs * (ibv.MTU4096.Bytes() + rc.PSNCost); DefaultPeerBudget < need {
		t.Errorf("DefaultPeerBudget %d, less than one window at path MTU 4096 (%d)", DefaultPeerBudget, need)
	}
}

// The RC and XRC_SEND QPs whose paths lead to one peer share its
// budget; another peer has its own; a budget lives while a QP uses it,
// and a QP whose path moves to another peer moves to that peer's.
// UC QPs take none, and a NIC made without budgets gives none.
func TestPeerBudgetsByPeer(t *testing.T) {
	// In a bubble: synctest.Test fails if a goroutine of the NICs
	// outlives their Close.
	synctest.Test(t, func(t *testing.T) {
		p1, p2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.3")
		n, err := New(Config{Link: newFeedLink(), Processors: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		newQP := func(typ ibv.QPType, peer netip.Addr) *QP {
			t.Helper()
			qp := createQP(t, n, typ)
			pathTo(t, qp, peer)
			return qp
		}
		budget := func(qp *QP) *rc.PeerBudget {
			n.peers.mu.Lock()
			defer n.peers.mu.Unlock()
			if p := n.peers.m[qp.peer]; p != nil && qp.peer.IsValid() {
				return p.b
			}
			return nil
		}
		a, b := newQP(ibv.QPTypeRC, p1), newQP(ibv.QPTypeXRCSend, p1)
		c, uc := newQP(ibv.QPTypeRC, p2), newQP(ibv.QPTypeUC, p1)
		switch {
		case budget(a) == nil || budget(a) != budget(b):
			t.Errorf("QPs toward %v: budgets %p and %p, want one", p1, budget(a), budget(b))
		case budget(c) == nil || budget(c) == budget(a):
			t.Errorf("the QP toward %v has budget %p, want its own", p2, budget(c))
		case budget(uc) != nil:
			t.Errorf("a UC QP has budget %p, want none", budget(uc))
		}
		if got := budget(a).Limit(); got != DefaultPeerBudget {
			t.Errorf("budget of %d bytes, want DefaultPeerBudget (%d)", got, DefaultPeerBudget)
		}
		// a's path moves: RESET, then a new path.
		if err := a.Modify(&ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState); err != nil {
			t.Fatal(err)
		}
		pathTo(t, a, p2)
		if budget(a) != budget(c) {
			t.Errorf("after its path moved to %v, the QP has budget %p, want %p", p2, budget(a), budget(c))
		}
		for _, qp := range []*QP{a, b, c, uc} {
			if err := qp.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
		if k := len(n.peers.m); k != 0 {
			t.Errorf("%d budgets left after every QP was destroyed", k)
		}

		off, err := New(Config{Link: newFeedLink(), Processors: 1, PeerBudget: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		qp := createQP(t, off, ibv.QPTypeRC)
		pathTo(t, qp, p1)
		if qp.peer.IsValid() || len(off.peers.m) != 0 {
			t.Errorf("a NIC with PeerBudget -1 gave its QP a budget")
		}
		if err := qp.Destroy(); err != nil {
			t.Fatal(err)
		}
	})
}

// createQP makes a QP of type typ on n with a CQ and PD of its own.
func createQP(t *testing.T, n *NIC, typ ibv.QPType) *QP {
	t.Helper()
	pd, err := n.Mem().AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(16, cq.MaxCQE)
	if err != nil {
		t.Fatal(err)
	}
	a := &QPInitAttr{Type: typ, PD: pd, SendCQ: c, RecvCQ: c,
		Cap: ibv.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if typ == ibv.QPTypeXRCSend {
		a.RecvCQ = nil
	}
	qp, err := n.CreateQP(a)
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

// pathTo moves qp from RESET to INIT and to RTR with its path to peer,
// as a connection's setup does.
func pathTo(t *testing.T, qp *QP, peer netip.Addr) {
	t.Helper()
	mask := ibv.QPAttrState | ibv.QPAttrPort | ibv.QPAttrPKeyIndex | ibv.QPAttrAccessFlags
	if err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, mask); err != nil {
		t.Fatalf("modify to INIT: %v", err)
	}
	av := ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer, HopLimit: 64}}
	attr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: 0x99, AHAttr: av, MaxDestRdAtomic: 1}
	mask = ibv.QPAttrState | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrAV | ibv.QPAttrRQPSN
	if qp.Type() == ibv.QPTypeRC {
		mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	}
	if err := qp.Modify(&attr, mask); err != nil {
		t.Fatalf("modify to RTR toward %v: %v", peer, err)
	}
}
