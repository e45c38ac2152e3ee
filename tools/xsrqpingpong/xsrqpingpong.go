// Package xsrqpingpong is softnic's ibv_xsrq_pingpong (rdma-core
// libibverbs/examples/xsrq_pingpong.c): XRC messages between a server and
// its clients, each side receiving on one XRC SRQ of its XRC domain. Per
// client each side has an XRC_RECV QP (the target of the peer's sends)
// and an XRC_SEND QP (towards the peer's XRC_RECV QP); every SEND names
// the peer's SRQ number. The out-of-band exchange, the modify sequence,
// the send pattern and the output lines are the C tool's, so each side
// pairs with ibv_xsrq_pingpong on an XRC-capable NIC.
//
// softnic differs in one respect: the C tool opens its XRC domain on the
// file /tmp/xrc_domain, so that the clients on one host share it, and a
// server with -c N sends to client i round robin over the XRC_SEND QPs of
// all its clients, relying on client j's XRC_RECV QP to deliver into
// client i's SRQ. softnic's XRC domains are shared only inside one
// process (verbs.Device.OpenXRCD), so softnic clients in separate
// processes do not share one; a softnic server still sends round robin,
// as the C server does, and is therefore run with -c 1 against softnic
// clients, or with -c N against C clients on one XRC host.
package xsrqpingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/oob"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// The out-of-band messages (xsrq_pingpong.c MSG_FORMAT, MSG_SIZE,
// TERMINATION_MSG): "LID:RECVQPN:SENDQPN:PSN:SRQN:GID" in
// "%04x:%06x:%06x:%06x:%06x:%32s" with its NUL, 66 bytes; then "END" and
// its NUL at the end of the run.
const (
	MsgSize  = 66
	termSize = 4
)

// XRCDKey is the key of the domain the tool opens, the C tool's file.
const XRCDKey = "/tmp/xrc_domain"

// Config is the tool's options (xsrq_pingpong.c init and main).
type Config struct {
	ServerName string // client when set
	Port       int    // -p, 18515
	IBDev      string // -d
	IBPort     int    // -i, 1
	Size       int    // -s, 4096
	MTU        ibv.MTU
	Clients    int // -c, 1 (server only)
	NumTests   int // -n, 5
	SL         int // -l
	Events     bool
	// GIDIndex is -g; the C tool's default is -1 (no GID), softnic's 0:
	// RoCE needs a GRH.
	GIDIndex int
}

// Defaults returns the C tool's defaults (xsrq_pingpong.c init).
func Defaults() Config {
	return Config{Port: 18515, IBPort: 1, Size: 4096, MTU: ibv.MTU1024, Clients: 1, NumTests: 5}
}

// MaxClients bounds -c.
const MaxClients = 1024

// dest is one side's address message (struct pingpong_dest).
type dest struct {
	LID     uint16
	RecvQPN uint32
	SendQPN uint32
	PSN     uint32
	SRQN    uint32
	GID     verbs.GID
}

// format is send_local_dest's sprintf(MSG_FORMAT), NUL-terminated.
func (d dest) format() [MsgSize]byte {
	var b [MsgSize]byte
	copy(b[:], fmt.Sprintf("%04x:%06x:%06x:%06x:%06x:%32s", d.LID, d.RecvQPN, d.SendQPN, d.PSN, d.SRQN, pingpong.WireGID(d.GID)))
	return b
}

