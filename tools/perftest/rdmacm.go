package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// perftest's rdma_cm paths (-R, -z; perftest_communication.c of perftest
// 4.5): the out-of-band exchange on an RC connection the CM makes on TCP
// port -p (rdma_client_connect, rdma_server_connect), each message one
// SEND, the key messages a binary struct pingpong_dest; and with -R the
// test's QPs, one CM connection each, made on the same port once the
// exchange's listener is gone (create_rdma_cm_connection), disconnected
// by the server at the end (rdma_cm_disconnect_nodes).

// cmResolveTimeout is the 2000 ms every rdma_resolve_addr and
// rdma_resolve_route of perftest takes.
const cmResolveTimeout = 2000 * time.Millisecond

// numOfRetries is NUM_OF_RETRIES: how many ADDR_ERRORs the exchange's
// client takes before it gives up.
const numOfRetries = 10

// Comm message slots: perftest posts one receive of
// sizeof(struct pingpong_dest); softnic's receives are larger, which a
// peer cannot tell.
const (
	commSlot  = 4096
	commRecvs = 2
)

// cmConn is the out-of-band exchange on an rdma_cm connection, as a
// net.Conn whose bytes are the messages: a Write is one SEND, a Read takes
// bytes from the received messages in order. Every perftest exchange
// reads exactly the size the peer writes, so the stream is the messages.
type cmConn struct {
	id       *cm.ID
	ch       *cm.EventChannel
	pd       *verbs.PD
	scq, rcq *verbs.CQ
	mr       *verbs.MR // slot 0 sends, slots 1..commRecvs receive

	mu       sync.Mutex
	deadline time.Time
	abort    chan struct{} // closed when a deadline in the past is set
	pending  []byte
	closed   bool
}

