package nic

// The QP table: every QP of the NIC by number, each entry with its
// transport (Transport) and its scheduling: which goroutine runs it
// (qpEntry.run), whether it is queued on its processor (Wake).

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/cc"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// Transport is a QP's transport as the engine drives it: package rc's QP
// (RC, UC and XRC) or package ud's. The engine hands it received packets
// and runs it; the transport never runs itself: its timers wake the QP
// through the transport.Waker it was made with, and an application's
// call tells the engine what to run (transport.Run, NIC.run).
type Transport interface {
	// Deliver queues a received packet for the QP, which releases it; it
	// reports false, the caller keeping the packet, when the QP's inbox
	// is full.
	Deliver(p *transport.RxPacket) bool
	// Process makes one pass over the QP's work (received packets,
	// timers, the send queue) within a budget, building packets into
	// out, and reports whether work remains.
	Process(out transport.Output) bool
	// Close stops the QP's timers and releases what it holds (destroy).
	Close()
}

// qpEntry is a QP in the NIC's table: its transport and its scheduling.
//
// A QP's transport runs on one goroutine at a time, whichever asked
// (run): the receive goroutine for the packets it just read, a posting
// goroutine for the WRs it just posted, an application polling its CQ,
// or the QP's processor for timers and for work left over. running is
// that exclusion; pending is work that arrived while another goroutine
// ran the QP, which that goroutine then runs too.
type qpEntry struct {
	qpn       uint32
	typ       ibv.QPType
	h         Transport
	proc      *processor
	scheduled atomic.Bool // queued on proc
	running   atomic.Bool // a goroutine is in h.Process (or the QP is closed)
	pending   atomic.Bool // work for the QP since its runner's last pass began
	np        cc.NP       // congestion control's notification point: the last CNP sent for the QP
}

// Wake schedules the QP on its processor unless it already is (a
// coalesced wake-up per QP, STYLE.md 8). It is the QP's transport.Waker.
func (e *qpEntry) Wake() {
	if e.scheduled.CompareAndSwap(false, true) {
		e.proc.push(e)
	}
}

// run makes one pass over the QP's transport on the calling goroutine,
// with out, unless another goroutine is running it: that one then makes
// another pass (pending), so no work is lost. The QP stays taken until
// out is flushed (txBatch.flush releases it): a second goroutine could
// otherwise build the QP's next packets and write them before these,
// and a peer would see its PSNs out of order. The caller finishes out
// (txBatch.finish), which makes the further passes the QP needs.
//
// The handshake: a caller sets pending, then tries to take running; a
// runner clears pending before its pass and, after releasing running,
// looks at pending again. Either the caller takes running itself or the
// runner sees its pending.
func (e *qpEntry) run(out *txBatch) {
	e.pending.Store(true)
	if !e.running.CompareAndSwap(false, true) {
		return
	}
	e.pending.Store(false)
	out.begin()
	more := e.h.Process(out)
	out.held = append(out.held, heldQP{e, more})
}

// close waits for a pass in progress to end, calls last (when not nil)
// with the QP taken, and closes the transport; the QP is never run again
// (running stays set).
func (e *qpEntry) close(last func()) {
	for !e.running.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	if last != nil {
		last()
	}
	e.h.Close()
}

// maxDrainPasses bounds the passes drainSends makes over a QP.
const maxDrainPasses = 64

// drainSends makes the last passes over a UD or UC QP that is being
// destroyed, and writes what they build: the sends posted before the
// destroy reach the wire. A post to such a QP only wakes its processor
// (a UD send waits for the pass after its datagram's flush to complete),
// and a program may destroy the QP right after its last post without
// polling for those sends, as mckey.c's sender does (unsignaled sends,
// then rdma_leave_multicast and rdma_destroy_qp). On a NIC the doorbell
// of those posts was served within microseconds, before the destroy
// command reached the QP; so is it here. (ibv_destroy_qp drops what the
// NIC did not start, without completions; RC is left so: its sends wait
// for the peer's ACKs, which a destroyed QP never takes.) The caller
// holds e (close's last).
func (n *NIC) drainSends(e *qpEntry) {
	out := n.getTx()
	defer n.putTx(out)
	for range maxDrainPasses {
		out.begin()
		more := e.h.Process(out)
		out.flush() // writes only: out holds no QP (e.run was not used)
		if !more {
			return
		}
	}
}