// parseDest is recv_remote_dest's sscanf(MSG_SSCAN), strict.
func parseDest(b []byte) (dest, error) {
	var d dest
	s := string(b)
	if i := indexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	var lid, rq, sq, psn, srqn uint64
	fields := [5]*uint64{&lid, &rq, &sq, &psn, &srqn}
	rest := s
	for i, f := range fields {
		j := indexByte(rest, ':')
		if j < 0 {
			return d, fmt.Errorf("address message %q: field %d missing", s, i+1)
		}
		v, err := strconv.ParseUint(rest[:j], 16, 32)
		if err != nil {
			return d, fmt.Errorf("address message %q: field %d: %v", s, i+1, err)
		}
		*f = v
		rest = rest[j+1:]
	}
	g, err := pingpong.ParseWireGID(rest)
	if err != nil {
		return d, fmt.Errorf("address message %q: %v", s, err)
	}
	d = dest{LID: uint16(lid), RecvQPN: uint32(rq) & 0xffffff, SendQPN: uint32(sq) & 0xffffff,
		PSN: uint32(psn) & 0xffffff, SRQN: uint32(srqn) & 0xffffff, GID: g}
	return d, nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// line is ADDR_FORMAT: "%8s: LID %04x, QPN RECV %06x SEND %06x, PSN %06x,
// SRQN %06x, GID %s".
func (d dest) line(side string) string {
	return fmt.Sprintf("%8s: LID %04x, QPN RECV %06x SEND %06x, PSN %06x, SRQN %06x, GID %s\n",
		side, d.LID, d.RecvQPN, d.SendQPN, d.PSN, d.SRQN, pingpong.InetNtop6(d.GID))
}

// state is struct pingpong_context.
type state struct {
	cfg     Config
	env     toolnic.Env
	dev     *verbs.Device
	pd      *verbs.PD
	mr      *verbs.MR
	buf     []byte
	ch      *verbs.CompChannel // the receive CQ's
	sendCh  *verbs.CompChannel
	sendCQ  *verbs.CQ
	recvCQ  *verbs.CQ
	xrcd    *verbs.XRCD
	srq     *verbs.SRQ
	srqn    uint32
	recvQP  []*verbs.QP
	sendQP  []*verbs.QP
	rem     []dest
	conns   []*oob.Conn
	ppCnt   []int
	myPSN   []uint32
	gid     verbs.GID
	sgidIdx int
}

// Run runs one side: the client when cfg.ServerName is set. It prints the
// C tool's lines to env.Out and returns nil after "success".
func Run(ctx context.Context, cfg Config, env toolnic.Env) (err error) {
	switch {
	case cfg.Size < 1:
		return fmt.Errorf("invalid size %d", cfg.Size)
	case cfg.NumTests < 1:
		return fmt.Errorf("invalid number of tests %d", cfg.NumTests)
	case cfg.Clients < 1 || cfg.Clients > MaxClients:
		return fmt.Errorf("invalid number of clients %d (1..%d)", cfg.Clients, MaxClients)
	}
	if cfg.ServerName != "" {
		cfg.Clients = 1
	}
	env = env.WithDefaults()
	s := &state{cfg: cfg, env: env, dev: env.Dev}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()
	if err := s.init(); err != nil {
		return err
	}
	if err := s.postRecv(cfg.Clients); err != nil {
		return err
	}
	if cfg.ServerName != "" {
		err = s.clientConnect(ctx)
	} else {
		err = s.serverConnect(ctx)
		for i := 0; err == nil && i < cfg.Clients; i++ {
			err = s.postSend(i)
		}
	}
	if err != nil {
		return err
	}
	if err := s.loop(ctx); err != nil {
		return err
	}
	if err := s.termination(); err != nil {
		return err
	}
	fmt.Fprintln(env.Out, "success")
	return nil
}

// init is pp_init_ctx and create_qps.
func (s *state) init() error {
	c := &s.cfg
	var err error
	s.gid, s.sgidIdx, err = pingpong.LocalGID(pingpong.Config{IBPort: c.IBPort, GIDIndex: c.GIDIndex}, s.env)
	if err != nil {
		return err
	}
	s.buf = make([]byte, c.Size)
	// Always a channel: the waits sleep on it (verbs.CQ.Wait), with -e
	// or without.
	s.ch = s.dev.CreateCompChannel()
	s.sendCh = s.dev.CreateCompChannel()
	if s.pd, err = s.dev.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if s.mr, err = s.pd.RegMR(s.buf, ibv.AccessLocalWrite); err != nil {
		return fmt.Errorf("Couldn't register MR: %w", err)
	}
	if s.xrcd, err = s.dev.OpenXRCD(XRCDKey); err != nil {
		return fmt.Errorf("Couldn't Open the XRC Domain: %w", err)
	}
	if s.recvCQ, err = s.dev.CreateCQ(c.Clients, s.ch); err != nil {
		return fmt.Errorf("Couldn't create recv CQ: %w", err)
	}
	if s.sendCQ, err = s.dev.CreateCQ(c.Clients, s.sendCh); err != nil {
		return fmt.Errorf("Couldn't create send CQ: %w", err)
	}
	s.srq, err = s.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: uint32(c.Clients), MaxSGE: 1},
		Type: ibv.SRQTypeXRC, XRCD: s.xrcd, CQ: s.recvCQ})
	if err != nil {
		return fmt.Errorf("Couldn't create SRQ: %w", err)
	}
	if s.srqn, err = s.srq.Num(); err != nil {
		return fmt.Errorf("Couldn't get SRQ num: %w", err)
	}
	s.recvQP = make([]*verbs.QP, c.Clients)
	s.sendQP = make([]*verbs.QP, c.Clients)
	s.rem = make([]dest, c.Clients)
	s.conns = make([]*oob.Conn, c.Clients)
	s.ppCnt = make([]int, c.Clients)
	s.myPSN = make([]uint32, c.Clients)
	mask := ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrAccessFlags
	for i := range c.Clients {
		if s.recvQP[i], err = s.xrcd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCRecv}); err != nil {
			return fmt.Errorf("Couldn't create recv QP[%d]: %w", i, err)
		}
		if err := s.recvQP[i].Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: uint8(c.IBPort),
			AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead}, mask); err != nil {
			return fmt.Errorf("Failed to modify recv QP[%d] to INIT: %w", i, err)
		}
		s.sendQP[i], err = s.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCSend, SendCQ: s.sendCQ,
			Cap: ibv.QPCap{MaxSendWR: uint32(c.Clients * c.NumTests), MaxSendSGE: 1}})
		if err != nil {
			return fmt.Errorf("Couldn't create send QP[%d]: %w", i, err)
		}
		if err := s.sendQP[i].Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: uint8(c.IBPort)}, mask); err != nil {
			return fmt.Errorf("Failed to modify send QP[%d] to INIT: %w", i, err)
		}
	}
	return nil
}