// newCMConn makes the exchange's resources on id (ctx_init of the comm
// context: PD, CQs, buffer, QP through rdma_create_qp) and posts its
// receives.
func newCMConn(id *cm.ID, ch *cm.EventChannel) (*cmConn, error) {
	c := &cmConn{id: id, ch: ch, abort: make(chan struct{})}
	dev := id.Device()
	if dev == nil {
		return nil, errors.New("the rdma_cm ID has no device")
	}
	ok := false
	defer func() {
		if !ok {
			c.free()
		}
	}()
	var err error
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if c.mr, err = c.pd.RegMR(make([]byte, commSlot*(1+commRecvs)), ibv.AccessLocalWrite); err != nil {
		return nil, fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	if c.scq, err = dev.CreateCQ(1, nil); err != nil {
		return nil, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if c.rcq, err = dev.CreateCQ(commRecvs, nil); err != nil {
		return nil, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if _, err = id.CreateQP(c.pd, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: c.scq, RecvCQ: c.rcq,
		Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: commRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, fmt.Errorf("Couldn't create QP: %w", err)
	}
	for i := 1; i <= commRecvs; i++ {
		if err := c.postRecv(i); err != nil {
			return nil, fmt.Errorf("Couldn't post send : %w", err)
		}
	}
	ok = true
	return c, nil
}

func (c *cmConn) postRecv(slot int) error {
	_, err := c.id.QP().PostRecv(ibv.RecvWR{WRID: uint64(slot), SGList: []ibv.SGE{c.mr.SGE(slot*commSlot, commSlot)}})
	return err
}

// waitCtx is the context a wait runs under: the deadline, and an abort.
func (c *cmConn) waitCtx() (context.Context, context.CancelFunc) {
	c.mu.Lock()
	d, abort := c.deadline, c.abort
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	if !d.IsZero() {
		var cancel2 context.CancelFunc
		ctx, cancel2 = context.WithDeadline(ctx, d)
		c1 := cancel
		cancel = func() { cancel2(); c1() }
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-abort:
			cancel()
		case <-stop:
		}
	}()
	return ctx, func() { close(stop); cancel() }
}

func (c *cmConn) wait(cq *verbs.CQ) (ibv.WorkCompletion, error) {
	ctx, cancel := c.waitCtx()
	defer cancel()
	var wc [1]ibv.WorkCompletion
	if _, err := cq.Wait(ctx, wc[:]); err != nil {
		if ctx.Err() != nil {
			return wc[0], os.ErrDeadlineExceeded
		}
		return wc[0], err
	}
	if wc[0].Status != ibv.WCSuccess {
		return wc[0], fmt.Errorf("Bad wc status -- %d -- %d (%v)", int(wc[0].Status), wc[0].WRID, wc[0].Status)
	}
	return wc[0], nil
}

// Write SENDs b (rdma_write_data, rdma_write_keys).
func (c *cmConn) Write(b []byte) (int, error) {
	if len(b) > commSlot {
		return 0, fmt.Errorf("a %d-byte message: more than the exchange's %d", len(b), commSlot)
	}
	copy(c.mr.Buf(), b)
	if _, err := c.id.QP().PostSend(ibv.SendWR{WRID: syncSpecID, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{c.mr.SGE(0, len(b))}}); err != nil {
		return 0, fmt.Errorf("Function ibv_post_send failed: %w", err)
	}
	if _, err := c.wait(c.scq); err != nil {
		return 0, err
	}
	return len(b), nil
}

// syncSpecID is SYNC_SPEC_ID, the exchange's wr_id.
const syncSpecID = 5

// Read takes bytes of the received messages (rdma_read_data,
// rdma_read_keys), reposting each receive once its message is taken.
func (c *cmConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		wc, err := c.wait(c.rcq)
		if err != nil {
			return 0, err
		}
		slot := int(wc.WRID)
		if slot < 1 || slot > commRecvs || wc.ByteLen > commSlot {
			return 0, fmt.Errorf("Bad wc status -- %d -- %d", int(wc.Status), wc.WRID)
		}
		c.pending = append([]byte(nil), c.mr.Buf()[slot*commSlot:slot*commSlot+int(wc.ByteLen)]...)
		if err := c.postRecv(slot); err != nil {
			return 0, fmt.Errorf("Couldn't post send : %w", err)
		}
		if len(c.pending) == 0 {
			return 0, io.ErrUnexpectedEOF
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// SetDeadline bounds the waits of Read and Write; a time in the past
// ends the one under way.
func (c *cmConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	if !t.IsZero() && !t.After(time.Now()) {
		select {
		case <-c.abort:
		default:
			close(c.abort)
		}
	} else {
		select {
		case <-c.abort:
			c.abort = make(chan struct{})
		default:
		}
	}
	return nil
}

func (c *cmConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *cmConn) SetWriteDeadline(t time.Time) error { return c.SetDeadline(t) }
func (c *cmConn) LocalAddr() net.Addr                { return cmAddr(c.id.LocalAddr()) }
func (c *cmConn) RemoteAddr() net.Addr               { return cmAddr(c.id.PeerAddr()) }

type cmAddr netip.AddrPort

func (a cmAddr) Network() string { return "rdma_cm" }
func (a cmAddr) String() string  { return netip.AddrPort(a).String() }

// Close ends the exchange's connection: perftest destroys its ID, which
// disconnects it, and its resources.
func (c *cmConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.id.Disconnect()
	c.free()
	return nil
}

func (c *cmConn) free() {
	if c.id != nil && c.id.QP() != nil {
		c.id.DestroyQP()
	}
	for _, cq := range []*verbs.CQ{c.scq, c.rcq} {
		if cq != nil {
			cq.Destroy()
		}
	}
	if c.mr != nil {
		c.mr.Dereg()
	}
	if c.pd != nil {
		c.pd.Dealloc()
	}
	if c.id != nil {
		c.id.Destroy()
	}
	if c.ch != nil {
		c.ch.Close()
	}
}

// getEvent waits up to d (0: until ctx ends) for the next CM event.
func getEvent(ctx context.Context, ch *cm.EventChannel, d time.Duration) (*cm.Event, error) {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return ch.GetEvent(ctx)
}

// lookupCMAddr resolves a host as check_add_port's getaddrinfo does: IPv4
// (AF_INET, perftest's ai_family) unless --ipv6.
func lookupCMAddr(ctx context.Context, host string, ipv6 bool) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	network := "ip4"
	if ipv6 {
		network = "ip6"
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%s: no address", host)
	}
	return ips[0].Unmap(), nil
}

// sourceAddr is --source_ip as a CM source address (invalid when none).
func (c *Config) sourceAddr() netip.AddrPort {
	if c.SourceIP == "" {
		return netip.AddrPort{}
	}
	a, err := netip.ParseAddr(c.SourceIP)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(a.Unmap(), 0)
}

// bindAddr is the server's rdma_bind_addr address: --source_ip or any
// (getaddrinfo with AI_PASSIVE), at port -p.
func (c *Config) bindAddr() netip.AddrPort {
	a := netip.IPv4Unspecified()
	if c.IPv6 {
		a = netip.IPv6Unspecified()
	}
	if s := c.sourceAddr(); s.IsValid() {
		a = s.Addr()
	}
	return netip.AddrPortFrom(a, uint16(c.Port))
}

// errCMEvent is an event that is not the one perftest waits for.
type errCMEvent struct {
	Msg string
	Ev  cm.EventType
	St  int
}

func (e *errCMEvent) Error() string {
	return fmt.Sprintf("%s %d (%s, status %d)", e.Msg, int(e.Ev), e.Ev, e.St)
}

// cmClientComm is rdma_client_connect: resolve the server's address and
// route, make the exchange's QP, connect and wait for ESTABLISHED.
func (s *session) cmClientComm(ctx context.Context) (*cmConn, error) {
	cfg, env := s.cfg, s.env
	dst, err := lookupCMAddr(ctx, cfg.ServerName, cfg.IPv6)
	if err != nil {
		fmt.Fprint(env.Err, "Problem in resolving basic address and port\n")
		return nil, err
	}
	ch := env.CM.CreateEventChannel()
	id, err := env.CM.CreateID(ch, nil, cm.PSTCP, ibv.QPTypeRC)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("rdma_create_id failed: %w", err)
	}
	fail := func(err error) (*cmConn, error) {
		id.Destroy()
		ch.Close()
		return nil, err
	}
	resolve := func(do func() error, what string, retry, want cm.EventType, exhausted string, exhaustedErr error) error {
		for try := 0; ; try++ {
			if try == numOfRetries {
				fmt.Fprintf(env.Err, exhausted, numOfRetries)
				return exhaustedErr
			}
			if err := do(); err != nil {
				fmt.Fprintf(env.Err, "%s failed\n", what)
				return err
			}
			ev, err := getEvent(ctx, ch, env.Stall)
			if err != nil {
				fmt.Fprint(env.Err, "rdma_get_cm_events failed\n")
				return err
			}
			t, st := ev.Type, ev.Status
			ev.Ack()
			if t == retry {
				continue
			}
			if t != want {
				fmt.Fprintf(env.Err, "unexpected CM event %d\n", int(t))
				return &errCMEvent{"unexpected CM event", t, st}
			}
			return nil
		}
	}
	if err := resolve(func() error {
		return id.ResolveAddr(cfg.sourceAddr(), netip.AddrPortFrom(dst, uint16(cfg.Port)), cmResolveTimeout)
	}, "rdma_resolve_addr", cm.EventAddrError, cm.EventAddrResolved,
		"Received %d times ADDR_ERROR\n", errors.New("address resolution failed")); err != nil {
		return fail(err)
	}
	if err := resolve(func() error { return id.ResolveRoute(cmResolveTimeout) }, "rdma_resolve_route",
		cm.EventRouteError, cm.EventRouteResolved,
		"Received %d times ADDR_ERROR - aborting\n", errors.New("route resolution failed")); err != nil {
		return fail(err)
	}
	c, err := newCMConn(id, ch)
	if err != nil {
		fmt.Fprint(env.Err, " Unable to create the resources needed by comm struct\n")
		return fail(err)
	}
	// The exchange's verb is SEND: no responder resources.
	if err := id.Connect(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		fmt.Fprint(env.Err, "Function rdma_connect failed\n")
		c.Close()
		return nil, err
	}
	ev, err := getEvent(ctx, ch, env.Stall)
	if err != nil {
		fmt.Fprint(env.Err, "rdma_get_cm_events failed\n")
		c.Close()
		return nil, err
	}
	t, st := ev.Type, ev.Status
	ev.Ack()
	if t != cm.EventEstablished {
		fmt.Fprintf(env.Err, "Unexpected CM event bl blka %d\n", int(t))
		c.Close()
		return nil, &errCMEvent{"Unexpected CM event", t, st}
	}
	go drainEvents(ch)
	return c, nil
}

// cmServerComm is rdma_server_connect: listen on port -p, take one
// connection request, make the exchange's QP, accept, and destroy the
// listener (the test's QPs listen on the same port later).
func (s *session) cmServerComm(ctx context.Context) (*cmConn, error) {
	cfg, env := s.cfg, s.env
	ch := env.CM.CreateEventChannel()
	lid, err := env.CM.CreateID(ch, nil, cm.PSTCP, ibv.QPTypeRC)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("rdma_create_id failed: %w", err)
	}
	if err := lid.BindAddr(cfg.bindAddr()); err != nil {
		fmt.Fprint(env.Err, " rdma_bind_addr failed\n")
		lid.Destroy()
		ch.Close()
		return nil, err
	}
	if err := lid.Listen(cfg.NumQP); err != nil {
		fmt.Fprint(env.Err, "rdma_listen failed\n")
		lid.Destroy()
		ch.Close()
		return nil, err
	}
	ev, err := getEvent(ctx, ch, env.AcceptTimeout)
	if err != nil {
		fmt.Fprint(env.Err, "rdma_get_cm_events failed\n")
		lid.Destroy()
		ch.Close()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("no client connected within %v", env.AcceptTimeout)
		}
		return nil, err
	}
	if ev.Type != cm.EventConnectRequest {
		fmt.Fprintf(env.Err, "bad event waiting for connect request %d\n", int(ev.Type))
		t, st := ev.Type, ev.Status
		ev.Ack()
		lid.Destroy()
		ch.Close()
		return nil, &errCMEvent{"bad event waiting for connect request", t, st}
	}
	id := ev.ID
	c, err := newCMConn(id, nil)
	if err != nil {
		fmt.Fprint(env.Err, " Unable to create the resources needed by comm struct\n")
		id.Reject(nil)
		ev.Ack()
		id.Destroy()
		lid.Destroy()
		ch.Close()
		return nil, err
	}
	if err := id.Accept(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		fmt.Fprint(env.Err, "Function rdma_accept failed\n")
		ev.Ack()
		c.Close()
		lid.Destroy()
		ch.Close()
		return nil, err
	}
	ev.Ack()
	lid.Destroy()
	// The connection's later events (ESTABLISHED, DISCONNECTED) come on
	// ch; nobody waits for them, as in perftest, but they are acked.
	c.ch = ch
	go drainEvents(ch)
	return c, nil
}

