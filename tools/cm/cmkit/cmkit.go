// Package cmkit is what softnic's librdmacm look-alikes share. Its core is
// the skeleton that librdmacm's cmatose.c, udaddy.c and mckey.c share
// (struct cmatest and struct cmatest_node, alloc_nodes, the event loop,
// the message buffers, post_recvs and post_sends, poll_cqs,
// destroy_node, the "return status" ending), which softnic's ucmatose,
// udaddy and mckey take from this one place: each tool keeps only its
// event handling and its lines. Its command half (command.go) is what
// the commands of all the CM tools (rping, ucmatose, rdma_server and
// rdma_client, udaddy, mckey) share: their NIC options, the C tools'
// -f, -P and numbers, the NIC's address, and RunCommand, which opens the
// NIC and the connection manager and maps a run to the C tool's exit
// status.
package cmkit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Status is a run's outcome as the C tools' main returns it: the exit
// status is Code & 0xff, and the last line printed is
// "return status <Code>".
type Status struct{ Code int }

func (s *Status) Error() string { return fmt.Sprintf("return status %d", s.Code) }

// ResolveTimeout is the C tools' rdma_resolve_addr and
// rdma_resolve_route timeout.
const ResolveTimeout = 2000 * time.Millisecond

// Options are the options of a run that cmatose.c and udaddy.c share
// (the globals of both), one field per flag; mckey.c takes Src,
// PortSpace, Conns, Count and Size.
type Options struct {
	Server    bool         // no -s
	Dst       netip.Addr   // -s: the server's address (client)
	Src       netip.Addr   // -b: the address to bind to
	PortSpace cm.PortSpace // -P, or udaddy's and mckey's -p
	Conns     int          // -c
	Count     int          // -C: messages each way on each connection
	Size      int          // -S
	Port      uint16       // cmatose.c's -p; udaddy.c's fixed port
	TOS       int          // -t: accepted; no effect (set_tos)
}

// Test is struct cmatest: a run's event channel and nodes, and the
// connections still to come and to go.
type Test struct {
	Prog            string // the lines' prefix: "cmatose", "udaddy", "mckey"
	Env             *toolnic.Env
	Ch              *cm.EventChannel
	Nodes           []*Node
	ConnIndex       int // the next node a connection request takes
	ConnectsLeft    int
	DisconnectsLeft int

	byID  map[*cm.ID]*Node
	outMu sync.Mutex // mckey prints from its CM thread too
}

// NewTest starts a run of prog on env.CM: the event channel and conns
// nodes (alloc_nodes), each with an ID on the channel in port space ps
// when ids (a client's; a server's nodes take the IDs of the requests).
// At a failure it prints the C tool's line and returns a *Status of 1, as
// the C tools' main does.
func NewTest(prog string, env *toolnic.Env, conns int, ids bool, ps cm.PortSpace, qpType ibv.QPType) (*Test, error) {
	t := &Test{Prog: prog, Env: env, ConnectsLeft: conns, byID: map[*cm.ID]*Node{}}
	t.Ch = env.CM.CreateEventChannel()
	if t.Ch == nil {
		t.Printf("failed to create event channel\n")
		return nil, &Status{Code: 1}
	}
	var err error
	t.Nodes, err = AllocNodes(env.CM, t.Ch, conns, func(i int) *Node { return &Node{Idx: i} }, ids, ps, qpType, t.SetID)
	return t, err
}

// Run is the main of cmatose.c and udaddy.c once their options are read
// into o: no messages without a size (create_message), the run's Test
// (NewTest, the client's nodes with IDs), the server's or the client's
// run (newTest makes the tool's own state around the Test), and the
// ending (End). It returns nil when the C tool would return 0, else a
// *Status.
func Run[T any](ctx context.Context, prog string, env toolnic.Env, o *Options, qpType ibv.QPType,
	newTest func(*Test) T, server, client func(t T, ctx context.Context) int) error {
	if env.CM == nil {
		return errors.New("no connection manager")
	}
	env = env.WithDefaults()
	if o.Size == 0 {
		o.Count = 0
	}
	ct, err := NewTest(prog, &env, o.Conns, !o.Server, o.PortSpace, qpType)
	if err != nil {
		return err
	}
	run := client
	if o.Server {
		run = server
	}
	return ct.End(run(newTest(ct), ctx))
}

// Printf prints one of the tool's lines (printf).
func (t *Test) Printf(format string, args ...any) {
	t.outMu.Lock()
	fmt.Fprintf(t.Env.Out, format, args...)
	t.outMu.Unlock()
}

// Perror prints what perror(3) prints for what.
func (t *Test) Perror(what string, err error) {
	fmt.Fprintf(t.Env.Err, "%s: %v\n", what, err)
}

