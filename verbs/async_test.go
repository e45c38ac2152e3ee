package verbs_test

// Asynchronous events through GetAsyncEvent/AckAsyncEvent: each fires
// exactly when it should, once; acknowledgements gate destroys; destroyed
// objects take their queued events with them.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// getEvents takes every event dev has queued (GetAsyncEvent until a
// millisecond of fake time passes without one), acknowledging each
// unless keep is set.
func getEvents(t testing.TB, dev *verbs.Device, keep bool) []ibv.AsyncEvent {
	t.Helper()
	var evs []ibv.AsyncEvent
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		ev, err := dev.GetAsyncEvent(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return evs
		}
		if err != nil {
			t.Fatalf("GetAsyncEvent: %v", err)
		}
		if !keep {
			must(t, dev.AckAsyncEvent(ev))
		}
		evs = append(evs, ev)
	}
}

// eventNames renders events for comparisons: "TYPE" or "TYPE QP 0x11".
func eventNames(evs []ibv.AsyncEvent) []string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev.String())
	}
	return s
}

// wantEventsExactly checks that evs are exactly want, in order.
func wantEventsExactly(t testing.TB, what string, evs []ibv.AsyncEvent, want ...string) {
	t.Helper()
	if got := eventNames(evs); !slices.Equal(got, want) {
		t.Errorf("%s: events %q, want %q", what, got, want)
	}
}

func qpEv(typ ibv.AsyncEventType, qp *verbs.QP) string {
	return fmt.Sprintf("%v QP %#x", typ, qp.QPN())
}

// TestAsyncEventNames: String gives each type's enum name.
func TestAsyncEventNames(t *testing.T) {
	for typ, want := range map[ibv.AsyncEventType]string{
		ibv.EventCQErr: "CQ_ERR", ibv.EventQPFatal: "QP_FATAL", ibv.EventQPReqErr: "QP_REQ_ERR",
		ibv.EventQPAccessErr: "QP_ACCESS_ERR", ibv.EventCommEst: "COMM_EST", ibv.EventSQDrained: "SQ_DRAINED",
		ibv.EventPathMig: "PATH_MIG", ibv.EventPathMigErr: "PATH_MIG_ERR", ibv.EventDeviceFatal: "DEVICE_FATAL",
		ibv.EventPortActive: "PORT_ACTIVE", ibv.EventPortErr: "PORT_ERR", ibv.EventLIDChange: "LID_CHANGE",
		ibv.EventPKeyChange: "PKEY_CHANGE", ibv.EventSMChange: "SM_CHANGE", ibv.EventSRQErr: "SRQ_ERR",
		ibv.EventSRQLimitReached: "SRQ_LIMIT_REACHED", ibv.EventQPLastWQEReached: "QP_LAST_WQE_REACHED",
		ibv.EventClientReregister: "CLIENT_REREGISTER", ibv.EventGIDChange: "GID_CHANGE",
		ibv.EventWQFatal: "WQ_FATAL", ibv.AsyncEventType(200): "AsyncEventType(200)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("AsyncEventType(%d).String() = %q, want %q", uint8(typ), got, want)
		}
	}
}

// TestAsyncPortActive: a device opens with one PORT_ACTIVE, then nothing;
// GetAsyncEvent waits, returns the context's error as is, and ENODEV once
// the device is closed; acknowledgements are counted.
func TestAsyncPortActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := openDev(t, f, "10.0.0.1", 0)
		ev, err := dev.GetAsyncEvent(t.Context())
		must(t, err)
		if ev.Type != ibv.EventPortActive || ev.Other != nil || ev.QPN != 0 {
			t.Fatalf("first event %+v, want PORT_ACTIVE about nothing", ev)
		}
		must(t, dev.AckAsyncEvent(ev))
		if err := dev.AckAsyncEvent(ev); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("second ack: %v, want EINVAL", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := dev.GetAsyncEvent(ctx); err != context.DeadlineExceeded {
			t.Fatalf("GetAsyncEvent with nothing queued: %v, want %v", err, context.DeadlineExceeded)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("GetAsyncEvent returned after %v, want the context's second", d)
		}
		// A waiter is released by Close.
		done := make(chan error)
		go func() {
			_, err := dev.GetAsyncEvent(t.Context())
			done <- err
		}()
		synctest.Wait()
		must(t, dev.Close())
		if err := <-done; !errors.Is(err, verbs.ENODEV) {
			t.Errorf("GetAsyncEvent across Close: %v, want ENODEV", err)
		}
		var zero verbs.Device
		if _, err := zero.GetAsyncEvent(t.Context()); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("GetAsyncEvent on a zero Device: %v, want EINVAL", err)
		}
	})
}