// sendsAlone reports whether a QP of type typ sends without waiting for
// anything from its peer (UD and UC): drainSends is for them.
func sendsAlone(typ ibv.QPType) bool { return typ == ibv.QPTypeUD || typ == ibv.QPTypeUC }

// RegisterQP allocates a QPN and registers a transport built by mk for it.
// mk receives the QPN and the Waker the transport's timers wake the QP
// with.
func (n *NIC) RegisterQP(typ ibv.QPType, mk func(qpn uint32, w transport.Waker) (Transport, error)) (uint32, error) {
	e, err := n.registerQP(typ, 0, mk)
	if err != nil {
		return 0, err
	}
	return e.qpn, nil
}

// GSIQPN is the QP number of the General Services QP, QP1.
const GSIQPN = 1

// registerQP registers a transport built by mk under QPN fixed, or under
// the next free QPN from firstQPN up when fixed is 0, and returns its
// entry in the table. Fixed is GSIQPN for QP1, the General Services QP:
// errno.Busy while the NIC has one. (The kernel makes one per port,
// ib_mad's; rxe_qp.c rxe_qp_chk_init refuses a second one, "GSI QP
// exists for port", with EINVAL: softnic says EBUSY, the number being in
// use.) UnregisterQP(GSIQPN) frees the number again.
func (n *NIC) registerQP(typ ibv.QPType, fixed uint32, mk func(qpn uint32, w transport.Waker) (Transport, error)) (*qpEntry, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	n.qpMu.Lock()
	defer n.qpMu.Unlock()
	qpn := fixed
	if fixed != 0 {
		if _, used := n.qps[qpn]; used {
			return nil, fmt.Errorf("%w: QP %#x exists", errno.Busy, qpn)
		}
	} else {
		qpn = n.nextQPN
		for i := 0; ; i++ {
			if i > wire.QPNMask {
				return nil, fmt.Errorf("%w: no free QPN", errno.NoMemory)
			}
			if _, used := n.qps[qpn]; !used && qpn > 1 && qpn != wire.MulticastQPN {
				break
			}
			qpn = (qpn + 1) & wire.QPNMask
		}
		n.nextQPN = (qpn + 1) & wire.QPNMask
	}
	e := &qpEntry{qpn: qpn, typ: typ}
	e.proc = n.procs[int(maphash.Comparable(n.seed, qpn)%uint64(len(n.procs)))]
	h, err := mk(qpn, e)
	if err != nil {
		return nil, err
	}
	e.h = h
	n.qps[qpn] = e
	return e, nil
}

// UnregisterQP removes a QP; its transport is closed.
func (n *NIC) UnregisterQP(qpn uint32) { n.unregisterQP(qpn, false) }

// unregisterQP is UnregisterQP; with drain, what the QP's send queue
// holds goes out first (drainSends).
func (n *NIC) unregisterQP(qpn uint32, drain bool) {
	n.qpMu.Lock()
	e := n.qps[qpn]
	delete(n.qps, qpn)
	n.qpMu.Unlock()
	if e == nil {
		return
	}
	n.flushDeferred() // a poll's deferred output may hold the QP (reader.deferred)
	var last func()
	if drain && !n.closed.Load() {
		last = func() { n.drainSends(e) }
	}
	e.close(last)
}

func (n *NIC) lookup(qpn uint32) *qpEntry {
	n.qpMu.RLock()
	e := n.qps[qpn]
	n.qpMu.RUnlock()
	return e
}