// drainEvents acks the events of a channel nobody waits on, until it is
// closed.
func drainEvents(ch *cm.EventChannel) {
	for {
		ev, err := ch.GetEvent(context.Background())
		if err != nil {
			return
		}
		ev.Ack()
	}
}

// cmNodes are the test's QPs' CM connections (struct cma_master).
type cmNodes struct {
	ch        *cm.EventChannel
	ids       []*cm.ID
	connected []bool
}

// cmSpace is the test QPs' port space and QP type
// (rdma_cm_allocate_nodes): the UDP port space for UD, else TCP.
func (c *Config) cmSpace() (cm.PortSpace, ibv.QPType) {
	if c.Conn == UD {
		return cm.PSUDP, ibv.QPTypeUD
	}
	return cm.PSTCP, ibv.QPTypeRC
}

// udNeedsPeer is rdma_cm_request_ud_connection_parameters' "needed": a
// UD run whose server sends too (latency; perftest's duplex bandwidth,
// which softnic lacks) learns the client's address from a first
// datagram, SEND_WITH_IMM the client's QPN.
func (c *Config) udNeedsPeer() bool { return c.Conn == UD && c.Test == Lat }

// udGetPeer is rdma_cm_initialize_ud_connection_parameters: the server
// waits for QP i's first datagram and answers its sender: an AH from the
// completion and the GRH, the QPN from the immediate data, its own QP's
// Q_Key.
func (s *session) udGetPeer(ctx context.Context, i int) error {
	r := s.res
	cq := r.recvCQ
	if cq == nil {
		cq = r.sendCQ
	}
	wctx, cancel := context.WithTimeout(ctx, s.env.Stall)
	defer cancel()
	var wc [1]ibv.WorkCompletion
	if _, err := cq.Wait(wctx, wc[:]); err != nil {
		return fmt.Errorf("Failed to poll CQ for the RDMA CM UD connection parameters: %w", err)
	}
	if wc[0].Status != ibv.WCSuccess || wc[0].Opcode != ibv.WCRecv {
		return fmt.Errorf("Failed to poll CQ.\nBad WQE status when trying to create AH for UD connection in RDMA CM:\n Status: %d ; ID: %d.",
			int(wc[0].Status), wc[0].WRID)
	}
	off := r.localBase(i)
	ah, err := r.pd.CreateAHFromWC(&wc[0], r.buf[off:off+UDAddition], uint8(s.cfg.IBPort))
	if err != nil {
		return fmt.Errorf("Failed to create AH for RDMA CM connection: %w", err)
	}
	r.ahs = append(r.ahs, ah)
	attr, _ := r.qps[i].Query()
	r.udPeers[i] = udPeer{ah: ah, qpn: wc[0].Imm, qkey: attr.QKey}
	return nil
}