// TestAsyncQPFatal: a QP that exhausts its retries goes to ERR on its own
// and raises QP_FATAL once, about it (QPN and *QP); a QP moved to ERR by
// Modify, from RTS or RESET, or drained, raises nothing. The QP cannot be
// destroyed until the event is acknowledged.
func TestAsyncQPFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{timeout: 8, retry: 2})
		getEvents(t, a.dev, false)
		getEvents(t, b.dev, false)

		remove := f.AddFilter(fabric.DropIf(from(b))) // no ACK ever comes back
		post(t, a, rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, 64))
		wantWC(t, waitWC(t, a.cq, 1)[0], 1, ibv.WCRetryExcErr, ibv.WCRDMAWrite)
		remove()
		settle(time.Second)
		evs := getEvents(t, a.dev, true)
		wantEventsExactly(t, "retries exhausted", evs, qpEv(ibv.EventQPFatal, a.qp))
		if len(evs) == 1 && evs[0].Other != a.qp {
			t.Errorf("QP_FATAL's Other is %v, want the *QP", evs[0].Other)
		}
		if err := a.qp.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("Destroy with the event not acknowledged: %v, want EBUSY", err)
		}
		// Still in ERR: nothing more, even when modified to ERR again.
		modify(t, a, ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		wantEventsExactly(t, "ERR to ERR", getEvents(t, a.dev, false))
		must(t, a.dev.AckAsyncEvent(evs[0]))

		// Modify to ERR, from RTS and from INIT, and a drain: no event.
		toInit := ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}
		initMask := ibv.QPAttrState | ibv.QPAttrPort | ibv.QPAttrPKeyIndex | ibv.QPAttrAccessFlags
		modify(t, b, ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		modify(t, b, ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState)
		modify(t, b, toInit, initMask)
		modify(t, b, ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		modify(t, b, ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState)
		connect(t, b, a, pairOpts{typ: ibv.QPTypeRC, mtu: ibv.MTU1024}, 0, 0)
		must(t, b.qp.DrainQP(t.Context()))
		wantEventsExactly(t, "modify and drain", getEvents(t, b.dev, false))
		must(t, a.qp.Destroy())
	})
}

// TestAsyncResponderErrors: a WRITE the responder's QP access flags do
// not allow raises QP_REQ_ERR then QP_FATAL on the responder and QP_FATAL
// on the requester, each once; a WRITE with a bad rkey raises
// QP_ACCESS_ERR then QP_FATAL likewise.
func TestAsyncResponderErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		wr   func(t *testing.T, a, b *end) ibv.SendWR
		ev   ibv.AsyncEventType
	}{
		{"invalid request", func(t *testing.T, a, b *end) ibv.SendWR {
			modify(t, b, ibv.QPAttr{AccessFlags: ibv.AccessRemoteRead}, ibv.QPAttrAccessFlags)
			return rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, 64)
		}, ibv.EventQPReqErr},
		{"access error", func(t *testing.T, a, b *end) ibv.SendWR {
			w := rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, 64)
			w.RKey ^= 0x80
			return w
		}, ibv.EventQPAccessErr},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 2})
				defer f.Close()
				a, b := newPair(t, f, pairOpts{timeout: 14, retry: 7})
				getEvents(t, a.dev, false)
				getEvents(t, b.dev, false)
				post(t, a, c.wr(t, a, b))
				waitWC(t, a.cq, 1)
				settle(time.Second)
				wantEventsExactly(t, "responder", getEvents(t, b.dev, false), qpEv(c.ev, b.qp), qpEv(ibv.EventQPFatal, b.qp))
				wantEventsExactly(t, "requester", getEvents(t, a.dev, false), qpEv(ibv.EventQPFatal, a.qp))
			})
		})
	}
}

// TestAsyncPathMigration: RoCE has no alternate path, so path migration
// is never armed: QPAttrAltPath is refused, QPAttrPathMigState only
// takes IBV_MIG_MIGRATED (0), and no PATH_MIG or PATH_MIG_ERR is raised.
func TestAsyncPathMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := newPair(t, f, pairOpts{})
		getEvents(t, a.dev, false)
		before, _ := a.qp.Query()
		for _, mig := range []uint8{1, 2} { // IBV_MIG_REARM, IBV_MIG_ARMED
			err := a.qp.Modify(&ibv.QPAttr{PathMigState: mig}, ibv.QPAttrPathMigState)
			if !errors.Is(err, verbs.EINVAL) || !strings.Contains(err.Error(), "IBV_QP_PATH_MIG_STATE") {
				t.Errorf("path_mig_state %d: %v, want EINVAL naming IBV_QP_PATH_MIG_STATE", mig, err)
			}
		}
		err := a.qp.Modify(&ibv.QPAttr{AltPortNum: 1, AltTimeout: 14}, ibv.QPAttrAltPath)
		if !errors.Is(err, verbs.EINVAL) || !strings.Contains(err.Error(), "IBV_QP_ALT_PATH") {
			t.Errorf("alternate path: %v, want EINVAL naming IBV_QP_ALT_PATH", err)
		}
		if after, _ := a.qp.Query(); after != before {
			t.Errorf("refused modifies changed the QP:\n got %+v\nwant %+v", after, before)
		}
		must(t, a.qp.Modify(&ibv.QPAttr{PathMigState: 0}, ibv.QPAttrPathMigState))
		settle(time.Second)
		wantEventsExactly(t, "path migration", getEvents(t, a.dev, false))
	})
}

