package verbs_test

// The port follows its link as rxe's follows its netdev (rxe_net.c
// rxe_notify, rxe_port_up / rxe_port_down): its state and physical state,
// PORT_ERR and PORT_ACTIVE, link_downed, the speed and width from the
// link's speed (ib_get_eth_speed); sent_pkts counts only what the link
// took; UD and UC learn of a down or closed link as rxe's requester does
// (IBV_WC_LOC_QP_OP_ERR), RC recovers by retrying. The UDP link's side,
// an interface set down in a network namespace, is tested in package
// link (TestUDPLinkFollowsInterfaceState).

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
)

// endpoint returns the fabric endpoint dev was opened on.
func endpoint(t testing.TB, dev *verbs.Device) *fabric.Endpoint {
	t.Helper()
	ep, ok := dev.Link().(*fabric.Endpoint)
	if !ok {
		t.Fatalf("device link %T, want a fabric endpoint", dev.Link())
	}
	return ep
}

// portWant is what QueryPort must say of the port's state and link.
type portWant struct {
	state, phys, speed, width uint8
}

func wantPort(t testing.TB, what string, dev *verbs.Device, want portWant) {
	t.Helper()
	p, err := dev.QueryPort(1)
	must(t, err)
	if got := (portWant{p.State, p.PhysState, p.ActiveSpeed, p.ActiveWidth}); got != want {
		t.Errorf("%s: QueryPort state %v phys %d speed %d width %d, want %v phys %d speed %d width %d", what,
			verbs.PortState(got.state), got.phys, got.speed, got.width,
			verbs.PortState(want.state), want.phys, want.speed, want.width)
	}
}

var (
	portUp1X      = portWant{uint8(verbs.PortActive), 5, 1, 1} // LinkUp, SDR, 1X
	portDisabled  = portWant{uint8(verbs.PortDown), 3, 1, 1}   // Disabled
	portPolling   = portWant{uint8(verbs.PortDown), 2, 1, 1}   // Polling: up, no carrier
	portEDR1X     = portWant{uint8(verbs.PortActive), 5, 32, 1}
	portEDR4X     = portWant{uint8(verbs.PortActive), 5, 32, 2}
	portDownEDR4X = portWant{uint8(verbs.PortDown), 3, 1, 1} // a closed link is down, of unknown speed
)

// TestPortFollowsLink: the port of a device on a fabric endpoint follows
// the endpoint's state: taken down, PORT_ERR and link_downed once, DOWN
// and Disabled; up without a carrier, still DOWN but Polling, no event;
// with a carrier, PORT_ACTIVE and ACTIVE at the speed the link reports
// (25 Gb/s: 1X EDR; 100 Gb/s: 4X EDR); a speed change alone raises
// nothing; the endpoint closed under the device, PORT_ERR and DOWN for
// good. A device opened on a down link starts with PORT_ERR.
func TestPortFollowsLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := openDev(t, f, "10.0.0.1", 0)
		ep := endpoint(t, dev)
		wantEventsExactly(t, "open", getEvents(t, dev, false), "PORT_ACTIVE")
		wantPort(t, "open", dev, portUp1X)

		ep.SetLinkState(link.LinkState{})
		wantEventsExactly(t, "set down", getEvents(t, dev, false), "PORT_ERR")
		wantPort(t, "set down", dev, portDisabled)
		if n := dev.Counters().LinkDowned; n != 1 {
			t.Errorf("link_downed %d after the first fall, want 1", n)
		}
		ep.SetLinkState(link.LinkState{Up: true})
		wantEventsExactly(t, "up without a carrier", getEvents(t, dev, false))
		wantPort(t, "up without a carrier", dev, portPolling)

		ep.SetLinkState(link.LinkState{Up: true, Carrier: true, Speed: 25000})
		wantEventsExactly(t, "carrier", getEvents(t, dev, false), "PORT_ACTIVE")
		wantPort(t, "carrier at 25 Gb/s", dev, portEDR1X)
		ep.SetLinkState(link.LinkState{Up: true, Carrier: true, Speed: 100000})
		wantEventsExactly(t, "speed change", getEvents(t, dev, false))
		wantPort(t, "at 100 Gb/s", dev, portEDR4X)

		must(t, ep.Close())
		wantEventsExactly(t, "link closed", getEvents(t, dev, false), "PORT_ERR")
		wantPort(t, "link closed", dev, portDownEDR4X)
		if n := dev.Counters().LinkDowned; n != 2 {
			t.Errorf("link_downed %d after the link closed, want 2", n)
		}

		down, err := f.Attach(netip.MustParseAddr("10.0.0.2"))
		must(t, err)
		down.SetLinkState(link.LinkState{Up: true})
		dev2, err := verbs.Open(verbs.Config{Link: down})
		must(t, err)
		defer dev2.Close()
		wantEventsExactly(t, "open on a link without a carrier", getEvents(t, dev2, false), "PORT_ERR")
		wantPort(t, "open on a link without a carrier", dev2, portPolling)
		if n := dev2.Counters().LinkDowned; n != 1 {
			t.Errorf("link_downed %d, want 1 (rxe_enable_driver's rxe_set_port_state)", n)
		}
	})
}