// udSetPeer is rdma_cm_establish_ud_connection: the client's AH, QPN and
// Q_Key from the SIDR REP; when the server sends too, a first datagram
// carrying the client's QPN (rdma_cm_send_ud_connection_parameters).
func (s *session) udSetPeer(ctx context.Context, i int, p cm.UDParam) error {
	r := s.res
	ah, err := r.pd.CreateAH(p.AHAttr)
	if err != nil {
		return fmt.Errorf("Failed to create AH for RDMA CM connection: %w", err)
	}
	r.ahs = append(r.ahs, ah)
	r.udPeers[i] = udPeer{ah: ah, qpn: p.QPNum, qkey: p.QKey}
	if !s.cfg.udNeedsPeer() {
		return nil
	}
	if _, err := r.qps[i].PostSend(ibv.SendWR{Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled, Imm: r.qps[i].QPN(),
		AH: ah, RemoteQPN: p.QPNum, RemoteQKey: p.QKey, SGList: []ibv.SGE{r.mr.SGE(r.localBase(i), 4)}}); err != nil {
		return fmt.Errorf("Failed to post send for connection %d for RDMA CM UD send connection parameters: %w", i, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.env.Stall)
	defer cancel()
	var wc [1]ibv.WorkCompletion
	if _, err := r.sendCQ.Wait(wctx, wc[:]); err != nil || wc[0].Status != ibv.WCSuccess {
		return fmt.Errorf("Failed to poll CQ.\nBad WQE status when trying to send UD connection parameters in RDMA CM:\n Status: %d ; ID: %d.",
			int(wc[0].Status), wc[0].WRID)
	}
	return nil
}

// cmConnParam is the test QPs' rdma_conn_param: responder resources and
// initiator depth for READ and atomics, retry counts 7.
func (s *session) cmConnParam(outReads int) *cm.ConnParam {
	p := &cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}
	if s.cfg.Verb == Read || s.cfg.Verb == Atomic {
		p.ResponderResources, p.InitiatorDepth = uint8(outReads), uint8(outReads)
	}
	return p
}

