package cm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// TestRxeInterop talks to librdmacm's rdma_server and rdma_client
// (rdmacm-utils) over the kernel's rxe, on the interop bed: it runs only
// with CM_RXE_LOCAL (this side's address, e.g. 10.77.0.1, bound on UDP
// 4791: run it in the bed's namespace as root), CM_RXE_PEER (the guest's
// address) and CM_RXE_ROLE: "client" connects to `rdma_server -s PEER`
// on port 7471, "server" listens on 7471 for `rdma_client -s LOCAL`. Each
// side sends the other 16 bytes, then the client disconnects.
//
// By hand, on the bed (under flock /tmp/interop-bed.lock):
//
//	go test -c -o /tmp/cm.test ./verbs/cm
//	test/interop/bed up
//	id=$(test/interop/bed exec peer --bg -- rdma_server -s 10.77.0.2 -p 7471); sleep 3
//	CM_RXE_LOCAL=10.77.0.1 CM_RXE_PEER=10.77.0.2 CM_RXE_ROLE=client \
//		ip netns exec softnic-interop /tmp/cm.test -test.run 'TestRxeInterop$' -test.v
//	test/interop/bed jobwait peer "$id"
//	test/interop/bed down
//
// and alike with CM_RXE_ROLE=server and `bed exec peer -- rdma_client -s
// 10.77.0.1 -p 7471`, with fd77::1 and fd77::2 for IPv6, and for
// TestRxeInteropRping (rping), TestRxeInteropUD (udaddy) and
// TestRxeInteropMcast (mckey).
func TestRxeInterop(t *testing.T) {
	local, peer, role := os.Getenv("CM_RXE_LOCAL"), os.Getenv("CM_RXE_PEER"), os.Getenv("CM_RXE_ROLE")
	if local == "" || peer == "" {
		t.Skip("CM_RXE_LOCAL and CM_RXE_PEER are not set (run on the interop bed)")
	}
	la, pa := netip.MustParseAddr(local), netip.MustParseAddr(peer)
	l, err := link.ListenUDP(link.UDPConfig{Addr: la})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch := c.CreateEventChannel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	get := func(want cm.EventType) *cm.Event {
		t.Helper()
		ev, err := ch.GetEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		t.Logf("event %v status %d", ev.Type, ev.Status)
		ev.Ack()
		if ev.Type != want {
			t.Fatalf("event %v (status %d), want %v", ev.Type, ev.Status, want)
		}
		return ev
	}
	var id *cm.ID
	switch role {
	case "client":
		id, _ = c.CreateID(ch, nil, cm.PSTCP, ibv.QPTypeRC)
		if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(pa, 7471), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		get(cm.EventAddrResolved)
		id.ResolveRoute(2 * time.Second)
		get(cm.EventRouteResolved)
	case "server":
		lid, _ := c.CreateID(ch, nil, cm.PSTCP, ibv.QPTypeRC)
		if err := lid.BindAddr(netip.AddrPortFrom(la, 7471)); err != nil {
			t.Fatal(err)
		}
		lid.Listen(1)
		t.Log("listening")
		id = get(cm.EventConnectRequest).ID
		defer lid.Destroy()
	default:
		t.Fatalf("CM_RXE_ROLE %q: client or server", role)
	}
	cq, _ := dev.CreateCQ(8, nil)
	defer cq.Destroy()
	if _, err := id.CreateQP(nil, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	copy(buf[16:], "softnic says hi!")
	mr, _ := id.PD().RegMR(buf, ibv.AccessLocalWrite)
	defer mr.Dereg()
	id.QP().PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{mr.SGE(0, 16)}})
	wcs := make([]ibv.WorkCompletion, 1)
	wait := func(what string) ibv.WorkCompletion {
		t.Helper()
		if n, err := cq.Wait(ctx, wcs); err != nil || n != 1 || wcs[0].Status != ibv.WCSuccess {
			t.Fatalf("%s: %d %v %+v", what, n, err, wcs[0])
		}
		return wcs[0]
	}
	send := func() {
		id.QP().PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{mr.SGE(16, 16)}})
	}
	if role == "client" {
		if err := id.Connect(nil); err != nil {
			t.Fatal(err)
		}
		get(cm.EventEstablished)
		send()
		wait("send")
		wait("receive")
		t.Logf("received %q", buf[:16])
		id.Disconnect()
		get(cm.EventDisconnected)
	} else {
		if err := id.Accept(nil); err != nil {
			t.Fatal(err)
		}
		get(cm.EventEstablished)
		wait("receive")
		t.Logf("received %q", buf[:16])
		send()
		wait("send")
		get(cm.EventDisconnected)
		id.Disconnect()
	}
	if a, _ := id.QP().Query(); true {
		t.Logf("QP: dest %#x sq_psn %#x rq_psn %#x mtu %v timeout %d", a.DestQPN, a.SQPSN, a.RQPSN, a.PathMTU, a.Timeout)
	}
	id.DestroyQP()
	id.Destroy()
}