// TestDownLinkUD: a UD SEND on a link that is down, or closed under the
// device, fails as rxe's requester fails it when its netdev has no route
// (IBV_WC_LOC_QP_OP_ERR, the QP to SQE), counts send_err and not
// sent_pkts, and puts nothing on the fabric; once the link is up and the
// QP back in RTS, the next SEND arrives.
func TestDownLinkUD(t *testing.T) {
	for _, how := range []string{"down", "closed"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 7})
				b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 7})
				b.postRecvs(t, 4, 0, 2048, 100)
				ah := a.ahTo(t, b, 0, 64, 0)
				ep := endpoint(t, a.dev)
				if how == "down" {
					ep.SetLinkState(link.LinkState{})
				} else {
					must(t, ep.Close())
				}
				before := a.dev.Counters()
				a.send(t, ah, b.qp.QPN(), 7, 1, 0, 100)
				wc := waitWC(t, a.cq, 1)[0]
				if wc.Status != ibv.WCLocQPOpErr || wc.WRID != 1 {
					t.Fatalf("SEND on a %s link: %v WRID %d, want LOC_QP_OP_ERR WRID 1", how, wc.Status, wc.WRID)
				}
				if s := a.qp.State(); s != ibv.QPStateSQE {
					t.Errorf("QP state %v after the failed SEND, want SQE", s)
				}
				after := a.dev.Counters()
				if after.SentPkts != before.SentPkts || after.SendErr <= before.SendErr {
					t.Errorf("sent_pkts %d -> %d, send_err %d -> %d: want sent_pkts unchanged, send_err counted",
						before.SentPkts, after.SentPkts, before.SendErr, after.SendErr)
				}
				if st := f.Stats(); st.Delivered.Packets != 0 {
					t.Errorf("the fabric delivered %d datagrams from a %s link", st.Delivered.Packets, how)
				}
				if how == "closed" {
					return
				}
				ep.SetLinkState(link.LinkState{Up: true, Carrier: true})
				must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))
				a.send(t, ah, b.qp.QPN(), 7, 2, 0, 100)
				if wc := waitWC(t, a.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.WRID != 2 {
					t.Fatalf("SEND once up: %v WRID %d, want success", wc.Status, wc.WRID)
				}
				if wc := waitWC(t, b.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.ByteLen != verbs.GRHLen+100 {
					t.Fatalf("receive: %v %d bytes, want success, the GRH and 100", wc.Status, wc.ByteLen)
				}
				if got := a.dev.Counters().SentPkts - after.SentPkts; got != 1 {
					t.Errorf("sent_pkts grew by %d for the SEND once up, want 1", got)
				}
			})
		})
	}
}

// TestDownLinkUC: a UC SEND on a down link fails with LOC_QP_OP_ERR and
// moves the QP to ERR (rxe_requester: rxe_prepare finds no route through
// a netdev that is down), where it completed successfully before;
// sent_pkts does not count it. A UC SEND on an up link still completes
// as soon as the link took it.
func TestDownLinkUC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{typ: ibv.QPTypeUC})
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 50, SGList: []ibv.SGE{b.mr.SGE(0, 4096)}}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 3000)}}))
		if wc := waitWC(t, a.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.WRID != 1 {
			t.Fatalf("UC SEND on an up link: %v WRID %d, want success", wc.Status, wc.WRID)
		}
		if wc := waitWC(t, b.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.ByteLen != 3000 {
			t.Fatalf("UC receive: %v %d bytes, want success, 3000", wc.Status, wc.ByteLen)
		}

		endpoint(t, a.dev).SetLinkState(link.LinkState{})
		before := a.dev.Counters()
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 3000)}}))
		wc := waitWC(t, a.cq, 1)[0]
		if wc.Status != ibv.WCLocQPOpErr || wc.WRID != 2 {
			t.Fatalf("UC SEND on a down link: %v WRID %d, want LOC_QP_OP_ERR WRID 2", wc.Status, wc.WRID)
		}
		if s := a.qp.State(); s != ibv.QPStateErr {
			t.Errorf("QP state %v, want ERR", s)
		}
		if after := a.dev.Counters(); after.SentPkts != before.SentPkts {
			t.Errorf("sent_pkts %d -> %d across a SEND the down link refused", before.SentPkts, after.SentPkts)
		}
	})
}

// TestDownLinkRC: an RC SEND posted while the link is down is not failed
// (rxe would fail it as it fails UC's: softnic's RC keeps it for its
// retransmit timer, which recovers it once the link is back within the
// retry budget), and completes once the link comes up.
func TestDownLinkRC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{timeout: 14, retry: 7})
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 50, SGList: []ibv.SGE{b.mr.SGE(0, 4096)}}))
		ep := endpoint(t, a.dev)
		ep.SetLinkState(link.LinkState{})
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 3000)}}))
		time.Sleep(50 * time.Millisecond)
		if n := a.cq.Poll(make([]ibv.WorkCompletion, 1)); n != 0 {
			t.Fatalf("RC SEND completed while the link was down")
		}
		ep.SetLinkState(link.LinkState{Up: true, Carrier: true})
		if wc := waitWC(t, a.cq, 1)[0]; wc.Status != ibv.WCSuccess {
			t.Fatalf("RC SEND after the link came back: %v, want success", wc.Status)
		}
		if wc := waitWC(t, b.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.ByteLen != 3000 {
			t.Fatalf("RC receive: %v %d bytes", wc.Status, wc.ByteLen)
		}
		if s := a.qp.State(); s != ibv.QPStateRTS {
			t.Errorf("QP state %v, want RTS", s)
		}
	})
}
