package verbs_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// connectEnds makes two unconnected ends of type typ at 10.0.0.1 and
// 10.0.0.2.
func connectEnds(t *testing.T, f *fabric.Fabric, typ ibv.QPType) (a, b *end) {
	t.Helper()
	o := pairOpts{typ: typ}
	o.defaults()
	return newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o), newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
}

// TestConnect: Connect takes RC and UC QPs to RTS with the state
// table's attributes and DefaultConnectAttr's values, and a SEND crosses.
func TestConnect(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				a, b := connectEnds(t, f, typ)
				aMe, bMe := a.qp.Endpoint(0x1234), b.qp.Endpoint(0xabcde)
				must(t, a.qp.Connect(aMe, bMe, nil))
				must(t, b.qp.Connect(bMe, aMe, nil))

				attr, _ := a.qp.Query()
				def := verbs.DefaultConnectAttr(typ)
				if attr.State != ibv.QPStateRTS || attr.DestQPN != b.qp.QPN() || attr.RQPSN != 0xabcde ||
					attr.SQPSN != 0x1234 || attr.PathMTU != ibv.MTU1024 || attr.AccessFlags != def.Access ||
					attr.AHAttr.GRH.DGID != b.dev.Addr() {
					t.Errorf("a's QP after Connect: %+v", attr)
				}
				if typ == ibv.QPTypeRC && (attr.Timeout != 14 || attr.RetryCnt != 7 || attr.RNRRetry != 7 ||
					attr.MinRNRTimer != 12 || attr.MaxRdAtomic != 1 || attr.MaxDestRdAtomic != 1) {
					t.Errorf("RC requester/responder attributes after Connect: %+v", attr)
				}

				must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 7, SGList: []ibv.SGE{b.mr.SGE(0, 64)}}))
				copy(a.buf, "over the connection")
				must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
					SGList: []ibv.SGE{a.mr.SGE(0, 19)}}))
				if wc := waitWC(t, b.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.WRID != 7 || string(b.buf[:wc.ByteLen]) != "over the connection" {
					t.Fatalf("b received %+v %q", wc, b.buf[:wc.ByteLen])
				}
			})
		})
	}
}

// TestConnectUD: a UD QP connects without a peer, with the default
// Q_Key, and a datagram addressed by an AH arrives.
func TestConnectUD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := connectEnds(t, f, ibv.QPTypeUD)
		must(t, a.qp.Connect(a.qp.Endpoint(1), verbs.Endpoint{}, nil))
		must(t, b.qp.ToInit(nil))
		must(t, b.qp.ToRTR(verbs.Endpoint{}, nil))
		must(t, b.qp.ToRTS(2, nil))
		for _, e := range []*end{a, b} {
			if attr, _ := e.qp.Query(); attr.State != ibv.QPStateRTS || attr.QKey != verbs.DefaultQKey {
				t.Fatalf("UD QP after connecting: state %v, qkey %#x", attr.State, attr.QKey)
			}
		}
		ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
		must(t, err)
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{b.mr.SGE(0, 40+16)}}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 16)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: verbs.DefaultQKey}))
		if wc := waitWC(t, b.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.WRID != 9 || wc.SrcQP != a.qp.QPN() {
			t.Fatalf("b received %+v", wc)
		}
	})
}

// TestConnectErrors: a wrong attribute, endpoint or state is EINVAL
// naming what is wrong, and the QP stays in the state it reached.
func TestConnectErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		rc, peer := connectEnds(t, f, ibv.QPTypeRC)
		f2 := fabric.New(fabric.Config{Seed: 2})
		defer f2.Close()
		ud, _ := connectEnds(t, f2, ibv.QPTypeUD)
		me, them := rc.qp.Endpoint(0), peer.qp.Endpoint(0)
		reset := func(qp *verbs.QP) {
			must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState))
		}
		for _, tc := range []struct {
			name      string
			qp        *verbs.QP
			connect   func() error
			want      string // in the error text
			wantState ibv.QPState
		}{
			{"path MTU 0", rc.qp, func() error {
				a := verbs.DefaultConnectAttr(ibv.QPTypeRC)
				a.PathMTU = 0
				return rc.qp.Connect(me, them, &a)
			}, "IBV_QP_PATH_MTU", ibv.QPStateInit},
			{"timeout 40", rc.qp, func() error {
				a := verbs.DefaultConnectAttr(ibv.QPTypeRC)
				a.Timeout = 40
				return rc.qp.Connect(me, them, &a)
			}, "IBV_QP_TIMEOUT", ibv.QPStateRTR},
			{"no remote GID", rc.qp, func() error {
				return rc.qp.Connect(me, verbs.Endpoint{QPN: them.QPN}, nil)
			}, "IBV_QP_AV", ibv.QPStateInit},
			{"PSN over 24 bits", rc.qp, func() error {
				return rc.qp.Connect(rc.qp.Endpoint(1<<24), them, nil)
			}, "IBV_QP_SQ_PSN", ibv.QPStateRTR},
			{"local endpoint of another QP", rc.qp, func() error {
				return rc.qp.Connect(them, me, nil)
			}, "local endpoint", ibv.QPStateReset},
			{"UD with a remote", ud.qp, func() error {
				return ud.qp.Connect(ud.qp.Endpoint(0), them, nil)
			}, "UD QP has no remote", ibv.QPStateReset},
			{"ToRTS from INIT", rc.qp, func() error {
				must(t, rc.qp.ToInit(nil))
				return rc.qp.ToRTS(0, nil)
			}, "INIT->RTS", ibv.QPStateInit},
			{"Connect from RTS", rc.qp, func() error {
				must(t, rc.qp.Connect(me, them, nil))
				return rc.qp.Connect(me, them, nil)
			}, "RTS->INIT", ibv.QPStateRTS},
			{"nil QP", nil, func() error {
				return (*verbs.QP)(nil).Connect(me, them, nil)
			}, "nil", ibv.QPStateUnknown},
		} {
			err := tc.connect()
			t.Logf("%s: %v", tc.name, err)
			if !errors.Is(err, verbs.EINVAL) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want EINVAL naming %q", tc.name, err, tc.want)
			}
			if tc.qp == nil {
				continue
			}
			if s := tc.qp.State(); s != tc.wantState {
				t.Errorf("%s: QP left in %v, want %v", tc.name, s, tc.wantState)
			}
			reset(tc.qp)
		}
	})
}
