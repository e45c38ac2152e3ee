package transporttest

import (
	"errors"
	"fmt"
	"time"

	"github.com/softnic/softnic/wire"
)

// RxeWriter is a model of rxe's RC requester and completer sending RDMA
// WRITEs, as ib_write_bw over rxe runs them against softnic's responder
// in the interop bed: what rxe_req.c and rxe_comp.c (Linux 6.1) do with
// the responder's ACKs and NAKs, WQE by WQE, not how fast.
//
// The requester (rxe_requester) sends its WQEs' packets in order while
// its next PSN is at most RxeMaxUnacked past the oldest unacknowledged
// one (RXE_MAX_UNACKED_PSNS), numbering a WQE's packets from the PSN its
// first one goes out with (update_wqe_psn), and asks for an ACK on each
// WQE's last packet and after RxeMaxPktPerAck without one. A WQE is
// processing while it is sent, pending once its last packet went.
//
// The completer (rxe_completer) takes each response against the oldest
// WQE not complete: an ACK past its last PSN completes it if it is
// pending and is ignored if not (check_psn); an ACK within it, or of its
// last PSN while it is still being sent again, moves the oldest
// unacknowledged PSN to the one after (COMPST_UPDATE_COMP); a PSN
// sequence NAK moves it to the NAK's PSN and starts a retry unless one
// is under way (comp.started_retry, cleared by an ACK). The retransmit
// timer expires RetransmitTimeout after the last response while
// something is unacknowledged, and starts a retry for ever (a retry
// count of 7 is infinite to rxe).
//
// A retry (req_retry) sends again from the oldest unacknowledged PSN,
// from the oldest WQE not complete: it skips as many of that WQE's
// packets as that PSN is past the WQE's first one (retry_first_write_send)
// — all of them and one more when the completer moved that PSN past the
// WQE's end while the WQE was being sent again; the WQE then goes out
// as a zero-length WRITE ONLY, and every later request one PSN further
// on than the first time.
//
// It sends through Send, which fills in the BTH's destination QP and
// P_Key; Run drives it.
type RxeWriter struct {
	Send    func(h wire.Headers, payload []byte)
	PSN     wire.PSN      // the first PSN
	Size    int           // bytes of each WRITE, a multiple of RxeMTU
	VA      uint64        // the target of the first WRITE; each follows the one before
	RKey    uint32        // the target's
	Data    []byte        // what the WRITEs carry, Size each
	Timeout time.Duration // the retransmit timer's (timeout 14: 67 ms)

	wqes []rxeWQE
	cons int // the oldest WQE not complete

	// The requester's state (qp->req).
	reqIdx    int      // the WQE it sends
	reqPSN    wire.PSN // the next PSN
	reqOpcode wire.Opcode
	reqNone   bool // reqOpcode is -1: no packet of a message sent
	noAck     int
	needRetry bool

	// The completer's (qp->comp).
	compPSN      wire.PSN
	startedRetry bool
	lastHeard    time.Time // the retransmit timer runs from here

	// Retries counts the retries started (NAK or timeout); Timeouts
	// the retransmit timer's expiries; Renumbered the WQEs sent again
	// from past their end (a zero-length WRITE ONLY).
	Retries, Timeouts, Renumbered int
}

// rxeWQE is a send WQE (struct rxe_send_wqe) of one WRITE.
type rxeWQE struct {
	state          rxeWQEState
	firstPSN, last wire.PSN
	resid          int    // bytes not sent yet (dma.resid)
	iova           uint64 // where the next packet writes
	va             uint64 // the WRITE's remote address
	off            int    // the WRITE's offset in Data
}

type rxeWQEState int

const (
	wqePosted rxeWQEState = iota
	wqeProcessing
	wqePending
	wqeDone // completed (the consumer index passed it)
)

const (
	// RxeMaxUnacked is rxe's window: RXE_MAX_UNACKED_PSNS.
	RxeMaxUnacked = 128
	// RxeMaxPktPerAck is RXE_MAX_PKT_PER_ACK.
	RxeMaxPktPerAck = 64
	// RxeMTU is the path MTU RxeWriter's packets fill.
	RxeMTU = 1024
)

func (w *RxeWriter) init(now time.Time) {
	n := len(w.Data) / w.Size
	w.wqes = make([]rxeWQE, n)
	for i := range w.wqes {
		va := w.VA + uint64(i*w.Size)
		w.wqes[i] = rxeWQE{resid: w.Size, iova: va, va: va, off: i * w.Size}
	}
	w.reqPSN, w.compPSN, w.reqNone = w.PSN, w.PSN, true
	w.lastHeard = now
}