// SetID gives node n the ID id (the C tools' cma_id->context).
func (t *Test) SetID(n *Node, id *cm.ID) {
	n.ID = id
	t.byID[id] = n
}

// Node returns the node of id, nil for none (a listening ID).
func (t *Test) Node(id *cm.ID) *Node { return t.byID[id] }

// Take is connect_handler's start: a connection request takes the next
// node, or, with every node taken, is rejected ("failing connection
// request", -ENOMEM).
func (t *Test) Take(id *cm.ID) (*Node, int) {
	if t.ConnIndex == len(t.Nodes) {
		t.Printf("%s: failing connection request\n", t.Prog)
		id.Reject(nil)
		return nil, -12
	}
	n := t.Nodes[t.ConnIndex]
	t.ConnIndex++
	t.SetID(n, id)
	return n, 0
}

// Connect is a client's route_handler: the node made ready (prepare:
// init_node, post_recvs), then rdma_connect with param; report prints a
// failed connect's line. A failure counts the connection as done.
func (t *Test) Connect(n *Node, prepare func(*Node) int, param *cm.ConnParam, report func(error)) int {
	ret := prepare(n)
	if ret == 0 {
		if err := n.ID.Connect(param); err != nil {
			report(err)
			ret = -1
		}
	}
	if ret != 0 {
		t.ConnectsLeft--
	}
	return ret
}

// Accept is a server's connect_handler: the request takes the next node
// (Take), which is made ready (prepare), and is accepted with param(id);
// report prints a failed accept's line. A failure counts the connection
// as done and rejects the request ("failing connection request").
func (t *Test) Accept(id *cm.ID, prepare func(*Node) int, param func(*cm.ID) *cm.ConnParam, report func(error)) (*Node, int) {
	n, ret := t.Take(id)
	if ret != 0 {
		return nil, ret
	}
	ret = prepare(n)
	if ret == 0 {
		if err := id.Accept(param(id)); err != nil {
			report(err)
			ret = -1
		}
	}
	if ret != 0 {
		t.ConnectsLeft--
		t.Printf("%s: failing connection request\n", t.Prog)
		id.Reject(nil)
	}
	return n, ret
}

// Release takes back the ID Take gave n: udaddy.c's connect_handler
// leaves the ID of a request it failed to the CM.
func (t *Test) Release(n *Node) {
	delete(t.byID, n.ID)
	n.ID = nil
}

// Events is connect_events (and cmatose.c's disconnect_events): events,
// each handed to handle, until *left reaches 0 or handle fails.
func (t *Test) Events(ctx context.Context, left *int, handle func(*cm.Event) int) (int, error) {
	return Events(ctx, t.Ch, t.Env.Stall, left, handle)
}

// PollCQs is poll_cqs: count completions on CQ index (SendCQ, RecvCQ)
// of each connected node, each batch handed to batch when it is not nil.
// It prints "<prog>: failed polling CQ: -110" when one does not come.
func (t *Test) PollCQs(ctx context.Context, index, count int, batch func(n *Node, wc []ibv.WorkCompletion)) int {
	wc := make([]ibv.WorkCompletion, 8)
	for _, n := range t.Nodes {
		if !n.Connected {
			continue
		}
		var b func([]ibv.WorkCompletion)
		if batch != nil {
			b = func(wc []ibv.WorkCompletion) { batch(n, wc) }
		}
		if err := PollCQ(ctx, n.CQ[index], count, t.Env.Stall, wc, b); err != nil {
			t.Printf("%s: failed polling CQ: %d\n", t.Prog, -110)
			return -110
		}
	}
	return 0
}

// Listen is run_server's start: a listening ID bound to src (any when
// not given) and port. A failure names its step ("listen request
// failed", "bind address failed", "failure trying to listen") for the
// tool's line.
func (t *Test) Listen(ps cm.PortSpace, qpType ibv.QPType, src netip.Addr, port uint16) (lid *cm.ID, step string, err error) {
	lid, err = t.Env.CM.CreateID(t.Ch, t, ps, qpType)
	if err != nil {
		return nil, "listen request failed", err
	}
	if !src.IsValid() {
		src = netip.IPv4Unspecified()
	}
	if err := lid.BindAddr(netip.AddrPortFrom(src, port)); err != nil {
		lid.Destroy()
		return nil, "bind address failed", err
	}
	if err := lid.Listen(0); err != nil {
		lid.Destroy()
		return nil, "failure trying to listen", err
	}
	return lid, "", nil
}

// ResolveAll is run_client's start: each node's ID resolves dst from src
// (any when not given). A failure counts its connection as done.
func (t *Test) ResolveAll(src netip.Addr, dst netip.AddrPort) error {
	var from netip.AddrPort
	if src.IsValid() {
		from = netip.AddrPortFrom(src, 0)
	}
	for _, n := range t.Nodes {
		if err := n.ID.ResolveAddr(from, dst, ResolveTimeout); err != nil {
			t.ConnectsLeft--
			return err
		}
	}
	return nil
}

