package toolnic_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// peerEnd is one side of an RC pair on the fabric.
type peerEnd struct {
	dev *verbs.Device
	mr  *verbs.MR
	cq  *verbs.CQ
	qp  *verbs.QP
}

func openPeerEnd(t *testing.T, f *fabric.Fabric, addr string, typ ibv.QPType) *peerEnd {
	t.Helper()
	ep, err := f.Attach(netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	e := &peerEnd{}
	if e.dev, err = verbs.Open(verbs.Config{Link: ep}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.dev.Close() })
	pd, err := e.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if e.mr, err = pd.RegMR(make([]byte, 4096), ibv.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = e.dev.CreateCQ(16, nil); err != nil {
		t.Fatal(err)
	}
	e.qp, err = pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// connectPeer takes e's QP to RTS towards peer with the given local ACK
// timeout, retry_cnt and rnr_retry.
func connectPeer(t *testing.T, e, peer *peerEnd, timeout, retry, rnr uint8) {
	t.Helper()
	gid, err := peer.dev.QueryGID(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		attr ibv.QPAttr
		mask ibv.AttrMask
	}{
		{ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrAccessFlags},
		{ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: peer.qp.QPN(), MaxDestRdAtomic: 1, MinRNRTimer: 1,
			AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: gid.Addr(), HopLimit: 1}}},
			ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN |
				ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer},
		{ibv.QPAttr{State: ibv.QPStateRTS, Timeout: timeout, RetryCnt: retry, RNRRetry: rnr, MaxRdAtomic: 1},
			ibv.QPAttrState | ibv.QPAttrSQPSN | ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := e.qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *peerEnd) send(t *testing.T, wrid uint64) {
	t.Helper()
	if _, err := e.qp.PostSend(ibv.SendWR{WRID: wrid, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{e.mr.SGE(0, 64)}}); err != nil {
		t.Fatal(err)
	}
}

const timeout14 = 4096 << 14 * time.Nanosecond

// A peer that answers nothing: AwaitPeerError returns, (retry_cnt+1)
// local ACK timeouts after the SEND, the error that names it - the QP's
// retry_cnt included, 7 too - and RetryBound is that time.
func TestAwaitPeerErrorDeadPeer(t *testing.T) {
	for _, retry := range []uint8{0, 3, 7} {
		t.Run(string('0'+retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				a := openPeerEnd(t, f, "10.0.0.1", ibv.QPTypeRC)
				b := openPeerEnd(t, f, "10.0.0.2", ibv.QPTypeRC)
				connectPeer(t, a, b, 14, retry, 7)
				connectPeer(t, b, a, 14, retry, 7)
				f.AddFilter(fabric.DropIf(fabric.From(b.dev.Addr())))

				bound := toolnic.RetryBound(a.qp)
				if want := time.Duration(retry+1) * timeout14; bound != want {
					t.Fatalf("RetryBound %v, want %v", bound, want)
				}
				start := time.Now()
				a.send(t, 1)
				err := toolnic.AwaitPeerError(context.Background(), bound+time.Millisecond, []*verbs.CQ{a.cq}, []*verbs.QP{a.qp})
				took := time.Since(start)
				var re *toolnic.ErrRetryExceeded
				if !errors.As(err, &re) || re.RNR || re.Retries != retry {
					t.Fatalf("got %#v, want a transport ErrRetryExceeded with %d retries", err, retry)
				}
				want := "peer stopped answering: transport retry counter exceeded after " + string('0'+retry) + " retries"
				if err.Error() != want {
					t.Errorf("message %q, want %q", err.Error(), want)
				}
				if took < bound || took > bound+time.Millisecond {
					t.Errorf("verdict after %v, want %v", took, bound)
				}
			})
		})
	}
}

// A peer that posts no receive: RNR_RETRY_EXC_ERR after rnr_retry RNR
// NAKs is "peer not ready".
func TestPeerErrorRNR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a := openPeerEnd(t, f, "10.0.0.1", ibv.QPTypeRC)
		b := openPeerEnd(t, f, "10.0.0.2", ibv.QPTypeRC)
		connectPeer(t, a, b, 14, 7, 2)
		connectPeer(t, b, a, 14, 7, 2)
		a.send(t, 1)
		err := toolnic.AwaitPeerError(context.Background(), time.Second, []*verbs.CQ{a.cq}, []*verbs.QP{a.qp})
		if want := "peer not ready: RNR retry counter exceeded after 2 retries"; err == nil || err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
	})
}

// Nothing in flight, or a completion that is not about the peer: no
// verdict, after the whole wait; no bound without an RC retransmit timer.
func TestAwaitPeerErrorNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a := openPeerEnd(t, f, "10.0.0.1", ibv.QPTypeRC)
		b := openPeerEnd(t, f, "10.0.0.2", ibv.QPTypeRC)
		connectPeer(t, a, b, 14, 7, 7)
		connectPeer(t, b, a, 0, 7, 7)
		if _, err := b.qp.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		a.send(t, 1)
		start := time.Now()
		if err := toolnic.AwaitPeerError(context.Background(), time.Second, []*verbs.CQ{a.cq}, []*verbs.QP{a.qp}); err != nil {
			t.Fatalf("got %v for a peer that answered", err)
		}
		if took := time.Since(start); took < time.Second {
			t.Errorf("gave up after %v, want the whole second", took)
		}
		if got := toolnic.PeerError(ibv.WorkCompletion{Status: ibv.WCRemAccessErr}, a.qp); got != nil {
			t.Errorf("PeerError(REM_ACCESS_ERR) = %v, want nil", got)
		}
		if got := toolnic.RetryBound(b.qp); got != 0 {
			t.Errorf("RetryBound with timeout 0: %v, want 0", got)
		}
		u := openPeerEnd(t, f, "10.0.0.3", ibv.QPTypeUC)
		if got := toolnic.RetryBound(u.qp); got != 0 {
			t.Errorf("RetryBound of a UC QP: %v, want 0", got)
		}
	})
}
