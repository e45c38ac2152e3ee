package perftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/oob"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Env is what a run needs from outside: the tools' environment, and
// what only perftest takes.
type Env struct {
	toolnic.Env
	// CacheLine is this host's cache line size (0: 64).
	CacheLine int
	// JSON replaces the text output with one JSON object (Result).
	JSON bool
	// Progress, when set, receives a progress line, rewritten in place,
	// while a run lasts longer than two seconds.
	Progress io.Writer
}

// ErrCheck is returned (wrapped) when --check found bad data.
var ErrCheck = errors.New("data check failed")

// session is one run.
type session struct {
	cfg      *Config
	env      *Env
	out      io.Writer // text output (io.Discard with JSON)
	note     io.Writer // what perftest prints on stdout that is no result: stderr with JSON
	clk      clock
	prog     progress
	res      *res
	comm     *comm
	nodes    *cmNodes // -R: the test QPs' CM connections
	my       []Dest
	rem      []Dest
	result   *Result
	lastSize int // the message size of the last run
}

// Run runs one side of the test cfg describes: the client when
// cfg.ServerName is set, else the server.
func Run(ctx context.Context, cfg Config, env Env) (*Result, error) {
	env.Env = env.Env.WithDefaults()
	if env.CacheLine <= 0 {
		env.CacheLine = 64
	}
	s := &session{cfg: &cfg, env: &env, out: env.Out, clk: clock{t0: time.Now()}}
	s.note = env.Out
	if env.JSON {
		s.out, s.note = io.Discard, env.Err
	}
	side := "client"
	if cfg.Server() {
		side = "server"
	}
	s.result = &Result{Tool: cfg.Tool(), Side: side, Connection: cfg.Conn.String()}
	if env.Dev != nil {
		s.result.Device = env.Dev.Name()
	}
	err := s.run(ctx)
	s.result.Local, s.result.Remote = qpsOf(s.my), qpsOf(s.rem)
	var ce *CommError
	if errors.As(err, &ce) && s.res != nil && ctx.Err() == nil {
		// The out-of-band connection broke (the peer exited or was
		// killed) while RDMA work may be in flight: the transport's
		// verdict on the peer names what happened and wins over the
		// socket's EOF. It comes within the retry bound of the QPs'
		// last progress, which was before the socket broke.
		if b := s.res.retryBound(); b > 0 {
			if pe := toolnic.AwaitPeerError(ctx, b+peerSlack, s.res.cqs(), s.res.qps); pe != nil {
				fmt.Fprintf(env.Err, " %v\n", err)
				err = pe
			}
		}
	}
	if err != nil && s.res != nil {
		s.res.printQPStates(env.Err)
	}
	s.cmDisconnect()
	if s.res != nil {
		s.res.close()
	}
	if s.comm != nil {
		s.comm.close()
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrCheck) {
		err = ctx.Err()
	}
	if env.JSON && (err == nil || errors.Is(err, ErrCheck)) {
		e := json.NewEncoder(env.Out)
		e.SetIndent("", "  ")
		e.Encode(s.result)
	}
	return s.result, err
}

// peerSlack is what a tool waits beyond the QPs' retry bound for the
// transport's verdict on a peer whose out-of-band connection broke: the
// engine's timers and the processors' scheduling.
const peerSlack = 100 * time.Millisecond

func (s *session) printMsgs(msgs []Message) {
	for _, m := range msgs {
		if m.Stdout {
			fmt.Fprint(s.note, m.Text)
		} else {
			fmt.Fprint(s.env.Err, m.Text)
		}
	}
}