// close is pp_close_ctx, in its order.
func (s *state) close() error {
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := range s.sendQP {
		if s.sendQP[i] != nil {
			keep(s.sendQP[i].Destroy())
		}
		if s.recvQP[i] != nil {
			keep(s.recvQP[i].Destroy())
		}
		if s.conns[i] != nil {
			s.conns[i].Close()
		}
	}
	if s.srq != nil {
		keep(s.srq.Destroy())
	}
	if s.xrcd != nil {
		keep(s.xrcd.Close())
	}
	for _, cq := range []*verbs.CQ{s.sendCQ, s.recvCQ} {
		if cq != nil {
			keep(cq.Destroy())
		}
	}
	if s.mr != nil {
		keep(s.mr.Dereg())
	}
	if s.pd != nil {
		keep(s.pd.Dealloc())
	}
	return errors.Join(errs...)
}

// postRecv is pp_post_recv: n receives of the whole buffer on the SRQ.
func (s *state) postRecv(n int) error {
	for range n {
		if _, err := s.srq.PostRecv(ibv.RecvWR{WRID: 0, SGList: []ibv.SGE{s.mr.SGE(0, s.cfg.Size)}}); err != nil {
			return fmt.Errorf("Failed to post receive to SRQ: %w", err)
		}
	}
	return nil
}

// postSend is pp_post_send: a SEND of the buffer to client index's SRQ,
// over the XRC_SEND QP of client (index + sends so far) % clients, the
// last one signaled.
func (s *state) postSend(index int) error {
	qpi := (index + s.ppCnt[index]) % s.cfg.Clients
	s.ppCnt[index]++
	flags := ibv.SendFlags(0)
	if s.ppCnt[index] >= s.cfg.NumTests {
		flags = ibv.SendSignaled
	}
	_, err := s.sendQP[qpi].PostSend(ibv.SendWR{WRID: uint64(index), Opcode: ibv.WRSend, Flags: flags,
		SGList: []ibv.SGE{s.mr.SGE(0, s.cfg.Size)}, RemoteSRQN: s.rem[index].SRQN})
	if err != nil {
		return fmt.Errorf("Couldn't post send: %w", err)
	}
	return nil
}

