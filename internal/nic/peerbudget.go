package nic

// The budgets of what the NIC's RC requesters have in flight toward each
// peer address (rc.PeerBudget): one per peer, shared by every RC and
// XRC_SEND QP whose path leads there.

import (
	"net/netip"
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport/rc"
	"github.com/softnic/softnic/link"
)

// DefaultPeerBudget is the bytes the NIC's RC requesters may have in
// flight toward one peer by default (Config.PeerBudget): half the socket
// buffer a softnic peer sets (link.DefaultUDPSocketBuffer, 8 MiB where
// the process may: root, or net.core.rmem_max), each PSN charged its
// path MTU and rc.PSNCost. The kernel grants a socket twice the buffer
// asked for and charges each datagram its truesize, the data and its
// sk_buff (socket(7)): half the buffer asked for leaves room for a
// datagram's kernel cost of up to four times its PSN's charge, and for
// what other peers send at the same time. It is 963 PSNs at path
// MTU 4096, 3276 at 1024: one QP keeps its whole window
// (rc.MaxUnackedPSNs, 512) at any MTU, and the budget binds only when
// several QPs toward the same peer send at once. A peer whose buffer is
// smaller (rmem_max's 208 KiB without privileges; a kernel rxe's
// socket) overflows before the budget binds, as it would without it.
// rxe has no such budget (rc.PeerBudget). The measurements behind the
// size: docs/performance.md, "nic.DefaultPeerBudget".
const DefaultPeerBudget = link.DefaultUDPSocketBuffer / 2

// peerBudgets are the NIC's budgets by peer address, each kept while a
// QP's path leads to its address.
type peerBudgets struct {
	limit int // bytes of each; 0: no budgets
	mu    sync.Mutex
	m     map[netip.Addr]*peerBudget // guarded by mu
}

// peerBudget is one peer's budget and the QPs that use it.
type peerBudget struct {
	b    *rc.PeerBudget
	refs int
}

func (t *peerBudgets) init(limit int) {
	switch {
	case limit == 0:
		t.limit = DefaultPeerBudget
	case limit > 0:
		t.limit = limit
	}
}

// get returns the budget toward peer, made if no QP uses it; nil when
// the NIC has no budgets.
func (t *peerBudgets) get(peer netip.Addr) *rc.PeerBudget {
	if t.limit == 0 {
		return nil
	}
	peer = peer.Unmap()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[netip.Addr]*peerBudget)
	}
	p := t.m[peer]
	if p == nil {
		p = &peerBudget{b: rc.NewPeerBudget(t.limit)}
		t.m[peer] = p
	}
	p.refs++
	return p.b
}

// put ends a QP's use of the budget toward peer.
func (t *peerBudgets) put(peer netip.Addr) {
	peer = peer.Unmap()
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[peer]; p != nil {
		if p.refs--; p.refs == 0 {
			delete(t.m, peer)
		}
	}
}

// takesBudget reports whether a QP of type typ sends requests that wait
// for acknowledgements: RC and XRC_SEND, whose requesters take from the
// budget toward their peer.
func takesBudget(typ ibv.QPType) bool { return typ == ibv.QPTypeRC || typ == ibv.QPTypeXRCSend }

// setPeerBudgetLocked gives the QP the budget toward the peer its path
// now leads to, after a Modify that set it (the address vector), and
// ends its use of the one before; qp.mu is held.
func (qp *QP) setPeerBudgetLocked() {
	t, ok := qp.t.(*rc.QP)
	if !ok || !takesBudget(qp.typ) || qp.n.peers.limit == 0 {
		return
	}
	peer, ok := t.PeerAddr()
	if !ok || !peer.IsValid() || peer == qp.peer {
		return
	}
	b := qp.n.peers.get(peer)
	t.SetBudget(b)
	if qp.peer.IsValid() {
		qp.n.peers.put(qp.peer)
	}
	qp.peer = peer
}

// dropPeerBudgetLocked ends the QP's use of its peer's budget (destroy:
// the transport, closed, gave back what it held); qp.mu is held.
func (qp *QP) dropPeerBudgetLocked() {
	if qp.peer.IsValid() {
		qp.n.peers.put(qp.peer)
		qp.peer = netip.Addr{}
	}
}