func (s *session) run(ctx context.Context) error {
	cfg, env := s.cfg, s.env
	msgs, err := cfg.resolve()
	s.printMsgs(msgs)
	if err != nil {
		return err
	}
	dev := env.Dev
	port, err := dev.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return fmt.Errorf(" Error when trying to query port: %w", err)
	}
	// check_link: softnic, like rxe, is not a device perftest knows.
	inline := 0
	if cfg.Inline != -1 {
		fmt.Fprint(s.out, resultLine)
		fmt.Fprint(env.Err, "Device not recognized to implement inline feature. Disabling it\n")
	}
	outReads := 1
	if cfg.Verb == Read || cfg.Verb == Atomic {
		maxReads := dev.QueryDevice().MaxQPRdAtom
		outReads = cfg.OutReads
		if outReads > maxReads {
			fmt.Fprint(s.out, resultLine)
			fmt.Fprintf(env.Err, " Number of outstanding reads is above max = %d\n Changing to that max value\n", maxReads)
			outReads = maxReads
		} else if outReads <= 0 {
			outReads = maxReads
		}
	}
	gid, sgid, err := s.localGID()
	if err != nil {
		return err
	}
	if cfg.Server() {
		fmt.Fprint(s.note, waitingBanner)
	}
	if err := s.establish(ctx); err != nil {
		fmt.Fprint(env.Err, " Unable to init the socket connection\n")
		return err
	}
	m := s.comm
	cycle, cacheLine := env.PageSize, env.CacheLine
	if p, err := dev.QueryPort(uint8(cfg.IBPort)); err == nil {
		port = p // set_mtu queries the port now: its MTU follows the interface's
	}
	mtu := SetMTU(cfg.MTU, port.ActiveMTU, s.out)
	if !cfg.NoXchgVer {
		v, err := m.versions()
		if err != nil {
			return err
		}
		s.result.Peer = v
		if cycle, cacheLine, err = m.sysData(cycle, cacheLine); err != nil {
			return err
		}
		if VersionAtLeast(m.peerVersion, 5.1) {
			b, err := m.xchg("MTU", MTUMessage(mtu, m.peerVersion), len(MTUMessage(mtu, m.peerVersion)))
			if err != nil {
				return err
			}
			if rem := ParseMTUMessage(b); rem != 0 && rem < mtu {
				mtu = rem
			}
		}
	} else {
		m.peerVersion = 6.06 // the formats of our own version
	}
	s.result.MTU = mtu.Bytes()
	if cfg.Conn == UD && cfg.Size > uint64(mtu.Bytes()) {
		if cfg.All || !cfg.SizeSet {
			fmt.Fprintf(env.Err, " Max msg size in UD is MTU %d\n Changing to this MTU\n", mtu.Bytes())
			cfg.Size = uint64(mtu.Bytes())
		} else {
			return fmt.Errorf(" Max message size in UD cannot be greater than MTU ")
		}
	}
	mk := func(ids []*cm.ID) (*res, error) {
		r, err := newRes(cfg, dev, cycle, cacheLine, mtu, outReads, inline, ids)
		if err != nil {
			return nil, fmt.Errorf(" Couldn't create IB resources: %w", err)
		}
		return r, nil
	}
	if cfg.RDMACM {
		if err := s.cmConnectQPs(ctx, outReads, mk); err != nil {
			fmt.Fprint(env.Err, "Failed to create RDMA CM connection with resources.\n")
			return err
		}
	} else if s.res, err = mk(nil); err != nil {
		return err
	}
	s.res.sgid = sgid
	s.my = s.res.dests(port.LID, gid, env.PSN)
	if cfg.Check {
		s.fillCheck()
	}
	fmt.Fprint(s.out, FormatTestInfo(cfg, TestInfo{Device: dev.Name(), MTU: mtu.Bytes(), GIDIndex: sgid,
		OutReads: outReads, Inline: s.res.inline}))
	stopProgress := s.startProgress()
	defer stopProgress()
	return s.test(ctx)
}

// test runs the test cfg names.
func (s *session) test(ctx context.Context) error {
	cfg := s.cfg
	switch {
	case cfg.Test == BW && cfg.Verb == Send:
		return s.sendBW(ctx)
	case cfg.Test == BW:
		return s.rdmaBW(ctx)
	case cfg.Verb == Send:
		return s.sendLat(ctx)
	case cfg.Verb == Write:
		return s.writeLat(ctx)
	}
	return s.clientLat(ctx)
}

