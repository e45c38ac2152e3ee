package nic

// XRC domains, XRC SRQs and XRC_RECV QPs (rdma-core ibv_open_xrcd(3),
// ibv_create_srq_ex(3), ibv_open_qp(3), ibv_create_qp_ex(3)).

import (
	"fmt"
	"sync"

	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport/rc"
)

// XRCD is an XRC domain (struct ibv_xrcd): the XRC SRQs and XRC_RECV QPs
// created in it, on any NIC of the process, belong together, and an
// XRC_RECV QP takes requests only for the XRC SRQs of its own domain.
//
// ibv_open_xrcd shares a domain between processes by an open file (the
// domain is the file's inode, created with O_CREAT). softnic's NICs live
// in one process, so OpenXRCD shares a domain between the NICs of the
// process by a key instead; nothing is shared across processes: another
// process has its own NICs, whose SRQs a peer reaches only through their
// numbers on the wire, which is what XRC is for.
type XRCD struct {
	key string

	mu    sync.Mutex
	opens int  // guarded by mu: handles open (OpenXRCD minus Close)
	users int  // guarded by mu: XRC SRQs and XRC_RECV QPs in the domain
	gone  bool // guarded by mu: the last handle closed
}

// xrcds is the process's XRC domains opened with a key.
var xrcds = struct {
	mu sync.Mutex
	m  map[string]*XRCD
}{m: map[string]*XRCD{}}

// OpenXRCD opens the XRC domain of key, creating it if it does not exist
// (ibv_open_xrcd with O_CREAT); every open of the same key, from any NIC,
// returns the same domain. The empty key makes a new domain that no other
// open shares (ibv_open_xrcd with fd -1).
func OpenXRCD(key string) *XRCD {
	if key == "" {
		return &XRCD{opens: 1}
	}
	xrcds.mu.Lock()
	defer xrcds.mu.Unlock()
	x := xrcds.m[key]
	if x == nil {
		x = &XRCD{key: key}
		xrcds.m[key] = x
	}
	x.mu.Lock()
	x.opens++
	x.mu.Unlock()
	return x
}

// Close closes one handle of the domain (ibv_close_xrcd). Closing the
// last one fails with errno.Busy while XRC SRQs or XRC_RECV QPs remain in
// the domain (the kernel's ib_dealloc_xrcd_user: usecnt); after it the
// key names a new domain.
func (x *XRCD) Close() error {
	xrcds.mu.Lock()
	defer xrcds.mu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.gone:
		return fmt.Errorf("%w: XRC domain closed", errno.Invalid)
	case x.opens == 1 && x.users > 0:
		return fmt.Errorf("%w: XRC domain has %d SRQs and QPs", errno.Busy, x.users)
	}
	x.opens--
	if x.opens == 0 {
		x.gone = true
		if x.key != "" && xrcds.m[x.key] == x {
			delete(xrcds.m, x.key)
		}
	}
	return nil
}

// use adds an object to the domain, or fails once it is closed.
func (x *XRCD) use() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gone {
		return fmt.Errorf("%w: XRC domain closed", errno.Invalid)
	}
	x.users++
	return nil
}

func (x *XRCD) unuse() {
	x.mu.Lock()
	x.users--
	x.mu.Unlock()
}

// maxSRQNum bounds XRC SRQ numbers: 24 bits, as the XRCETH carries them
// (IBTA 9.3.7).
const maxSRQNum = 1<<24 - 1

// xrcTables are a NIC's XRC SRQs by number and XRC_RECV QPs by QPN.
type xrcTables struct {
	mu      sync.RWMutex
	srqs    map[uint32]*SRQ // guarded by mu
	tgts    map[uint32]*QP  // guarded by mu
	nextNum uint32          // guarded by mu
}

// addSRQ gives s an SRQ number and makes it reachable by it.
func (t *xrcTables) addSRQ(s *SRQ) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.srqs == nil {
		t.srqs = map[uint32]*SRQ{}
	}
	for i := 0; ; i++ {
		if i > maxSRQNum {
			return fmt.Errorf("%w: no free SRQ number", errno.NoMemory)
		}
		t.nextNum = t.nextNum%maxSRQNum + 1 // 1..maxSRQNum
		if _, used := t.srqs[t.nextNum]; !used {
			break
		}
	}
	s.num = t.nextNum
	t.srqs[s.num] = s
	return nil
}

func (t *xrcTables) removeSRQ(s *SRQ) {
	t.mu.Lock()
	delete(t.srqs, s.num)
	t.mu.Unlock()
}

// target resolves SRQ number num for an XRC_RECV QP of domain x: only an
// XRC SRQ of that domain is a target (IBTA 9.3.7).
func (t *xrcTables) target(x *XRCD, num uint32) (rc.XRCTarget, bool) {
	t.mu.RLock()
	s := t.srqs[num]
	t.mu.RUnlock()
	if s == nil || s.xrcd != x {
		return rc.XRCTarget{}, false
	}
	return rc.XRCTarget{RQ: s.rq, PD: s.pd, CQ: s.cq}, true
}

// OpenQP opens the XRC_RECV QP qpn of this NIC in domain x (ibv_open_qp):
// the QP is the same, shared with its creator, and lives until every
// handle is destroyed (QP.Destroy on each).
func (n *NIC) OpenQP(x *XRCD, qpn uint32) (*QP, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	n.xrc.mu.RLock()
	qp := n.xrc.tgts[qpn]
	n.xrc.mu.RUnlock()
	switch {
	case x == nil:
		return nil, fmt.Errorf("%w: open QP needs an XRC domain", errno.Invalid)
	case qp == nil:
		return nil, fmt.Errorf("%w: no XRC_RECV QP %#x", errno.Invalid, qpn)
	case qp.xrcd != x:
		return nil, fmt.Errorf("%w: XRC_RECV QP %#x is of another XRC domain", errno.Invalid, qpn)
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead.Load() {
		return nil, fmt.Errorf("%w: QP %#x destroyed", errno.Invalid, qpn)
	}
	qp.handles++
	return qp, nil
}