// cmEventError is rdma_cm_event_error_handler's and error_handler's
// lines.
func (s *session) cmEventError(ev *cm.Event) error {
	fmt.Fprintf(s.env.Err, "RDMA CM event error:\nEvent: %s; error: %d.\n\nERRNO: Success.\n", ev.Type, ev.Status)
	return &errCMEvent{"RDMA CM event error", ev.Type, ev.Status}
}

// cmConnectQPs is create_rdma_cm_connection: a sync on the exchange, the
// CM connections of the test's QPs (mk makes the resources, with each QP
// on its ID), another sync.
//
// Unlike perftest, the server listens before the first sync, not after
// it: perftest's server listens only once its half of the sync is sent and
// acknowledged, while the client connects as soon as it has the server's
// half, so a quick client's REQ can find no listener and be rejected with
// reason 8, invalid service ID (cm.c: cm_req_handler). perftest's client
// tries again 100 ms later; the rxe guest's perftest 4.5 instead crashes
// after the REJECTED event. No REQ can come before the sync, so listening
// early changes nothing else.
func (s *session) cmConnectQPs(ctx context.Context, outReads int, mk func(ids []*cm.ID) (*res, error)) error {
	var lid *cm.ID
	if s.cfg.Server() {
		var err error
		if lid, err = s.cmListen(); err != nil {
			fmt.Fprint(s.env.Err, "Failed to create RDMA CM connection.\n")
			return err
		}
		defer func() {
			if lid != nil {
				lid.Destroy()
			}
		}()
	}
	var zero Dest
	if _, err := s.comm.handshake(zero); err != nil {
		fmt.Fprint(s.env.Err, "Failed to sync between client and server before creating RDMA CM connection.\n")
		return err
	}
	var err error
	if s.cfg.Server() {
		err = s.cmServerQPs(ctx, outReads, mk)
		lid.Destroy() // rdma_cm_server_connection: once every QP is connected
		lid = nil
	} else {
		err = s.cmClientQPs(ctx, outReads, mk)
	}
	if err != nil {
		fmt.Fprint(s.env.Err, "Failed to create RDMA CM connection.\n")
		return err
	}
	if _, err := s.comm.handshake(zero); err != nil {
		fmt.Fprint(s.env.Err, "Failed to sync between client and server after creating RDMA CM connection.\n")
		return err
	}
	return nil
}