// localGID returns the GID at the -x index, or index 0's with a warning
// when softnic's one-entry table lacks it (rxe puts IPv4 at index 1).
func (s *session) localGID() (verbs.GID, int, error) {
	dev, cfg := s.env.Dev, s.cfg
	g, err := dev.QueryGID(uint8(cfg.IBPort), cfg.GIDIndex)
	if err == nil {
		return g, cfg.GIDIndex, nil
	}
	g0, err0 := dev.QueryGID(uint8(cfg.IBPort), 0)
	if err0 != nil {
		return g, 0, fmt.Errorf(" Unable to set up socket connection: GID index %d: %w", cfg.GIDIndex, err)
	}
	fmt.Fprintf(s.env.Err, "softnic: GID index %d is not in %s's GID table (softnic has one GID per NIC); using GID[0] %s\n",
		cfg.GIDIndex, dev.Name(), pingpong.InetNtop6(g0))
	return g0, 0, nil
}

// establish opens the out-of-band connection (establish_connection).
func (s *session) establish(ctx context.Context) error {
	cfg, env := s.cfg, s.env
	if cfg.CommRDMACM {
		// establish_connection with use_rdma_cm: the exchange on an
		// rdma_cm connection.
		if env.CM == nil {
			return errors.New("-R/-z need a connection manager")
		}
		var c *cmConn
		var err error
		if cfg.Server() {
			if c, err = s.cmServerComm(ctx); err != nil {
				fmt.Fprint(env.Err, " Unable to perform rdma_server function\n")
				return err
			}
		} else {
			deadline := time.Now().Add(env.ConnectRetry)
			for {
				c, err = s.cmClientComm(ctx)
				var ce *errCMEvent
				if err == nil || !errors.As(err, &ce) || ce.Ev != cm.EventRejected || !time.Now().Before(deadline) || ctx.Err() != nil {
					break
				}
				time.Sleep(50 * time.Millisecond) // softnic's --connect-timeout: the server may not listen yet
			}
			if err != nil {
				fmt.Fprint(env.Err, " Unable to perform rdma_client function\n")
				return err
			}
		}
		s.comm = newComm(ctx, c, !cfg.Server(), env.Stall, s.nicAlive())
		s.comm.rdmaKeys, s.comm.gidIndex = true, cfg.GIDIndex
		return nil
	}
	if cfg.Server() {
		ln := env.Listener
		if ln == nil {
			l, err := listen(cfg.Port, cfg.IPv6)
			if err != nil {
				return err
			}
			ln = l
		}
		c, err := oob.Accept(ctx, ln, env.AcceptTimeout)
		ln.Close()
		if err != nil {
			return err
		}
		s.comm = newComm(ctx, c, false, env.Stall, s.nicAlive())
		return nil
	}
	d := env.Dial
	if d == nil {
		nd := net.Dialer{}
		if cfg.SourceIP != "" {
			ip := net.ParseIP(cfg.SourceIP)
			if ip == nil {
				return fmt.Errorf("--source_ip %q: not an IP address", cfg.SourceIP)
			}
			nd.LocalAddr = &net.TCPAddr{IP: ip}
		}
		network := "tcp4"
		if cfg.IPv6 {
			network = "tcp6"
		}
		d = func(ctx context.Context, _, addr string) (net.Conn, error) { return nd.DialContext(ctx, network, addr) }
	}
	c, err := oob.Dial(ctx, d, cfg.ServerName, cfg.Port, env.Stall, env.ConnectRetry)
	if err != nil {
		return fmt.Errorf("Couldn't connect to %s:%d: %w", cfg.ServerName, cfg.Port, err)
	}
	s.comm = newComm(ctx, c, true, env.Stall, s.nicAlive())
	return nil
}

// nicAlive counts the packets the device received (comm.read's sign of
// a live peer); nil without a device.
func (s *session) nicAlive() func() uint64 {
	dev := s.env.Dev
	if dev == nil {
		return nil
	}
	return func() uint64 { return dev.Counters().RcvdPkts }
}