// Total is the packets of every WRITE, numbered as first sent.
func (w *RxeWriter) Total() int { return len(w.Data) / RxeMTU }

// Acked is how many WQEs completed.
func (w *RxeWriter) Acked() int { return w.cons }

// Next is the next PSN the requester sends, from PSN.
func (w *RxeWriter) Next() int { return int(w.reqPSN.Diff(w.PSN)) }

// ErrRxeStalled is Run's error when no WRITE completed for its stall
// time.
var ErrRxeStalled = errors.New("no WRITE completed")

// Run sends every WRITE and returns once the responder acknowledged them
// all. Each step it sends what the window allows, lets time pass (run;
// 10 µs, twice as long after a step that brought nothing, up to 1 ms,
// so a stall costs no 200,000 steps), takes what came back (recv) at
// now(), and runs its retransmit timer. It fails with ErrRxeStalled when
// no WRITE completed for stall, and with what answer refused.
func (w *RxeWriter) Run(run func(time.Duration), now func() time.Time, recv func() []wire.Packet, stall time.Duration) error {
	w.init(now())
	step := 10 * time.Microsecond
	progress, acked := now(), 0
	for w.cons < len(w.wqes) {
		w.pump()
		run(step)
		t := now()
		got := recv()
		for i := range got {
			if err := w.answer(&got[i], t); err != nil {
				return err
			}
		}
		if len(got) == 0 {
			step = min(2*step, time.Millisecond)
		} else {
			step = 10 * time.Microsecond
		}
		if w.cons > acked {
			acked, progress = w.cons, t
		}
		w.tick(t)
		if t.Sub(progress) > stall {
			return fmt.Errorf("%w for %v: WRITE %d of %d, requester at PSN %d, %d retries; %v",
				ErrRxeStalled, stall, w.cons, len(w.wqes), w.Next(), w.Retries, w)
		}
	}
	return nil
}

// pump sends what the window allows (rxe_requester until it exits).
func (w *RxeWriter) pump() {
	for {
		if w.needRetry {
			w.retry()
			w.needRetry = false
		}
		if w.reqIdx == len(w.wqes) || w.reqPSN.Compare(w.compPSN.Add(RxeMaxUnacked)) > 0 {
			return
		}
		w.sendOne()
	}
}

// nextOpcode is next_opcode_rc for a WRITE: fits when what is left goes
// in one packet.
func (w *RxeWriter) nextOpcode(q *rxeWQE) wire.Opcode {
	fits := q.resid <= RxeMTU
	if !w.reqNone && (w.reqOpcode == wire.RCWriteFirst || w.reqOpcode == wire.RCWriteMiddle) {
		if fits {
			return wire.RCWriteLast
		}
		return wire.RCWriteMiddle
	}
	if fits {
		return wire.RCWriteOnly
	}
	return wire.RCWriteFirst
}

// sendOne sends the next packet of the WQE the requester is at
// (rxe_requester: init_req_packet, finish_packet, update_wqe_state,
// update_wqe_psn, update_state).
func (w *RxeWriter) sendOne() {
	q := &w.wqes[w.reqIdx]
	op := w.nextOpcode(q)
	info := op.Info()
	payload := min(q.resid, RxeMTU)
	h := wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: w.reqPSN}}
	if info.Mask&wire.MaskStart != 0 {
		h.RETH = wire.RETHFields{VA: q.iova, RKey: w.RKey, DMALen: uint32(q.resid)}
	}
	end := info.Mask&wire.MaskEnd != 0
	w.noAck++
	h.BTH.AckReq = end || w.noAck > RxeMaxPktPerAck
	if h.BTH.AckReq {
		w.noAck = 0
	}
	start := q.off + (w.Size - q.resid)
	w.Send(h, w.Data[start:start+payload])
	// update_wqe_psn: the packets left, this one included.
	if info.Mask&wire.MaskStart != 0 {
		num := max((q.resid+RxeMTU-1)/RxeMTU, 1)
		q.firstPSN, q.last = w.reqPSN, w.reqPSN.Add(uint32(num-1))
	}
	w.reqPSN = w.reqPSN.Next()
	q.resid -= payload
	q.iova += uint64(payload)
	if end {
		q.state = wqePending
	} else {
		q.state = wqeProcessing
	}
	w.reqOpcode, w.reqNone = op, false
	if end {
		w.reqIdx++
	}
}

