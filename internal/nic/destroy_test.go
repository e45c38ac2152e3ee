package nic

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/wire"
)

// A UD or UC QP destroyed right after its posts, before any of them was
// polled for (mckey.c's sender), still sends them: the processors are
// stopped here, so nothing but the destroy can run the QP, and each post
// must reach the link all the same. (UC posts run at once and UD's wait
// for a processor: the destroy is what sends UD's here.)
func TestDestroySendsWhatWasPosted(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeUD, ibv.QPTypeUC} {
		t.Run(typ.String(), func(t *testing.T) {
			l := newFeedLink()
			n, err := New(Config{Link: l, Processors: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			// No processor runs the QP from here on.
			for _, p := range n.procs {
				p.close()
			}
			n.procWG.Wait()

			pd, err := n.Mem().AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			c, err := cq.New(16, cq.MaxCQE)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			mr, err := n.Mem().RegMR(pd, buf, 0, false, ibv.AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			qp, err := n.CreateQP(&QPInitAttr{Type: typ, PD: pd, SendCQ: c, RecvCQ: c,
				Cap: ibv.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			peer := netip.MustParseAddr("10.0.0.1")
			av := ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer, HopLimit: 64}}
			steps := []struct {
				attr ibv.QPAttr
				mask ibv.AttrMask
			}{
				{ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState | ibv.QPAttrPort | ibv.QPAttrPKeyIndex},
				{ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: 0x99, AHAttr: av},
					ibv.QPAttrState | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrAV | ibv.QPAttrRQPSN},
				{ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState | ibv.QPAttrSQPSN},
			}
			if typ == ibv.QPTypeUC {
				steps[0].mask |= ibv.QPAttrAccessFlags
			} else {
				steps[0].mask |= ibv.QPAttrQKey
				steps[0].attr.QKey = 0x11
				steps[1].mask = ibv.QPAttrState
			}
			for _, s := range steps {
				if err := qp.Modify(&s.attr, s.mask); err != nil {
					t.Fatalf("modify to %v: %v", s.attr.State, err)
				}
			}
			wr := ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}}
			if typ == ibv.QPTypeUD {
				ah, err := n.CreateAH(pd, &av)
				if err != nil {
					t.Fatal(err)
				}
				defer ah.Destroy()
				wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, 0x99, 0x11
			}
			const posts = 5
			for i := range posts {
				wr.WRID = uint64(i)
				if _, err := qp.PostSend([]ibv.SendWR{wr}); err != nil {
					t.Fatalf("post %d: %v", i, err)
				}
			}
			before := sent(l)
			if err := qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			if got := sent(l); got != posts {
				t.Fatalf("the link got %d SENDs (%d before the destroy), want %d", got, before, posts)
			}
		})
	}
}

// sent counts the SEND_ONLY datagrams the link wrote (feedLink keeps
// each datagram's first byte: the BTH opcode).
func sent(l *feedLink) int {
	k := 0
	for _, w := range l.written() {
		for _, op := range w {
			if o := wire.Opcode(op); o == wire.UDSendOnly || o == wire.UCSendOnly {
				k++
			}
		}
	}
	return k
}