// keys does a handshake per QP, filling s.rem.
func (s *session) keys() error {
	if s.rem == nil {
		s.rem = make([]Dest, len(s.my))
	}
	for i := range s.my {
		d, err := s.comm.handshake(s.my[i])
		if err != nil {
			fmt.Fprint(s.env.Err, " Failed to exchange data between server and clients\n")
			return err
		}
		s.rem[i] = d
	}
	return nil
}

// sync is a single handshake, the tests' barrier.
func (s *session) sync() error {
	if _, err := s.comm.handshake(s.my[0]); err != nil {
		fmt.Fprint(s.env.Err, " Failed to exchange data between server and clients\n")
		return err
	}
	return nil
}

// gidCompat is ctx_check_gid_compatibility: both GIDs IPv4-mapped or
// neither.
func (s *session) gidCompat() error {
	v4 := func(g verbs.GID) bool { return g.Addr().Is4() }
	if v4(s.my[0].GID) != v4(s.rem[0].GID) {
		fmt.Fprint(s.env.Err, "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n\n")
		return errors.New("the peer's GID is of the other IP version")
	}
	return nil
}

func (s *session) connect() error {
	if s.cfg.RDMACM {
		return nil // the CM connected the QPs
	}
	if err := s.gidCompat(); err != nil {
		return err
	}
	if err := s.res.connect(s.my, s.rem); err != nil {
		fmt.Fprint(s.env.Err, " Unable to Connect the HCA's through the link\n")
		return err
	}
	return nil
}

// destVerb is the verb the address lines are printed for
// (ctx_print_pingpong_data prints by the exchange's verb): over rdma_cm
// the exchange is SENDs, so no OUT, RKey or VAddr is printed.
func (s *session) destVerb() Verb {
	if s.cfg.CommRDMACM {
		return Send
	}
	return s.cfg.Verb
}

// printDests prints this side's addresses, then does a handshake per QP
// and prints the peer's.
func (s *session) printDests() error {
	for _, d := range s.my {
		fmt.Fprint(s.out, FormatDest(true, d, s.destVerb()))
	}
	for i := range s.my {
		d, err := s.comm.handshake(s.my[i])
		if err != nil {
			fmt.Fprint(s.env.Err, " Failed to exchange data between server and clients\n")
			return err
		}
		s.rem[i] = d
		fmt.Fprint(s.out, FormatDest(false, d, s.destVerb()))
	}
	return nil
}

// sizes returns the message sizes of the run: cfg.Size, or with -a the
// powers of two from 2 up to, not including, 2^limit.
func (s *session) sizes(limit int) []int {
	if !s.cfg.All {
		return []int{int(s.cfg.Size)}
	}
	var z []int
	for i := 1; i < limit; i++ {
		z = append(z, 1<<i)
	}
	return z
}

func (s *session) printBW(r BWResult) {
	s.clearProgress()
	fmt.Fprint(s.out, FormatBW(s.cfg, r))
	s.result.BW = append(s.result.BW, r.inMBps())
}

func (s *session) printLat(r LatResult) {
	s.clearProgress()
	fmt.Fprint(s.out, FormatLat(s.cfg, r))
	s.result.Lat = append(s.result.Lat, r.inUsec(s.cfg))
}