// cmListen is the first half of rdma_cm_server_connection: the event
// channel of the test's IDs and an ID listening on port -p.
func (s *session) cmListen() (*cm.ID, error) {
	cfg, env := s.cfg, s.env
	n := &cmNodes{ch: env.CM.CreateEventChannel()}
	s.nodes = n
	ps, qt := cfg.cmSpace()
	lid, err := env.CM.CreateID(n.ch, nil, ps, qt)
	if err != nil {
		return nil, fmt.Errorf("Failed to create RDMA CM server control ID: %w", err)
	}
	if err := lid.BindAddr(cfg.bindAddr()); err != nil {
		lid.Destroy()
		return nil, fmt.Errorf("Failed to bind RDMA CM address on the server: %w", err)
	}
	if err := lid.Listen(cfg.NumQP); err != nil {
		lid.Destroy()
		return nil, fmt.Errorf("Failed to listen on RDMA CM server listen ID: %w", err)
	}
	return lid, nil
}

// cmServerQPs is the rest of rdma_cm_server_connection, once cmListen
// listens: each connection request as it comes gets its QP (the first the
// run's resources too) and is accepted (rdma_cm_connection_request_handler),
// until there is one per QP.
func (s *session) cmServerQPs(ctx context.Context, outReads int, mk func(ids []*cm.ID) (*res, error)) error {
	cfg, env := s.cfg, s.env
	n := s.nodes
	for len(n.ids) < cfg.NumQP {
		ev, err := getEvent(ctx, n.ch, env.Stall)
		if err != nil {
			return fmt.Errorf("Failed to get RDMA CM event: %w", err)
		}
		switch ev.Type {
		case cm.EventConnectRequest:
			err = s.cmTake(ctx, ev.ID, outReads, mk)
		case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
			err = s.cmEventError(ev)
		}
		ev.Ack()
		if err != nil {
			return err
		}
	}
	return nil
}