// sendLocalDest is send_local_dest.
func (s *state) sendLocalDest(c *oob.Conn, index int) error {
	s.myPSN[index] = s.env.PSN()
	d := dest{RecvQPN: s.recvQP[index].QPN(), SendQPN: s.sendQP[index].QPN(), PSN: s.myPSN[index], SRQN: s.srqn, GID: s.gid}
	fmt.Fprint(s.env.Out, d.line("local"))
	msg := d.format()
	if _, err := c.Write(msg[:]); err != nil {
		return fmt.Errorf("Couldn't send local address: %w", err)
	}
	return nil
}

// recvRemoteDest is recv_remote_dest.
func (s *state) recvRemoteDest(c *oob.Conn, index int) error {
	var b [MsgSize]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("Couldn't read remote address [%d]: %w", index, err)
	}
	d, err := parseDest(b[:])
	if err != nil {
		return fmt.Errorf("Couldn't read remote address [%d]: %w", index, err)
	}
	fmt.Fprint(s.env.Out, d.line("remote"))
	s.rem[index] = d
	s.conns[index] = c
	return nil
}

// connectQPs is connect_qps: the XRC_RECV QP to RTR and RTS towards the
// peer's XRC_SEND QP, the XRC_SEND QP towards the peer's XRC_RECV QP.
func (s *state) connectQPs(index int) error {
	c, rem := &s.cfg, s.rem[index]
	pc := pingpong.Config{SL: c.SL, IBPort: c.IBPort}
	av := pingpong.AHAttr(pc, pingpong.Dest{LID: rem.LID, GID: rem.GID}, s.sgidIdx, 5)
	err := s.recvQP[index].Modify(&ibv.QPAttr{State: ibv.QPStateRTR, DestQPN: rem.SendQPN, PathMTU: c.MTU,
		RQPSN: rem.PSN, MinRNRTimer: 12, AHAttr: av},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer)
	if err != nil {
		return pingpong.NoGRHHint(pingpong.Dest{GID: rem.GID}, fmt.Errorf("Failed to modify recv QP[%d] to RTR: %w", index, err))
	}
	if err := s.recvQP[index].Modify(&ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14, SQPSN: s.myPSN[index]},
		ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrSQPSN); err != nil {
		return fmt.Errorf("Failed to modify recv QP[%d] to RTS: %w", index, err)
	}
	err = s.sendQP[index].Modify(&ibv.QPAttr{State: ibv.QPStateRTR, DestQPN: rem.RecvQPN, PathMTU: c.MTU,
		RQPSN: rem.PSN, AHAttr: av},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN)
	if err != nil {
		return fmt.Errorf("Failed to modify send QP[%d] to RTR: %w", index, err)
	}
	if err := s.sendQP[index].Modify(&ibv.QPAttr{State: ibv.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
		SQPSN: s.myPSN[index]},
		ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrSQPSN|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|ibv.QPAttrMaxQPRdAtomic); err != nil {
		return fmt.Errorf("Failed to modify send QP[%d] to RTS: %w", index, err)
	}
	return nil
}

// clientConnect is pp_client_connect.
func (s *state) clientConnect(ctx context.Context) error {
	nc, err := oob.Dial(ctx, s.env.Dial, s.cfg.ServerName, s.cfg.Port, s.env.Stall, s.env.ConnectRetry)
	if err != nil {
		return fmt.Errorf("Couldn't connect to %s:%d: %w", s.cfg.ServerName, s.cfg.Port, err)
	}
	c := oob.NewConn(ctx, nc, s.env.Stall)
	s.conns[0] = c
	if err := s.sendLocalDest(c, 0); err != nil {
		return err
	}
	if err := s.recvRemoteDest(c, 0); err != nil {
		return err
	}
	return s.connectQPs(0)
}

