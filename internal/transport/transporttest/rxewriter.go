package transporttest

import (
	"fmt"
	"time"

	"github.com/softnic/softnic/wire"
)

// RxeWriter is a model of rxe's RC requester and completer sending RDMA
// WRITEs, as ib_write_bw over rxe runs them against softnic's responder
// in the interop bed: what rxe_req.c and rxe_comp.c do with the
// responder's ACKs and NAKs, not how fast. It keeps at most
// RxeMaxUnacked PSNs unacknowledged (RXE_MAX_UNACKED_PSNS), asks for an
// ACK on each WRITE's last packet, goes back to a PSN sequence NAK's PSN
// unless a retry is under way already (comp.started_retry, cleared by an
// ACK that moves it on), and when its retransmit timer expires without
// progress goes back to its oldest unacknowledged PSN — for ever, as a
// retry count of 7 means to rxe (rxe_comp.c COMPST_ERROR_RETRY).
//
// It sends through Send, which fills in the BTH's destination QP and
// P_Key; the caller hands it each response (Answer) and the time (Tick).
type RxeWriter struct {
	Send    func(h wire.Headers, payload []byte)
	PSN     wire.PSN      // the first PSN
	Size    int           // bytes of each WRITE, a multiple of RxeMTU
	VA      uint64        // the target of the first WRITE; each follows the one before
	RKey    uint32        // the target's
	Data    []byte        // what the WRITEs carry, Size each
	Timeout time.Duration // the retransmit timer's (timeout 14: 67 ms)

	comp    int // the oldest PSN not acknowledged, from PSN
	req     int // the next PSN to send, from PSN
	retry   bool
	started time.Time // the retransmit timer's
	// Retries counts the retransmit timer's expiries.
	Retries int
}

const (
	// RxeMaxUnacked is rxe's window: RXE_MAX_UNACKED_PSNS.
	RxeMaxUnacked = 128
	// RxeMTU is the path MTU RxeWriter's packets fill.
	RxeMTU = 1024
)

func (w *RxeWriter) perWQE() int { return w.Size / RxeMTU }

// Total is the packets of every WRITE.
func (w *RxeWriter) Total() int { return len(w.Data) / RxeMTU }

// Acked is the packets acknowledged, from the first.
func (w *RxeWriter) Acked() int { return w.comp }

// Next is the offset of the next packet the requester sends.
func (w *RxeWriter) Next() int { return w.req }

// Done reports whether every packet was acknowledged.
func (w *RxeWriter) Done() bool { return w.comp >= w.Total() }

// Start starts the retransmit timer at now.
func (w *RxeWriter) Start(now time.Time) { w.started = now }

// Pump sends what the window allows.
func (w *RxeWriter) Pump() {
	for w.req < w.Total() && w.req < w.comp+RxeMaxUnacked {
		w.send(w.req)
		w.req++
	}
}

// send sends packet i (PSN PSN+i).
func (w *RxeWriter) send(i int) {
	per := w.perWQE()
	j := i % per
	h := wire.Headers{BTH: wire.BTHFields{PSN: w.PSN.Add(uint32(i))}}
	switch {
	case per == 1:
		h.BTH.Opcode = wire.RCWriteOnly
	case j == 0:
		h.BTH.Opcode = wire.RCWriteFirst
	case j == per-1:
		h.BTH.Opcode = wire.RCWriteLast
	default:
		h.BTH.Opcode = wire.RCWriteMiddle
	}
	if j == 0 {
		wqe := i / per
		h.RETH = wire.RETHFields{VA: w.VA + uint64(wqe*w.Size), RKey: w.RKey, DMALen: uint32(w.Size)}
	}
	h.BTH.AckReq = j == per-1
	w.Send(h, w.Data[i*RxeMTU:(i+1)*RxeMTU])
}

// Answer takes one response at now: an ACK acknowledges every PSN up to
// its own, a PSN sequence NAK every one before its own and starts a
// go-back-N. Anything else is an error (a WRITE to a valid MR has no
// other answer).
func (w *RxeWriter) Answer(p *wire.Packet, now time.Time) error {
	if p.Opcode != wire.RCAck {
		return fmt.Errorf("the responder sent %v", p.Opcode)
	}
	off := int(p.PSN().Diff(w.PSN))
	switch syn := p.AETH().Syndrome(); {
	case syn.IsACK():
		if off >= w.comp {
			w.comp, w.retry, w.started = off+1, false, now
			w.req = max(w.req, w.comp)
		}
	case syn == wire.NakPSNSequence:
		if off > w.comp {
			w.comp, w.started = off, now
		}
		if !w.retry {
			w.req, w.retry = w.comp, true
		}
	default:
		return fmt.Errorf("the responder sent %v/%d with %v", p.Opcode, off, syn)
	}
	return nil
}

// Tick goes back to the oldest PSN not acknowledged when the retransmit
// timer expired at now.
func (w *RxeWriter) Tick(now time.Time) {
	if now.Sub(w.started) >= w.Timeout {
		w.req, w.started = w.comp, now
		w.Retries++
	}
}