// End is the C tools' ending: "test complete", destroy_nodes, the event
// channel's close (rdma_destroy_event_channel), "return status <ret>". It
// returns nil for ret 0, else a *Status.
func (t *Test) End(ret int) error {
	return End(t.Printf, ret, func() {
		for _, n := range t.Nodes {
			n.Destroy()
		}
	}, t.Ch)
}

// Printf is where a tool's lines go (its printf).
type Printf func(format string, args ...any)

// End is the C tools' ending: "test complete", destroyNodes, the event
// channel's close (rdma_destroy_event_channel), "return status <ret>". It
// returns nil for ret 0, else a *Status.
func End(printf Printf, ret int, destroyNodes func(), ch *cm.EventChannel) error {
	printf("test complete\n")
	destroyNodes()
	ch.Close()
	printf("return status %d\n", ret)
	if ret != 0 {
		return &Status{Code: ret}
	}
	return nil
}

// Events is connect_events (and cmatose.c's disconnect_events): while
// *left is above 0 and the handler returned 0, it takes the channel's
// next event (each wait bounded by stall), hands it to handle and acks
// it. It returns the handler's last status, or the error of a wait (the
// caller prints its line and picks its status).
func Events(ctx context.Context, ch *cm.EventChannel, stall time.Duration, left *int, handle func(*cm.Event) int) (int, error) {
	ret := 0
	for *left > 0 && ret == 0 {
		wctx, cancel := context.WithTimeout(ctx, stall)
		ev, err := ch.GetEvent(wctx)
		cancel()
		if err != nil {
			return ret, err
		}
		ret = handle(ev)
		ev.Ack()
	}
	return ret, nil
}

// PollCQ is poll_cqs on one CQ: it waits for count completions (each wait
// bounded by stall), handing each batch to batch when it is not nil.
func PollCQ(ctx context.Context, cq *verbs.CQ, count int, stall time.Duration, wc []ibv.WorkCompletion,
	batch func(wc []ibv.WorkCompletion)) error {
	for done := 0; done < count; {
		wctx, cancel := context.WithTimeout(ctx, stall)
		got, err := cq.Wait(wctx, wc)
		cancel()
		if err != nil {
			return err
		}
		if batch != nil {
			batch(wc[:got])
		}
		done += got
	}
	return nil
}

// AllocNodes is alloc_nodes: n nodes made by newNode; with ids, each
// gets an ID on ch in ps (the node its context), handed to it by set. At
// a failure it destroys the IDs it made, closes ch and returns a
// *Status of 1, as the C tools' main does.
func AllocNodes[N any](c *cm.CM, ch *cm.EventChannel, n int, newNode func(i int) N, ids bool,
	ps cm.PortSpace, qpType ibv.QPType, set func(n N, id *cm.ID)) ([]N, error) {
	nodes := make([]N, n)
	for i := range nodes {
		nodes[i] = newNode(i)
	}
	if !ids {
		return nodes, nil
	}
	var made []*cm.ID
	for _, n := range nodes {
		id, err := c.CreateID(ch, n, ps, qpType)
		if err != nil {
			for _, id := range made {
				id.Destroy()
			}
			ch.Close()
			return nil, &Status{Code: 1}
		}
		made = append(made, id)
		set(n, id)
	}
	return nodes, nil
}

// GRHSize is the room a UD receive buffer keeps for the GRH.
const GRHSize = 40 // sizeof(struct ibv_grh)

// The CQs of a node: cmatose.c's send and receive CQs; udaddy.c's and
// mckey.c's one CQ is CQ[SendCQ].
const (
	SendCQ = 0
	RecvCQ = 1
)

// Node is struct cmatest_node: an ID with its QP, CQs and message
// buffer, and for a UD QP the peer's address handle, QPN and Q_Key.
type Node struct {
	Idx        int
	ID         *cm.ID
	Connected  bool
	PD         *verbs.PD
	CQ         [2]*verbs.CQ // SendCQ, RecvCQ
	MR         *verbs.MR
	AH         *verbs.AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// VerifyMTU is verify_test_params: with messages, one must fit the port's
// active MTU (-EINVAL). prog names the tool in the line.
func (n *Node) VerifyMTU(prog string, count, size int, printf Printf) int {
	port, err := n.ID.Device().QueryPort(1)
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); count > 0 && size > mtu {
		printf("%s: message_size %d is larger than active mtu %d\n", prog, size, mtu)
		return -22
	}
	return 0
}