// serverConnect is pp_server_connect: each client in turn sends its
// address first, then gets the server's.
func (s *state) serverConnect(ctx context.Context) error {
	ln := s.env.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(s.cfg.Port)); err != nil {
			return fmt.Errorf("Couldn't listen to port %d: %w", s.cfg.Port, err)
		}
		defer ln.Close()
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for i := range s.cfg.Clients {
		if tl, ok := ln.(interface{ SetDeadline(time.Time) error }); ok && s.env.AcceptTimeout > 0 {
			tl.SetDeadline(time.Now().Add(s.env.AcceptTimeout))
		}
		nc, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept() failed for client %d: %w", i, err)
		}
		c := oob.NewConn(ctx, nc, s.env.Stall)
		s.conns[i] = c
		if err := s.recvRemoteDest(c, i); err != nil {
			return err
		}
		if err := s.sendLocalDest(c, i); err != nil {
			return err
		}
		if err := s.connectQPs(i); err != nil {
			return err
		}
	}
	return nil
}

// findQP is find_qp: the client whose XRC_RECV QP a receive came in on.
func (s *state) findQP(qpn uint32) int {
	if s.cfg.Clients == 1 {
		return 0
	}
	for i, qp := range s.recvQP {
		if qp.QPN() == qpn {
			return i
		}
	}
	fmt.Fprintf(s.env.Err, "Unable to find qp %x\n", qpn)
	return 0
}

// loop is main's receive loop: each receive is reposted and answered
// until every client has had NumTests sends; then the signaled sends'
// completions are reaped.
func (s *state) loop(ctx context.Context) error {
	total := s.cfg.Clients * s.cfg.NumTests
	wc := make([]ibv.WorkCompletion, 1)
	for cnt := 0; cnt < total; {
		n, err := s.wait(ctx, s.recvCQ, wc)
		if err != nil {
			return err
		}
		if wc[0].Status != ibv.WCSuccess {
			return fmt.Errorf("Work completion error %d (%v)", int(wc[0].Status), wc[0].Status)
		}
		if err := s.postRecv(n); err != nil {
			return err
		}
		qpi := s.findQP(wc[0].QPNum)
		if s.ppCnt[qpi] < s.cfg.NumTests {
			if err := s.postSend(qpi); err != nil {
				return err
			}
		}
		cnt += n
	}
	for cnt := 0; cnt < s.cfg.Clients; {
		n, err := s.wait(ctx, s.sendCQ, wc)
		if err != nil {
			return err
		}
		if wc[0].Status != ibv.WCSuccess {
			return fmt.Errorf("Work completion error %d (%v)", int(wc[0].Status), wc[0].Status)
		}
		cnt += n
	}
	return nil
}

// wait returns at least one completion of cq, or fails when none comes
// for the stall timeout. verbs.CQ.Wait sleeps on the CQ's channel and
// acknowledges its events: -e and polling behave alike.
func (s *state) wait(ctx context.Context, cq *verbs.CQ, wc []ibv.WorkCompletion) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, s.env.Stall)
	defer cancel()
	n, err := cq.Wait(wctx, wc)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = &toolnic.ErrStall{What: "work completion", After: s.env.Stall}
		}
		return 0, fmt.Errorf("Error polling cq: %w", err)
	}
	return n, nil
}

// termination is pp_client_termination / pp_server_termination: the
// client sends "END" and waits for the server's; the server waits for
// every client's, then answers each.
func (s *state) termination() error {
	var msg [termSize]byte
	copy(msg[:], "END")
	send := func(i int) error {
		if _, err := s.conns[i].Write(msg[:]); err != nil {
			return fmt.Errorf("Couldn't send termination ack: %w", err)
		}
		return nil
	}
	recv := func(i int) error {
		var b [termSize]byte
		if _, err := io.ReadFull(s.conns[i], b[:]); err != nil {
			return fmt.Errorf("Couldn't read remote termination ack: %w", err)
		}
		if b != msg {
			return fmt.Errorf("Invalid termination ack was accepted: %q", b[:])
		}
		return nil
	}
	if s.cfg.ServerName != "" {
		if err := send(0); err != nil {
			return err
		}
		return recv(0)
	}
	for i := range s.cfg.Clients {
		if err := recv(i); err != nil {
			return err
		}
	}
	for i := range s.cfg.Clients {
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}