// rdmaBW is the flow of write_bw, read_bw and atomic_bw.
func (s *session) rdmaBW(ctx context.Context) error {
	cfg := s.cfg
	if err := s.keys(); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	if err := s.printDests(); err != nil {
		return err
	}
	if err := s.sync(); err != nil { // after RTR
		return err
	}
	fmt.Fprint(s.out, Header(cfg))
	if cfg.Server() {
		if err := s.sync(); err != nil {
			return err
		}
		rep, err := s.comm.reports(Report{})
		if err != nil {
			return err
		}
		s.printBW(BWResult{Size: rep.Size, Iters: rep.Iters, BWPeak: rep.BWPeak, BWAvg: rep.BWAvg, MsgRate: rep.MsgRate, Gbits: cfg.ReportGbit})
		if err := s.comm.closeConn(s.my[0]); err != nil {
			return err
		}
		fmt.Fprint(s.out, resultLine)
		if cfg.Check {
			return s.checkTarget(rep)
		}
		return nil
	}
	var last BWResult
	for _, size := range s.sizes(24) {
		wq := s.res.sendWQEs(s.rem)
		for _, x := range wq {
			x.sge[0].Length = uint32(size)
		}
		s.startRun(uint64(cfg.Iters * cfg.NumQP))
		t, n, err := s.bwClient(ctx, wq, size)
		if err != nil {
			fmt.Fprint(s.env.Err, " Failed to complete run_iter_bw function successfully\n")
			return err
		}
		last = ComputeBW(cfg, t, uint64(size), n)
		s.printBW(last)
		s.lastSize = size
	}
	fmt.Fprint(s.out, resultLine)
	if err := s.sync(); err != nil {
		return err
	}
	if _, err := s.comm.reports(last.Report()); err != nil {
		return err
	}
	if err := s.comm.closeConn(s.my[0]); err != nil {
		return err
	}
	if cfg.Check {
		return s.checkInitiator(uint64(cfg.Iters))
	}
	return nil
}

// sendBW is send_bw's flow.
func (s *session) sendBW(ctx context.Context) error {
	cfg := s.cfg
	if err := s.keys(); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	if err := s.sync(); err != nil {
		return err
	}
	if err := s.printDests(); err != nil {
		return err
	}
	if cfg.Events {
		s.res.sendCQ.ReqNotify(false)
		s.res.recvCQ.ReqNotify(false)
	}
	fmt.Fprint(s.out, Header(cfg))
	limit := 24
	if cfg.Conn == UD {
		limit = bits.Len(uint(s.res.mtu.Bytes()))
	}
	sizes := s.sizes(limit)
	for _, size := range sizes {
		var wq []*wqe
		var rq []*rwqe
		if !cfg.Server() {
			wq = s.res.sendWQEs(s.rem)
			for _, x := range wq {
				x.sge[0].Length = uint32(size)
			}
		} else {
			var err error
			if rq, err = s.res.postRecvs(size); err != nil {
				fmt.Fprint(s.env.Err, " Failed to post receive recv_wqes\n")
				return err
			}
		}
		if err := s.sync(); err != nil {
			return err
		}
		s.startRun(uint64(cfg.Iters * cfg.NumQP))
		var t BWTimes
		var n uint64
		var err error
		if cfg.Server() {
			t, n, err = s.bwServer(ctx, rq, size)
		} else {
			t, n, err = s.bwClient(ctx, wq, size)
		}
		if err != nil {
			return err
		}
		s.printBW(ComputeBW(cfg, t, uint64(size), n))
		s.lastSize = size
		if cfg.All {
			if err := s.sync(); err != nil {
				return err
			}
		}
	}
	fmt.Fprint(s.out, resultLine)
	if err := s.comm.closeConn(s.my[0]); err != nil {
		return err
	}
	if cfg.Check && cfg.Server() && cfg.Conn != UD {
		return s.checkTarget(Report{Iters: uint64(cfg.Iters * cfg.NumQP)})
	}
	return nil
}

// writeLat is write_lat's flow: no closing handshake.
func (s *session) writeLat(ctx context.Context) error {
	cfg := s.cfg
	if err := s.latSetup(true); err != nil {
		return err
	}
	if err := s.sync(); err != nil { // after RTR
		return err
	}
	x := s.res.sendWQEs(s.rem)[0]
	fmt.Fprint(s.out, Header(cfg))
	for _, size := range s.sizes(24) {
		s.startRun(uint64(cfg.Iters))
		r, err := s.latWrite(ctx, x, size)
		if err != nil {
			fmt.Fprint(s.env.Err, "Test exited with Error\n")
			return err
		}
		s.printLat(r)
	}
	fmt.Fprint(s.out, resultLine)
	// The C tools just exit; give the NIC a moment to acknowledge the
	// peer's last WRITE before it goes away.
	time.Sleep(100 * time.Millisecond)
	return nil
}