// TestAsyncCQErr: a CQ that overruns raises CQ_ERR once, about it, and
// its QP QP_FATAL once; neither can be destroyed before its event is
// acknowledged (the CQ also not before the QP).
func TestAsyncCQErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{cqe: 1})
		getEvents(t, a.dev, false)
		for i := range 4 {
			post(t, a, rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, 0, 0, 8))
		}
		settle(time.Second)
		evs := getEvents(t, a.dev, true)
		wantEventsExactly(t, "overrun", evs, "CQ_ERR *verbs.CQ", qpEv(ibv.EventQPFatal, a.qp))
		if len(evs) != 2 || evs[0].Other != a.cq {
			t.Fatalf("CQ_ERR about %v, want the CQ", evs[0].Other)
		}
		if err := a.qp.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("QP Destroy before the ack: %v, want EBUSY", err)
		}
		must(t, a.dev.AckAsyncEvent(evs[1]))
		must(t, a.qp.Destroy())
		if err := a.cq.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("CQ Destroy before the ack: %v, want EBUSY", err)
		}
		must(t, a.dev.AckAsyncEvent(evs[0]))
		must(t, a.cq.Destroy())
	})
}

// TestAsyncSQDrained: RTS→SQD with QPAttrEnSQDAsyncNotify raises
// SQ_DRAINED once, only when the WRITEs in flight have completed;
// without it, nothing.
func TestAsyncSQDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		f.SetImpairment(fabric.Impairment{Delay: time.Millisecond})
		a, b := newPair(t, f, pairOpts{})
		getEvents(t, a.dev, false)
		for i := range 8 {
			post(t, a, rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, 0, 0, 4096))
		}
		synctest.Wait()
		modify(t, a, ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: true},
			ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify)
		wantEventsExactly(t, "WRITEs in flight", getEvents(t, a.dev, false))
		waitWC(t, a.cq, 8)
		settle(time.Millisecond)
		wantEventsExactly(t, "drained", getEvents(t, a.dev, false), qpEv(ibv.EventSQDrained, a.qp))
		settle(time.Second)
		wantEventsExactly(t, "later", getEvents(t, a.dev, false))

		modify(t, a, ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState)
		modify(t, a, ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: false},
			ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify)
		settle(time.Second)
		wantEventsExactly(t, "without notify", getEvents(t, a.dev, false))
	})
}

// TestAsyncSRQEvents: SRQ_LIMIT_REACHED once per arming, about the *SRQ;
// LAST_WQE_REACHED once per stay in ERR of a QP on the SRQ; the SRQ
// cannot be destroyed before its event is acknowledged, and a destroyed
// QP takes its queued events with it.
func TestAsyncSRQEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 3})
		defer f.Close()
		s := newSRQServer(t, f, "10.0.0.100", 8, 256)
		c, sq := rcClient(t, f, "10.0.0.1", s, pairOpts{typ: ibv.QPTypeRC, timeout: 14, retry: 7, rnr: 7})
		getEvents(t, s.dev, false)
		must(t, s.srq.Modify(&ibv.SRQAttr{SRQLimit: 6}, ibv.SRQAttrLimit))
		for i := range 4 {
			post(t, c, sendWR(c, uint64(i), ibv.WRSend, 0, 64))
		}
		waitWC(t, s.cq, 4)
		settle(time.Millisecond)
		evs := getEvents(t, s.dev, true)
		wantEventsExactly(t, "limit", evs, "SRQ_LIMIT_REACHED *verbs.SRQ")
		if len(evs) == 1 && evs[0].Other != s.srq {
			t.Errorf("SRQ_LIMIT_REACHED about %v, want the SRQ", evs[0].Other)
		}

		modify(t, &end{qp: sq}, ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		modify(t, &end{qp: sq}, ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		wantEventsExactly(t, "QP to ERR", getEvents(t, s.dev, false), qpEv(ibv.EventQPLastWQEReached, sq))

		// A queued event goes with its QP.
		modify(t, &end{qp: sq}, ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState)
		modify(t, &end{qp: sq}, ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1},
			ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex|ibv.QPAttrAccessFlags)
		modify(t, &end{qp: sq}, ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		must(t, sq.Destroy())
		wantEventsExactly(t, "after destroy", getEvents(t, s.dev, false))

		if err := s.srq.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("SRQ Destroy before the ack: %v, want EBUSY", err)
		}
		must(t, s.dev.AckAsyncEvent(evs[0]))
		must(t, s.srq.Destroy())
	})
}