// retry is req_retry: back to the oldest unacknowledged PSN, from the
// oldest WQE not complete.
func (w *RxeWriter) retry() {
	w.Retries++
	w.reqIdx, w.reqPSN, w.reqNone = w.cons, w.compPSN, true
	for i := w.cons; i < len(w.wqes); i++ {
		q := &w.wqes[i]
		if q.state == wqePosted {
			break
		}
		q.iova, q.resid = q.va, w.Size
		if i == w.cons {
			// retry_first_write_send: npsn packets skipped, past the
			// WQE's end if the oldest unacknowledged PSN is.
			npsn := int(uint32(w.compPSN-q.firstPSN) & wire.PSNMask)
			if npsn >= w.Size/RxeMTU {
				w.Renumbered++
			}
			for range npsn {
				toSend := min(q.resid, RxeMTU)
				w.reqOpcode, w.reqNone = w.nextOpcode(q), false
				q.resid -= toSend
				q.iova += RxeMTU
			}
		}
		q.state = wqePosted
	}
}

// answer takes one response at now (rxe_completer). A NAK other than a
// PSN sequence error is an error: a WRITE to a valid MR has no other.
func (w *RxeWriter) answer(p *wire.Packet, now time.Time) error {
	if p.Opcode != wire.RCAck {
		return fmt.Errorf("the responder sent %v", p.Opcode)
	}
	w.lastHeard = now // COMPST_EXIT's mod_timer
	psn, syn := p.PSN(), p.AETH().Syndrome()
	if !syn.IsACK() && syn != wire.NakPSNSequence {
		return fmt.Errorf("the responder sent %v/%d with %v", p.Opcode, psn.Diff(w.PSN), syn)
	}
	for w.cons < len(w.wqes) {
		q := &w.wqes[w.cons]
		if q.state == wqePosted { // get_wqe: not started
			return nil
		}
		// check_psn
		if psn.After(q.last) {
			if q.state != wqePending {
				return nil
			}
			// COMPST_COMP_WQE: complete_wqe, then the next WQE.
			w.startedRetry = false
			if !q.last.Before(w.compPSN) {
				w.compPSN = q.last.Next()
			}
			w.complete()
			continue
		}
		if psn.Before(w.compPSN) {
			if psn == q.last { // COMPST_COMP_ACK
				w.complete()
			}
			return nil
		}
		// COMPST_CHECK_ACK
		if syn == wire.NakPSNSequence {
			if psn.After(w.compPSN) {
				w.compPSN = psn
			}
			w.errorRetry(false)
			return nil
		}
		w.startedRetry = false
		if q.state == wqePending && q.last == psn { // COMPST_WRITE_SEND -> COMP_ACK
			w.complete()
		}
		if !psn.Before(w.compPSN) { // COMPST_UPDATE_COMP
			w.compPSN = psn.Next()
		}
		return nil
	}
	return nil
}

func (w *RxeWriter) complete() {
	w.wqes[w.cons].state = wqeDone
	w.cons++
	if w.reqIdx < w.cons {
		// The completer took the WQE the requester is sending again
		// (an ACK of its last PSN while it is not pending, check_psn's
		// COMPST_COMP_ACK). rxe's requester would go on in its slot,
		// which perftest fills with its next WQE at once; the model
		// goes on with the oldest WQE left instead, numbered on.
		w.reqIdx, w.reqNone = w.cons, true
	}
}

// errorRetry is COMPST_ERROR_RETRY: a retry, unless one is under way
// and this is no timeout.
func (w *RxeWriter) errorRetry(timeout bool) {
	if w.cons == len(w.wqes) || w.wqes[w.cons].state == wqePosted {
		return
	}
	if w.startedRetry && !timeout {
		return
	}
	w.startedRetry, w.needRetry = true, true
}

// tick runs the retransmit timer at now.
func (w *RxeWriter) tick(now time.Time) {
	if !w.reqPSN.After(w.compPSN) || now.Sub(w.lastHeard) < w.Timeout {
		return
	}
	w.Timeouts++
	w.lastHeard = now
	w.errorRetry(true)
}

// String describes the model's state, for a failing test.
func (w *RxeWriter) String() string {
	s := fmt.Sprintf("comp_psn %d, req_psn %d, req WQE %d, started_retry %v, need_retry %v",
		w.compPSN.Diff(w.PSN), w.reqPSN.Diff(w.PSN), w.reqIdx, w.startedRetry, w.needRetry)
	if w.cons < len(w.wqes) {
		q := &w.wqes[w.cons]
		s += fmt.Sprintf("; oldest WQE %d: state %d, PSNs %d-%d, %d bytes left", w.cons, q.state,
			q.firstPSN.Diff(w.PSN), q.last.Diff(w.PSN), q.resid)
	}
	return s
}