// cmTake makes the QP of the connection request on id, the run's
// resources with it if it is the first, and accepts it; a request it
// cannot take is rejected.
func (s *session) cmTake(ctx context.Context, id *cm.ID, outReads int, mk func(ids []*cm.ID) (*res, error)) error {
	cfg, n := s.cfg, s.nodes
	// The ID is the node's from now on: cmDestroyNodes destroys it, and
	// its QP when it has one, whatever happens next.
	i := len(n.ids)
	n.ids = append(n.ids, id)
	n.connected = append(n.connected, false)
	var err error
	if s.res == nil {
		if s.res, err = mk([]*cm.ID{id}); err == nil {
			s.res.udPeers = make([]udPeer, cfg.NumQP)
		}
	} else {
		err = s.res.addQP(id)
	}
	if err != nil {
		id.Reject(nil)
		return err
	}
	// perftest 4.5 accepts with its own out_reads (later perftests take
	// the smaller of it and the request's).
	p := s.cmConnParam(outReads)
	if cfg.Conn == UD {
		p.QPNum = id.QP().QPN()
		if cfg.udNeedsPeer() {
			// rdma_cm_request_ud_connection_parameters: a receive for the
			// client's first datagram
			off := s.res.localBase(i)
			if _, err := id.QP().PostRecv(ibv.RecvWR{SGList: []ibv.SGE{s.res.mr.SGE(off, UDAddition+4)}}); err != nil {
				return fmt.Errorf("Failed to post receive for connection %d for RDMA CM UD request connection parameters: %w", i, err)
			}
		}
	}
	if err := id.Accept(p); err != nil {
		return fmt.Errorf("Failed to accept RDMA CM connection: %w", err)
	}
	if cfg.udNeedsPeer() {
		if err := s.udGetPeer(ctx, i); err != nil {
			return err
		}
	}
	if cfg.Conn == RC {
		// perftest sets min_rnr_timer on the accepted QP and ignores the
		// outcome.
		id.QP().Modify(&ibv.QPAttr{MinRNRTimer: minRNRTimer}, ibv.QPAttrMinRNRTimer)
	}
	n.connected[i] = true
	return nil
}