// clientLat is the flow of read_lat and atomic_lat: only the client runs.
func (s *session) clientLat(ctx context.Context) error {
	cfg := s.cfg
	if err := s.latSetup(true); err != nil {
		return err
	}
	if err := s.sync(); err != nil {
		return err
	}
	if cfg.Server() {
		if err := s.comm.closeConn(s.my[0]); err != nil {
			return err
		}
		fmt.Fprint(s.out, resultLine)
		if cfg.Check {
			return s.checkTarget(Report{Iters: uint64(cfg.Iters)})
		}
		return nil
	}
	if cfg.Events {
		s.res.sendCQ.ReqNotify(false)
	}
	fmt.Fprint(s.out, Header(cfg))
	x := s.res.sendWQEs(s.rem)[0]
	limit := 24
	if cfg.Verb == Atomic {
		limit = 0
	}
	for _, size := range s.sizes(limit) {
		s.startRun(uint64(cfg.Iters))
		r, err := s.latClient(ctx, x, size)
		if err != nil {
			return err
		}
		s.printLat(r)
		s.lastSize = size
	}
	if err := s.comm.closeConn(s.my[0]); err != nil {
		return err
	}
	fmt.Fprint(s.out, resultLine)
	if cfg.Check {
		return s.checkInitiator(uint64(cfg.Iters))
	}
	return nil
}

// sendLat is send_lat's flow.
func (s *session) sendLat(ctx context.Context) error {
	cfg := s.cfg
	if err := s.latSetup(false); err != nil {
		return err
	}
	if cfg.Events {
		s.res.sendCQ.ReqNotify(false)
		s.res.recvCQ.ReqNotify(false)
	}
	fmt.Fprint(s.out, Header(cfg))
	x := s.res.sendWQEs(s.rem)[0]
	limit := 24
	if cfg.Conn == UD {
		limit = bits.Len(uint(s.res.mtu.Bytes()))
	}
	for _, size := range s.sizes(limit) {
		rq, err := s.res.postRecvs(size)
		if err != nil {
			fmt.Fprint(s.env.Err, " Failed to post receive recv_wqes\n")
			return err
		}
		if err := s.sync(); err != nil {
			return err
		}
		s.startRun(uint64(cfg.Iters))
		r, err := s.latSend(ctx, x, rq, size)
		if err != nil {
			return err
		}
		s.printLat(r)
	}
	fmt.Fprint(s.out, resultLine)
	return s.comm.closeConn(s.my[0])
}

// latSetup is the latency tests' common start: (write_lat and read_lat
// shake hands once more first), keys, connect, address lines; send_lat
// shakes hands between connecting and printing.
func (s *session) latSetup(extra bool) error {
	if extra {
		if _, err := s.comm.handshake(s.my[0]); err != nil {
			fmt.Fprint(s.env.Err, "Failed to exchange data between server and clients\n")
			return err
		}
	}
	if err := s.keys(); err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	if !extra {
		if err := s.sync(); err != nil {
			return err
		}
	}
	return s.printDests()
}

// startRun resets the progress count for a run of total iterations.
func (s *session) startRun(total uint64) {
	s.prog.done.Store(0)
	s.prog.total.Store(total)
	s.prog.runStart.Store(time.Now().UnixNano())
}

// SetMTU is perftest_parameters.c set_mtu: the port's active MTU when -m
// was not given (user 0), else -m (an IB MTU in bytes, checked by the
// flag parser), lowered to the active MTU with perftest's two lines on w
// (stdout) when it is higher. check_mtu then takes the smaller of this
// and the peer's (the MTU exchange).
func SetMTU(user int, active ibv.MTU, w io.Writer) ibv.MTU {
	if user <= 0 {
		return active
	}
	mtu := ibv.MTU(bits.Len(uint(user)) - 8)
	if mtu > active {
		fmt.Fprintf(w, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", int(active))
		mtu = active
	}
	return mtu
}
