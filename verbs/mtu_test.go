package verbs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestPortMTUFollowsLink: with Config.PortMTU unset, the port's active
// MTU is what rxe derives from the netdev MTU (rxe_set_mtu), read from the
// link at each query, so an interface MTU change shows at once; max_mtu
// stays 4096; an explicit Config.PortMTU wins.
func TestPortMTUFollowsLink(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	ep, err := f.Attach(netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: ep})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if pa, _ := dev.QueryPort(1); pa.ActiveMTU != ibv.MTU4096 || pa.MaxMTU != ibv.MTU4096 {
		t.Fatalf("default endpoint (MTU %d): active %v max %v, want 4096 4096", ep.MTU(), pa.ActiveMTU, pa.MaxMTU)
	}
	for _, c := range []struct {
		netdev int
		want   ibv.MTU
	}{
		{1500, ibv.MTU1024}, {9000, ibv.MTU4096}, {4175, ibv.MTU2048}, {4176, ibv.MTU4096},
		{1103, ibv.MTU512}, {1104, ibv.MTU1024}, {576, ibv.MTU256}, {68, ibv.MTU256},
		{65536, ibv.MTU4096},
	} {
		must(t, ep.SetMTU(c.netdev))
		pa, err := dev.QueryPort(1)
		must(t, err)
		if pa.ActiveMTU != c.want || pa.MaxMTU != ibv.MTU4096 {
			t.Errorf("netdev MTU %d: active %v max %v, want %v and 4096", c.netdev, pa.ActiveMTU, pa.MaxMTU, c.want)
		}
	}

	ep2, err := f.Attach(netip.MustParseAddr("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, ep2.SetMTU(1500))
	fixed, err := verbs.Open(verbs.Config{Link: ep2, PortMTU: ibv.MTU2048})
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	if pa, _ := fixed.QueryPort(1); pa.ActiveMTU != ibv.MTU2048 {
		t.Errorf("Config.PortMTU 2048 on a 1500 link: active %v, want 2048", pa.ActiveMTU)
	}
}

// TestUDSendFollowsPortMTU: a UD QP created on a 1500-byte link completes
// a 1025-byte send successfully without a packet (C10-93.1.1; rxe_req.c
// "fake a successful UD send") and delivers 1024 bytes; after the
// interface's MTU rises to 9000 the same QP sends 4096 (rxe_req.c get_mtu
// reads port.mtu_cap at each send).
func TestUDSendFollowsPortMTU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 7})
		defer f.Close()
		tp := newTap(f)
		epA := attachMTU(t, f, "10.0.0.1", 1500)
		a := udEndOn(t, epA)
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 1})
		ah := a.ahTo(t, b, 0, 0, 0)
		b.postRecvs(t, 3, 0, 8192, 1)

		a.send(t, ah, b.qp.QPN(), 1, 1, 0, 1025)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.ByteLen != 1025 {
			t.Fatalf("1025 bytes on MTU 1024: completion %+v, want success", w)
		}
		synctest.Wait()
		if n := len(tp.all()); n != 0 {
			t.Fatalf("%d datagrams sent for a message over the port MTU", n)
		}
		a.send(t, ah, b.qp.QPN(), 1, 2, 0, 1024)
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.ByteLen != 40+1024 {
			t.Fatalf("recv of 1024 bytes: %+v", w)
		}

		must(t, epA.SetMTU(9000))
		a.send(t, ah, b.qp.QPN(), 1, 3, 0, 4096)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("4096 bytes on MTU 4096: %+v", w)
		}
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.ByteLen != 40+4096 {
			t.Fatalf("recv of 4096 bytes after the MTU change: %+v", w)
		}
		if st := epA.Stats(); st.DropOversize.Packets != 0 {
			t.Fatalf("fabric dropped %d oversize datagrams: the QP sent past the MTU", st.DropOversize.Packets)
		}
	})
}

// TestPathMTUAgainstMaxMTU: modify_qp checks the path MTU against the
// port's max_mtu (4096), not its active MTU (rxe_qp.c rxe_qp_chk_attr):
// on a 1500-byte link a path MTU of 4096 is accepted, and a 4096-byte
// WRITE then leaves in packets the link refuses, as rxe's do on such a
// netdev (counted by the fabric as DropOversize, the kernel's EMSGSIZE);
// an enum above 4096 is EINVAL.
func TestPathMTUAgainstMaxMTU(t *testing.T) {
	for _, mtu := range []ibv.MTU{ibv.MTU1024, ibv.MTU4096} {
		t.Run(fmt.Sprint(mtu.Bytes()), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 3})
				defer f.Close()
				o := pairOpts{mtu: mtu, timeout: 14, retry: 1}
				o.defaults()
				epA := attachMTU(t, f, "10.0.0.1", 1500)
				a := newEndOn(t, epA, o)
				b := newEndOn(t, attachMTU(t, f, "10.0.0.2", 1500), o)
				connect(t, a, b, o, 0, 0)
				connect(t, b, a, o, 0, 0)
				if pa, _ := a.dev.QueryPort(1); pa.ActiveMTU != ibv.MTU1024 {
					t.Fatalf("active MTU %v, want 1024", pa.ActiveMTU)
				}
				must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
					SGList: []ibv.SGE{a.mr.SGE(0, 4096)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
				w := waitWC(t, a.cq, 1)[0]
				drops := epA.Stats().DropOversize.Packets
				if mtu == ibv.MTU1024 {
					if w.Status != ibv.WCSuccess || drops != 0 {
						t.Fatalf("path MTU 1024: %v, %d oversize drops; want success, 0", w.Status, drops)
					}
					return
				}
				if w.Status != ibv.WCRetryExcErr || drops == 0 {
					t.Fatalf("path MTU 4096 on a 1500 link: %v, %d oversize drops; want retry exceeded, > 0", w.Status, drops)
				}
			})
		})
	}
	f := fabric.New(fabric.Config{Seed: 3})
	defer f.Close()
	o := pairOpts{}
	o.defaults()
	e := newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o)
	must(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
	err := e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU4096 + 1, DestQPN: 0x11,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr("10.0.0.2"), HopLimit: 1}}},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer)
	if !errors.Is(err, verbs.EINVAL) {
		t.Fatalf("path MTU enum 6: %v, want EINVAL", err)
	}
}

// attachMTU attaches an endpoint at addr with interface MTU mtu.
func attachMTU(t testing.TB, f *fabric.Fabric, addr string, mtu int) *fabric.Endpoint {
	t.Helper()
	ep, err := f.Attach(netip.MustParseAddr(addr))
	must(t, err)
	must(t, ep.SetMTU(mtu))
	return ep
}

// udEndOn is newUDEnd (Q_Key 1, the port MTU following the link) on an
// endpoint the caller attached.
func udEndOn(t testing.TB, ep *fabric.Endpoint) *udEnd {
	t.Helper()
	dev, err := verbs.Open(verbs.Config{Link: ep})
	must(t, err)
	t.Cleanup(func() { dev.Close() })
	e := &udEnd{dev: dev, buf: make([]byte, 1<<16)}
	if e.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = dev.CreateCQ(256, nil); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	e.qp = newUDQP(t, e.pd, e.cq, udOpts{qkey: 1})
	return e
}
