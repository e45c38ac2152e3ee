package cm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Example connects a client to a server the librdmacm way (resolve the
// address and the route, connect with private data, accept), sends a
// message and writes into the server's memory with the QPs the CM
// brought to RTS, then disconnects.
func Example() {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	open := func(addr string) (*verbs.Device, *cm.CM) {
		ep, _ := f.Attach(netip.MustParseAddr(addr))
		dev, _ := verbs.Open(verbs.Config{Link: ep})
		c, _ := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
		return dev, c
	}
	devS, cmS := open("10.0.0.2")
	devC, cmC := open("10.0.0.1")
	defer devS.Close()
	defer devC.Close()
	defer cmS.Close()
	defer cmC.Close()
	get := func(who string, ch *cm.EventChannel) *cm.Event {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev, err := ch.GetEvent(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(who+":", ev.Type)
		ev.Ack()
		return ev
	}
	qpAttr := func(cq *verbs.CQ) verbs.QPInitAttr {
		return verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: ibv.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}

	// The server listens on 10.0.0.2 port 7471.
	chS := cmS.CreateEventChannel()
	listener, _ := cmS.CreateID(chS, nil, cm.PSTCP, ibv.QPTypeRC)
	listener.BindAddr(netip.MustParseAddrPort("10.0.0.2:7471"))
	listener.Listen(8)

	// The client resolves the server's address and route, makes its QP
	// and connects.
	chC := cmC.CreateEventChannel()
	cli, _ := cmC.CreateID(chC, nil, cm.PSTCP, ibv.QPTypeRC)
	cli.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("10.0.0.2:7471"), time.Second)
	get("client", chC)
	cli.ResolveRoute(time.Second)
	get("client", chC)
	cqC, _ := devC.CreateCQ(16, nil)
	cli.CreateQP(nil, qpAttr(cqC))
	cli.Connect(&cm.ConnParam{PrivateData: []byte("hello"), ResponderResources: 1, InitiatorDepth: 1,
		RetryCount: 7, RNRRetryCount: 7})

	// The server takes the request, makes the new ID's QP, posts a
	// receive and accepts, telling the client where it may write.
	req := get("server", chS)
	fmt.Printf("server: private data %q\n", bytes.TrimRight(req.Conn.PrivateData, "\x00"))
	srv := req.ID
	cqS, _ := devS.CreateCQ(16, nil)
	srv.CreateQP(nil, qpAttr(cqS))
	bufS := make([]byte, 64)
	mrS, _ := srv.PD().RegMR(bufS, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	srv.QP().PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{mrS.SGE(0, 16)}})
	where := binary.BigEndian.AppendUint64(nil, mrS.Addr()+32)
	where = binary.BigEndian.AppendUint32(where, mrS.RKey())
	srv.Accept(&cm.ConnParam{PrivateData: where, ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
	est := get("client", chC)
	get("server", chS)

	// The client writes into the server's buffer, then sends a message.
	bufC := make([]byte, 64)
	mrC, _ := cli.PD().RegMR(bufC, ibv.AccessLocalWrite)
	copy(bufC, "ping")
	copy(bufC[16:], "written")
	va, rkey := binary.BigEndian.Uint64(est.Conn.PrivateData), binary.BigEndian.Uint32(est.Conn.PrivateData[8:])
	cli.QP().PostSend(
		ibv.SendWR{WRID: 1, Opcode: ibv.WRRDMAWrite, SGList: []ibv.SGE{mrC.SGE(16, 7)}, RemoteAddr: va, RKey: rkey},
		ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{mrC.SGE(0, 4)}})
	wc := make([]ibv.WorkCompletion, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cqS.Wait(ctx, wc)
	fmt.Printf("server: received %q, memory %q\n", bufS[:wc[0].ByteLen], bufS[32:39])
	cqC.Wait(ctx, wc)

	// The client disconnects; the server answers.
	cli.Disconnect()
	get("server", chS)
	srv.Disconnect()
	get("client", chC)

	for _, id := range []*cm.ID{cli, srv} {
		id.DestroyQP()
		id.Destroy()
	}
	listener.Destroy()
	mrS.Dereg()
	mrC.Dereg()
	cqS.Destroy()
	cqC.Destroy()
	// Output:
	// client: RDMA_CM_EVENT_ADDR_RESOLVED
	// client: RDMA_CM_EVENT_ROUTE_RESOLVED
	// server: RDMA_CM_EVENT_CONNECT_REQUEST
	// server: private data "hello"
	// client: RDMA_CM_EVENT_ESTABLISHED
	// server: RDMA_CM_EVENT_ESTABLISHED
	// server: received "ping", memory "written"
	// server: RDMA_CM_EVENT_DISCONNECTED
	// client: RDMA_CM_EVENT_DISCONNECTED
}