// InitUD is udaddy.c's and mckey.c's init_node: the PD, one CQ of
// 2*count entries (2 without messages), the UD QP of count WRs each way
// (1 without), and the message buffer of size bytes after the GRH's
// room. perror prints the line of an error.
func (n *Node) InitUD(prog string, count, size int, printf Printf, perror func(string, error)) int {
	dev := n.ID.Device()
	var err error
	if n.PD, err = dev.AllocPD(); err != nil {
		printf("%s: unable to allocate PD\n", prog)
		return -12
	}
	cqe, wr := 2, 1
	if count > 0 {
		cqe, wr = 2*count, count
	}
	if n.CQ[SendCQ], err = dev.CreateCQ(cqe, nil); err != nil {
		printf("%s: unable to create CQ\n", prog)
		return -12
	}
	cq := n.CQ[SendCQ]
	if _, err := n.ID.CreateQP(n.PD, verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: ibv.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		perror(prog+": unable to create QP", err)
		return -1
	}
	return n.CreateMessages(prog, count, size+GRHSize, printf)
}

// CreateMessages is create_message: with messages, a buffer of size bytes
// registered for local writes.
func (n *Node) CreateMessages(prog string, count, size int, printf Printf) int {
	if count == 0 {
		return 0
	}
	var err error
	if n.MR, err = n.PD.RegMR(make([]byte, size), ibv.AccessLocalWrite); err != nil {
		printf("failed to reg MR\n")
		printf("%s: failed to create messages: %d\n", prog, -1)
		return -1
	}
	return 0
}

// PostRecvs is post_recvs: count receives of size bytes.
func (n *Node) PostRecvs(count, size int, printf Printf) int {
	for i := 0; i < count; i++ {
		if _, err := n.ID.QP().PostRecv(ibv.RecvWR{WRID: uint64(n.Idx),
			SGList: []ibv.SGE{n.MR.SGE(0, size)}}); err != nil {
			printf("failed to post receives: %d\n", -1)
			return -1
		}
	}
	return 0
}

// PostSends is post_sends: count SENDs of size bytes on a connected node,
// wr filling in each one (its opcode and flags, and for UD its
// destination).
func (n *Node) PostSends(count, size int, wr func(i int, wr *ibv.SendWR), printf Printf) int {
	if !n.Connected || count == 0 {
		return 0
	}
	for i := 0; i < count; i++ {
		w := ibv.SendWR{WRID: uint64(n.Idx), Opcode: ibv.WRSend, SGList: []ibv.SGE{n.MR.SGE(0, size)}}
		wr(i, &w)
		if _, err := n.ID.QP().PostSend(w); err != nil {
			printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

// PostUDSends is udaddy.c's and mckey.c's post_sends: count
// SEND_WITH_IMMs carrying the sender's QPN to the peer; flags gives the
// i'th one's flags.
func (n *Node) PostUDSends(count, size int, flags func(i int) ibv.SendFlags, printf Printf) int {
	return n.PostSends(count, size, func(i int, wr *ibv.SendWR) {
		wr.Opcode, wr.Flags, wr.Imm = ibv.WRSendWithImm, flags(i), n.ID.QP().QPN()
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = n.AH, n.RemoteQPN, n.RemoteQKey
	}, printf)
}

// Destroy is destroy_node: the AH, QP, CQs, MR and PD, then the ID (a
// node without an ID has nothing).
func (n *Node) Destroy() {
	if n.ID == nil {
		return
	}
	if n.AH != nil {
		n.AH.Destroy()
	}
	if n.ID.QP() != nil {
		n.ID.DestroyQP()
	}
	for _, cq := range n.CQ {
		if cq != nil {
			cq.Destroy()
		}
	}
	if n.MR != nil {
		n.MR.Dereg()
	}
	if n.PD != nil {
		n.PD.Dealloc()
	}
	n.ID.Destroy()
}

// PrepareUD is what udaddy.c's and mckey.c's handlers do first:
// verify_test_params, init_node and (with recvs) post_recvs, stopping at
// the first that fails.
func (n *Node) PrepareUD(prog string, count, size int, recvs bool, printf Printf, perror func(string, error)) int {
	ret := n.VerifyMTU(prog, count, size, printf)
	if ret == 0 {
		ret = n.InitUD(prog, count, size, printf, perror)
	}
	if ret == 0 && recvs {
		ret = n.PostRecvs(count, size+GRHSize, printf)
	}
	return ret
}

// SetPeer takes the peer's QPN, Q_Key and address handle from a
// resolution or join event (udaddy.c's resolved_handler, mckey.c's
// join_handler); the node is connected unless the handle fails (-1).
func (n *Node) SetPeer(prog string, p cm.UDParam, printf Printf) int {
	n.RemoteQPN, n.RemoteQKey = p.QPNum, p.QKey
	ah, err := n.PD.CreateAH(p.AHAttr)
	if err != nil {
		printf("%s: failure creating address handle\n", prog)
		return -1
	}
	n.AH = ah
	n.Connected = true
	return 0
}