// cmClientQPs is rdma_cm_client_connection: up to 10 tries, 100 ms
// apart, of resolving each QP's ID, making the resources, connecting and
// waiting for every ESTABLISHED.
func (s *session) cmClientQPs(ctx context.Context, outReads int, mk func(ids []*cm.ID) (*res, error)) error {
	const maxRetries = 10
	cfg, env := s.cfg, s.env
	dst, err := lookupCMAddr(ctx, cfg.ServerName, cfg.IPv6)
	if err != nil {
		return fmt.Errorf("Failed to get RDMA CM address - Error: %w", err)
	}
	for try := 0; try < maxRetries; try++ {
		err := s.cmClientTry(ctx, outReads, netip.AddrPortFrom(dst, uint16(cfg.Port)), mk)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		var ce *errCMEvent
		if !errors.As(err, &ce) {
			return err
		}
		s.cmDestroyNodes()
		if s.res != nil {
			s.res.close()
			s.res = nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(env.Err, "Failed to connect RDMA CM client, tried %d times.\nERRNO: Success.\n", maxRetries)
	return fmt.Errorf("Failed to connect RDMA CM client, tried %d times", maxRetries)
}

func (s *session) cmClientTry(ctx context.Context, outReads int, dst netip.AddrPort, mk func(ids []*cm.ID) (*res, error)) error {
	cfg, env := s.cfg, s.env
	n := &cmNodes{ch: env.CM.CreateEventChannel()}
	s.nodes = n
	ps, qt := cfg.cmSpace()
	for range cfg.NumQP {
		id, err := env.CM.CreateID(n.ch, nil, ps, qt)
		if err != nil {
			return fmt.Errorf("Failed to create RDMA CM ID: %w", err)
		}
		n.ids = append(n.ids, id)
		n.connected = append(n.connected, false)
	}
	for i, id := range n.ids {
		if err := id.ResolveAddr(cfg.sourceAddr(), dst, cmResolveTimeout); err != nil {
			return fmt.Errorf("Failed to resolve RDMA CM address for cm node %d: %w", i, err)
		}
	}
	index := func(id *cm.ID) int {
		for i, x := range n.ids {
			if x == id {
				return i
			}
		}
		return -1
	}
	// connect sends the REQs of ids (rdma_cm_route_handler's rdma_connect).
	// The first ID connects alone and the others once it is established:
	// perftest connects every ID at once, and its server listens only
	// after the sync before, so a quick client's REQs can find no listener
	// (REJ reason 8, invalid service ID; cm.c: cm_req_handler). When only
	// some of them do, perftest's client destroys the others to try again
	// (rdma_cm_destroy_cma; cm.c: cm_destroy_id sends REJ, timeout, for a
	// REQ pending), which the server may already have taken, and perftest
	// 4.5's server then fails ("Couldn't create rdma old QP"). One REQ first
	// leaves the server nothing to lose on such a retry; the connections
	// made are the same.
	connect := func(ids []*cm.ID) error {
		for _, id := range ids {
			if err := id.Connect(s.cmConnParam(outReads)); err != nil {
				return fmt.Errorf("Failed to connect through RDMA CM: %w", err)
			}
		}
		return nil
	}
	routes, established := 0, 0
	for established < cfg.NumQP {
		ev, err := getEvent(ctx, n.ch, env.Stall)
		if err != nil {
			return fmt.Errorf("Failed to get RDMA CM event: %w", err)
		}
		i := index(ev.ID)
		switch ev.Type {
		case cm.EventAddrResolved:
			if err := ev.ID.ResolveRoute(cmResolveTimeout); err != nil {
				ev.Ack()
				return fmt.Errorf("Failed to resolve RDMA CM route: %w", err)
			}
		case cm.EventRouteResolved:
			routes++
			if routes == cfg.NumQP {
				// Every route is known: the resources, then a QP and a
				// connect per ID (rdma_cm_route_handler).
				if s.res, err = mk(n.ids); err != nil {
					ev.Ack()
					return err
				}
				s.res.udPeers = make([]udPeer, len(n.ids))
				if err := connect(n.ids[:1]); err != nil {
					ev.Ack()
					return err
				}
			}
		case cm.EventEstablished:
			if i >= 0 {
				n.connected[i] = true
				if cfg.Conn == UD {
					if err := s.udSetPeer(ctx, i, ev.UD); err != nil {
						ev.Ack()
						return err
					}
				}
			}
			if established++; established == 1 {
				if err := connect(n.ids[1:]); err != nil {
					ev.Ack()
					return err
				}
			}
		case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
			err := s.cmEventError(ev)
			ev.Ack()
			return err
		}
		ev.Ack()
	}
	return nil
}

// cmDisconnect is rdma_cm_disconnect_nodes and rdma_cm_destroy_qps: the
// server disconnects every connected QP, both sides wait for their
// DISCONNECTED events; then the QPs and IDs go.
func (s *session) cmDisconnect() {
	n := s.nodes
	if n == nil {
		return
	}
	if s.cfg.Conn == UD {
		s.cmDestroyNodes() // rdma_cm_disconnect_nodes: nothing to disconnect
		return
	}
	left := 0
	for i, id := range n.ids {
		if !n.connected[i] {
			continue
		}
		left++
		if s.cfg.Server() {
			id.Disconnect()
		}
	}
	for left > 0 {
		ev, err := getEvent(context.Background(), n.ch, s.env.Stall)
		if err != nil {
			break
		}
		if ev.Type == cm.EventDisconnected {
			left--
		}
		ev.Ack()
	}
	s.cmDestroyNodes()
}

// cmDestroyNodes destroys the nodes' QPs (which the resources then do
// not destroy again), IDs and channel.
func (s *session) cmDestroyNodes() {
	n := s.nodes
	if n == nil {
		return
	}
	// Events still queued (and any to come) are acked: a destroy waits
	// for its ID's events' acks.
	go drainEvents(n.ch)
	for _, id := range n.ids {
		if id.QP() != nil {
			id.DestroyQP()
		}
		id.Destroy()
	}
	if s.res != nil {
		s.res.qps = nil
	}
	n.ch.Close()
	s.nodes = nil
}
