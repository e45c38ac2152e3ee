package nic

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// psnQP records the PSNs of the packets delivered to it, in order.
type psnQP struct {
	mu   sync.Mutex
	psns []wire.PSN
}

func (q *psnQP) Deliver(p *transport.RxPacket) bool {
	q.mu.Lock()
	q.psns = append(q.psns, p.Pkt.PSN())
	q.mu.Unlock()
	p.Release()
	return true
}

func (q *psnQP) Process(transport.Output) bool { return false }
func (q *psnQP) Close()                        {}

// seqLink is a feedLink that says which Seq it hands out next
// (link.NextSeq), as the UDP link and the fabric do.
type seqLink struct {
	*feedLink
	next uint64
}

func (l *seqLink) NextSeq() (uint64, bool) { return l.next, true }

// Two readers that read the link side by side (the receive goroutine and
// Progress) hand their batches to the QPs in the order the link numbered
// them: a reader whose batch comes second waits for the first, even when
// it is ready first. So from the NIC's first batch on, on a link that
// numbered datagrams 1-9 for someone else: before the NIC asked the link
// where its numbers start, the first batches of two readers were both
// delivered at once (a UC message lost on the two-host bed).
func TestReadersDeliverInLinkOrder(t *testing.T) {
	t.Run("after earlier batches", func(t *testing.T) { testReadersInOrder(t, false) })
	t.Run("the NIC's first batches", func(t *testing.T) { testReadersInOrder(t, true) })
}

func testReadersInOrder(t *testing.T, first bool) {
	addr := netip.MustParseAddr("10.0.0.2")
	fl := &feedLink{addr: addr, in: make(chan link.Datagram), closed: make(chan struct{})}
	var l link.Link = fl
	if first {
		l = &seqLink{feedLink: fl, next: 10}
	}
	n, err := New(Config{Link: l, Processors: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	q := &psnQP{}
	qpn, err := n.RegisterQP(ibv.QPTypeRC, func(uint32, transport.Waker) (Transport, error) { return q, nil })
	if err != nil {
		t.Fatal(err)
	}
	e := wire.Encap{Src: netip.MustParseAddr("10.0.0.1"), Dst: addr, SrcPort: 0xC000, DstPort: wire.UDPPort, HopLimit: 64}
	pkt := func(psn wire.PSN) []byte {
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: qpn, PSN: psn}}
		b := make([]byte, link.MaxDatagram)
		k, err := wire.Build(b, &e, &h, []byte{1})
		if err != nil {
			t.Fatal(err)
		}
		return b[:k]
	}
	// batch returns a read function that hands out k SENDs with PSNs
	// from first, numbered from seq, and reports on read when it has.
	batch := func(seq uint64, first wire.PSN, k int, read chan<- struct{}) func([]link.Datagram) (int, error) {
		return func(msgs []link.Datagram) (int, error) {
			for i := range k {
				b := pkt(first + wire.PSN(i))
				msgs[i].Encap = e
				msgs[i].Buf = msgs[i].Buf[:copy(msgs[i].Buf[:cap(msgs[i].Buf)], b)]
				msgs[i].ICRC = link.ICRCUnchecked
				msgs[i].Seq = seq + uint64(i)
			}
			if read != nil {
				close(read)
			}
			return k, nil
		}
	}
	if !first {
		n.endTurn(10) // datagrams 1-9 went before
	}
	second, firstR := n.newReader(), n.newReader()
	read := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		second.read(batch(13, 103, 3, read))
	}()
	<-read // the second batch is read before the first
	firstR.read(batch(10, 100, 3, nil))
	<-done
	q.mu.Lock()
	got := q.psns
	q.mu.Unlock()
	want := []wire.PSN{100, 101, 102, 103, 104, 105}
	if len(got) != len(want) {
		t.Fatalf("delivered PSNs %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivered PSNs %v, want %v (in the link's order)", got, want)
		}
	}
	if turn := n.rxTurn.Load(); turn != 16 {
		t.Errorf("rxTurn = %d after datagrams 10-15, want 16", turn)
	}
	if c := n.ctr.RxTurnTimeout.Load(); c != 0 {
		t.Errorf("RxTurnTimeout = %d", c)
	}
	second.release()
	firstR.release()
}
