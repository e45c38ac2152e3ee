package verbs_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// Fault injection: the fabric loses the third RDMA WRITE MIDDLE packet of
// an 8 KiB WRITE (8 packets at path MTU 1024). The responder sees the
// next packet out of sequence and NAKs it; the requester goes back to the
// lost PSN and resends from there (IBTA 9.7.5.2.3 go-back-N), and the
// WRITE completes with every byte in place.
func Example_faultInjection() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := a.newQP(ibv.QPTypeRC, nil, 0), b.newQP(ibv.QPTypeRC, nil, 0)
	attr := verbs.DefaultConnectAttr(ibv.QPTypeRC)
	attr.Timeout = 20 // about 4 s: the NAK, not the timer, brings the resend
	check(qa.Connect(qa.Endpoint(0), qb.Endpoint(0), &attr))
	check(qb.Connect(qb.Endpoint(0), qa.Endpoint(0), &attr))

	writes := fabric.And(fabric.From(netip.MustParseAddr("192.0.2.1")),
		fabric.OpcodeIs(wire.RCWriteFirst, wire.RCWriteMiddle, wire.RCWriteLast))
	var mu sync.Mutex
	var psns []uint32 // every WRITE packet a sends, lost or not
	f.Tap(func(p fabric.Packet) {
		if writes(&p) {
			mu.Lock()
			psns = append(psns, uint32(p.Wire.PSN()))
			mu.Unlock()
		}
	})
	f.AddFilter(fabric.DropNth(3, fabric.OpcodeIs(wire.RCWriteMiddle)))

	for i := range 8192 {
		a.buf[i] = byte(i * 7)
	}
	_, err := qa.PostSend(ibv.SendWR{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, 8192)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	check(err)
	wc := a.next()

	mu.Lock()
	resend := 0
	for resend = 1; psns[resend] > psns[resend-1]; resend++ {
	}
	fmt.Printf("first pass: PSNs %v..., PSN 3 lost\n", psns[:4])
	fmt.Printf("go-back-N resend: PSNs %v\n", psns[resend:])
	mu.Unlock()
	fmt.Printf("WRITE: %v, data intact: %v\n", wc.Status, bytes.Equal(a.buf[:8192], b.buf[:8192]))
	fmt.Println("a's retransmissions:", a.dev.Counters().Retransmits)
	// Output:
	// first pass: PSNs [0 1 2 3]..., PSN 3 lost
	// go-back-N resend: PSNs [3 4 5 6 7]
	// WRITE: success, data intact: true
	// a's retransmissions: 1
}