// TestRxeInteropUD is TestRxeInterop for UD through SIDR, against
// librdmacm's udaddy on port 7174: CM_RXE_ROLE "client" runs against
// `udaddy` (the server), "server" against `udaddy -s LOCAL`. The client
// sends 10 datagrams of 100 bytes with its QPN as immediate data, the
// server answers each from an address handle made from the completion.
func TestRxeInteropUD(t *testing.T) {
	local, peer, role := os.Getenv("CM_RXE_LOCAL"), os.Getenv("CM_RXE_PEER"), os.Getenv("CM_RXE_ROLE")
	if local == "" || peer == "" {
		t.Skip("CM_RXE_LOCAL and CM_RXE_PEER are not set (run on the interop bed)")
	}
	const count, size = 10, 100
	la, pa := netip.MustParseAddr(local), netip.MustParseAddr(peer)
	l, err := link.ListenUDP(link.UDPConfig{Addr: la})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch := c.CreateEventChannel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	get := func(want cm.EventType) *cm.Event {
		t.Helper()
		ev, err := ch.GetEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		t.Logf("event %v status %d", ev.Type, ev.Status)
		ev.Ack()
		if ev.Type != want {
			t.Fatalf("event %v (status %d), want %v", ev.Type, ev.Status, want)
		}
		return ev
	}
	var id *cm.ID
	switch role {
	case "client":
		id, _ = c.CreateID(ch, nil, cm.PSUDP, ibv.QPTypeUD)
		id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(pa, 7174), 2*time.Second)
		get(cm.EventAddrResolved)
		id.ResolveRoute(2 * time.Second)
		get(cm.EventRouteResolved)
	case "server":
		lid, _ := c.CreateID(ch, nil, cm.PSUDP, ibv.QPTypeUD)
		if err := lid.BindAddr(netip.AddrPortFrom(la, 7174)); err != nil {
			t.Fatal(err)
		}
		lid.Listen(1)
		t.Log("listening")
		defer lid.Destroy()
		id = get(cm.EventConnectRequest).ID
	default:
		t.Fatalf("CM_RXE_ROLE %q: client or server", role)
	}
	cq, _ := dev.CreateCQ(4*count, nil)
	defer cq.Destroy()
	if _, err := id.CreateQP(nil, verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: ibv.QPCap{MaxSendWR: count, MaxRecvWR: count, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	const slot = size + verbs.GRHLen
	buf := make([]byte, (count+1)*slot)
	mr, _ := id.PD().RegMR(buf, ibv.AccessLocalWrite)
	defer mr.Dereg()
	for i := range count {
		id.QP().PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{mr.SGE(i*slot, slot)}})
	}
	recvs := func() []ibv.WorkCompletion {
		var got []ibv.WorkCompletion
		wcs := make([]ibv.WorkCompletion, 8)
		for len(got) < count {
			n, err := cq.Wait(ctx, wcs)
			if err != nil {
				t.Fatalf("after %d receives: %v", len(got), err)
			}
			for _, wc := range wcs[:n] {
				if wc.Status != ibv.WCSuccess {
					t.Fatalf("completion %+v", wc)
				}
				if wc.Opcode == ibv.WCRecv {
					got = append(got, wc)
				}
			}
		}
		return got
	}
	send := func(ah *verbs.AH, qpn, qkey uint32) {
		for i := range count {
			if _, err := id.QP().PostSend(ibv.SendWR{WRID: 100 + uint64(i), Opcode: ibv.WRSendWithImm,
				Imm: id.QP().QPN(), SGList: []ibv.SGE{mr.SGE(count*slot, size)}, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if role == "client" {
		if err := id.Connect(nil); err != nil {
			t.Fatal(err)
		}
		ev := get(cm.EventEstablished)
		t.Logf("UD peer: QPN %#x Q_Key %#x AH %+v", ev.UD.QPNum, ev.UD.QKey, ev.UD.AHAttr)
		ah, err := id.PD().CreateAH(ev.UD.AHAttr)
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		send(ah, ev.UD.QPNum, ev.UD.QKey)
		got := recvs()
		t.Logf("%d replies, the first of %d bytes from QP %#x", len(got), got[0].ByteLen, got[0].SrcQP)
	} else {
		if err := id.Accept(nil); err != nil {
			t.Fatal(err)
		}
		got := recvs()
		first := got[0]
		t.Logf("%d datagrams, the first of %d bytes from QP %#x imm %#x", len(got), first.ByteLen, first.SrcQP, first.Imm)
		ah, err := id.PD().CreateAHFromWC(&first, buf[int(first.WRID)*slot:], 1)
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		a, _ := id.QP().Query()
		for i := range count {
			id.QP().PostSend(ibv.SendWR{WRID: 100 + uint64(i), Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled,
				Imm: id.QP().QPN(), SGList: []ibv.SGE{mr.SGE(count*slot, size)}, AH: ah, RemoteQPN: first.Imm, RemoteQKey: a.QKey})
		}
		wcs := make([]ibv.WorkCompletion, count)
		for n := 0; n < count; {
			k, err := cq.Wait(ctx, wcs[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
	}
	id.DestroyQP()
	id.Destroy()
}

// TestRxeInteropMcast joins a multicast group with librdmacm's mckey in
// the guest: CM_RXE_ROLE "send" sends 10 datagrams to the group for
// `mckey -m 239.1.2.3` (a receiver started first), "recv" receives the
// 10 of `mckey -m 239.1.2.3 -s` (started after this side joined:
// CM_RXE_JOINED names a file created once joined).
func TestRxeInteropMcast(t *testing.T) {
	local, role := os.Getenv("CM_RXE_LOCAL"), os.Getenv("CM_RXE_ROLE")
	if local == "" || os.Getenv("CM_RXE_PEER") == "" {
		t.Skip("CM_RXE_LOCAL and CM_RXE_PEER are not set (run on the interop bed)")
	}
	const count, size = 10, 100
	group := netip.MustParseAddr("239.1.2.3")
	la := netip.MustParseAddr(local)
	l, err := link.ListenUDP(link.UDPConfig{Addr: la})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch := c.CreateEventChannel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, _ := c.CreateID(ch, nil, cm.PSUDP, ibv.QPTypeUD)
	// As mckey: resolve the group's address, then join.
	id.ResolveAddr(netip.AddrPortFrom(la, 0), netip.AddrPortFrom(group, 0), 2*time.Second)
	if ev, err := ch.GetEvent(ctx); err != nil || ev.Type != cm.EventAddrResolved {
		t.Fatalf("resolve: %v %v", ev, err)
	} else {
		ev.Ack()
	}
	cq, _ := dev.CreateCQ(4*count, nil)
	defer cq.Destroy()
	if _, err := id.CreateQP(nil, verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: ibv.QPCap{MaxSendWR: count, MaxRecvWR: count, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	const slot = size + verbs.GRHLen
	buf := make([]byte, (count+1)*slot)
	mr, _ := id.PD().RegMR(buf, ibv.AccessLocalWrite)
	defer mr.Dereg()
	for i := range count {
		id.QP().PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{mr.SGE(i*slot, slot)}})
	}
	if err := id.JoinMulticast(group, "mckey"); err != nil {
		t.Fatal(err)
	}
	ev, err := ch.GetEvent(ctx)
	if err != nil || ev.Type != cm.EventMulticastJoin || ev.Status != 0 {
		t.Fatalf("join: %+v %v", ev, err)
	}
	ev.Ack()
	t.Logf("joined: %+v", ev.UD)
	if f := os.Getenv("CM_RXE_JOINED"); f != "" {
		os.WriteFile(f, nil, 0o644)
	}
	switch role {
	case "send":
		ah, err := id.PD().CreateAH(ev.UD.AHAttr)
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		for i := range count {
			if _, err := id.QP().PostSend(ibv.SendWR{WRID: 100 + uint64(i), Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled,
				Imm: id.QP().QPN(), SGList: []ibv.SGE{mr.SGE(count*slot, size)}, AH: ah, RemoteQPN: ev.UD.QPNum,
				RemoteQKey: ev.UD.QKey}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "recv":
	default:
		t.Fatalf("CM_RXE_ROLE %q: send or recv", role)
	}
	// Receives: 10 from the guest (recv), or our own 10 looped back (send).
	wcs := make([]ibv.WorkCompletion, 8)
	recvs, sends := 0, 0
	for recvs < count || (role == "send" && sends < count) {
		n, err := cq.Wait(ctx, wcs)
		if err != nil {
			t.Fatalf("%d receives, %d sends: %v", recvs, sends, err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != ibv.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
			if wc.Opcode == ibv.WCRecv {
				recvs++
				if recvs == 1 {
					t.Logf("first datagram: %d bytes from QP %#x", wc.ByteLen, wc.SrcQP)
				}
			} else {
				sends++
			}
		}
	}
	if err := id.LeaveMulticast(group); err != nil {
		t.Fatal(err)
	}
	id.DestroyQP()
	id.Destroy()
}

// TestRxeInteropRping plays rping's protocol (librdmacm's rping.c) with
// rping over rxe: CM_RXE_ROLE "client" against `rping -s -a PEER -p 7174
// -C 3 -v`, "server" against `rping -c -a LOCAL -p 7174 -C 3 -v -V`.
// Each ping, the client advertises its start buffer ({be64 addr, be32
// rkey, be32 size} in a SEND), the server READs it, answers, the client
// advertises its sink buffer, the server WRITEs the data back and
// answers: RDMA READ and WRITE both ways over the QPs the CMs set up.
func TestRxeInteropRping(t *testing.T) {
	local, peer, role := os.Getenv("CM_RXE_LOCAL"), os.Getenv("CM_RXE_PEER"), os.Getenv("CM_RXE_ROLE")
	if local == "" || peer == "" {
		t.Skip("CM_RXE_LOCAL and CM_RXE_PEER are not set (run on the interop bed)")
	}
	const count, size = 3, 64
	la, pa := netip.MustParseAddr(local), netip.MustParseAddr(peer)
	l, err := link.ListenUDP(link.UDPConfig{Addr: la})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch := c.CreateEventChannel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	get := func(want cm.EventType) *cm.Event {
		t.Helper()
		ev, err := ch.GetEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		t.Logf("event %v status %d", ev.Type, ev.Status)
		ev.Ack()
		if ev.Type != want {
			t.Fatalf("event %v (status %d), want %v", ev.Type, ev.Status, want)
		}
		return ev
	}
	var id *cm.ID
	if role == "client" {
		id, _ = c.CreateID(ch, nil, cm.PSTCP, ibv.QPTypeRC)
		id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(pa, 7174), 2*time.Second)
		get(cm.EventAddrResolved)
		id.ResolveRoute(2 * time.Second)
		get(cm.EventRouteResolved)
	} else {
		lid, _ := c.CreateID(ch, nil, cm.PSTCP, ibv.QPTypeRC)
		if err := lid.BindAddr(netip.AddrPortFrom(la, 7174)); err != nil {
			t.Fatal(err)
		}
		lid.Listen(3)
		t.Log("listening")
		defer lid.Destroy()
		id = get(cm.EventConnectRequest).ID
	}
	cq, _ := dev.CreateCQ(16, nil)
	defer cq.Destroy()
	if _, err := id.CreateQP(nil, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	// recv 0..16, send 16..32, start (or the server's rdma buffer) 64..128, sink 128..192.
	buf := make([]byte, 192)
	mr, err := id.PD().RegMR(buf, ibv.AccessLocalWrite|ibv.AccessRemoteRead|ibv.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	postRecv := func() { id.QP().PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{mr.SGE(0, 16)}}) }
	wcs := make([]ibv.WorkCompletion, 1)
	seen := map[ibv.WCOpcode]int{} // completions polled, not yet waited for
	wait := func(op ibv.WCOpcode) {
		t.Helper()
		for seen[op] == 0 {
			if n, err := cq.Wait(ctx, wcs); err != nil || n != 1 || wcs[0].Status != ibv.WCSuccess {
				t.Fatalf("waiting for %v: %d %v %+v", op, n, err, wcs[0])
			}
			seen[wcs[0].Opcode]++
		}
		seen[op]--
	}
	advertise := func(off int) {
		binary.BigEndian.PutUint64(buf[16:], mr.Addr()+uint64(off))
		binary.BigEndian.PutUint32(buf[24:], mr.RKey())
		binary.BigEndian.PutUint32(buf[28:], size)
		id.QP().PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{mr.SGE(16, 16)}})
		wait(ibv.WCSend)
	}
	remote := func() (uint64, uint32, uint32) {
		return binary.BigEndian.Uint64(buf), binary.BigEndian.Uint32(buf[8:]), binary.BigEndian.Uint32(buf[12:])
	}
	postRecv()
	if role == "client" {
		// rping's client: responder resources and initiator depth 1, retries 7.
		if err := id.Connect(&cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		get(cm.EventEstablished)
		for ping := range count {
			msg := fmt.Sprintf("rdma-ping-%d: softnic", ping)
			clear(buf[64:])
			copy(buf[64:128], msg)
			advertise(64) // the start buffer: the server READs it
			wait(ibv.WCRecv)
			postRecv()
			advertise(128) // the sink: the server WRITEs it back
			wait(ibv.WCRecv)
			postRecv()
			if got := string(bytes.TrimRight(buf[128:192], "\x00")); got != msg {
				t.Fatalf("ping %d: written back %q, want %q", ping, got, msg)
			}
		}
		t.Logf("%d pings", count)
		id.Disconnect()
		get(cm.EventDisconnected)
	} else {
		if err := id.Accept(nil); err != nil {
			t.Fatal(err)
		}
		get(cm.EventEstablished)
		for ping := range count {
			wait(ibv.WCRecv)
			addr, rkey, n := remote()
			postRecv()
			id.QP().PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{mr.SGE(64, int(min(n, size)))}, RemoteAddr: addr, RKey: rkey})
			wait(ibv.WCRDMARead)
			t.Logf("ping %d: read %q", ping, bytes.TrimRight(buf[64:128], "\x00"))
			advertise(64)
			wait(ibv.WCRecv)
			addr, rkey, _ = remote()
			postRecv()
			k := bytes.IndexByte(buf[64:128], 0) + 1
			if k <= 0 {
				k = size
			}
			id.QP().PostSend(ibv.SendWR{WRID: 4, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{mr.SGE(64, k)}, RemoteAddr: addr, RKey: rkey})
			wait(ibv.WCRDMAWrite)
			advertise(64)
		}
		get(cm.EventDisconnected)
		id.Disconnect()
	}
	id.DestroyQP()
	id.Destroy()
}
