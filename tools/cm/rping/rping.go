// Package rping is the logic of softnic's rping: softnic's version of
// rdma-core's librdmacm/examples/rping.c, which pairs with the C tool in
// either role. It connects through the RDMA connection manager (package
// verbs/cm) in the TCP port space (default port 7174) and runs rping's
// protocol exactly:
//
//   - the client SENDs an rping_rdma_info {be64 buf; be32 rkey; be32 size}
//     naming its source buffer, filled with "rdma-ping-%d: " and rotating
//     ASCII ('A' to 'z', starting one later each ping), NUL-terminated;
//   - the server RDMA READs that buffer, SENDs a go-ahead (its own
//     rping_rdma_info, whose contents the client ignores);
//   - the client SENDs an rping_rdma_info naming its sink buffer;
//   - the server RDMA WRITEs the string back (strlen+1 bytes) and SENDs a
//     go-ahead;
//   - -C times (for ever without -C), then the client disconnects.
//
// The QPs, the connection parameters (responder_resources 1,
// initiator_depth 1, retry_count 7, rnr_retry_count 7), the queue sizes
// (16 send WRs, 2 receive WRs, a 32-entry CQ), the output lines ("ping
// data: ...", "server ping data: ...", "server DISCONNECT EVENT...") and
// the exit statuses are rping.c's. Waits on the peer are bounded
// (toolnic.Env.Stall), where the C tool would wait for ever.
package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// rping.c's constants.
const (
	DefaultPort = 7174      // cb->port = htobe16(7174)
	DefaultSize = 64        // cb->size = 64
	BufSize     = 64 * 1024 // RPING_BUFSIZE
	// MinSize is RPING_MIN_BUFSIZE: sizeof(stringify(INT_MAX)) (11) +
	// sizeof(RPING_MSG_FMT) (15).
	MinSize = 26
	// MaxSize is RPING_BUFSIZE - 1, the largest -S rping.c takes.
	MaxSize = BufSize - 1

	sqDepth  = 16 // RPING_SQ_DEPTH
	infoSize = 16 // sizeof(struct rping_rdma_info)
)

// msgFmt is RPING_MSG_FMT.
const msgFmt = "rdma-ping-%d: "

// Config holds a run's options, one field per rping.c flag.
type Config struct {
	Server     bool       // -s (false: -c)
	Addr       netip.Addr // -a: the server's bind address, the client's destination
	Src        netip.Addr // -I: the client's source address (invalid: any)
	Port       uint16     // -p
	Count      int        // -C: pings (0: for ever)
	Size       int        // -S
	Verbose    bool       // -v: print the ping data
	Validate   bool       // -V: compare the data written back with the data sent
	Debug      bool       // -d: debug lines on standard output
	Persistent bool       // -P: a server that serves connections until stopped
	SelfQP     bool       // -q: the QP is created and moved through its states by rping, not the CM
	TOS        int        // -t: accepted, as rping.c's getopt string has it; no effect
}

// Defaults returns rping.c's defaults: port 7174, size 64, for ever.
func Defaults() Config {
	return Config{Port: DefaultPort, Size: DefaultSize}
}

// Check refuses what rping.c refuses, with its words.
func (c *Config) Check() error {
	if c.Size < MinSize || c.Size > MaxSize {
		return fmt.Errorf("Invalid size %d (valid range is %d to %d)", c.Size, MinSize, BufSize)
	}
	if c.Count < 0 {
		return fmt.Errorf("Invalid count %d", c.Count)
	}
	return nil
}

// Env is what a run needs from outside: the tools' environment, and
// for tests a bound on a persistent server.
type Env struct {
	toolnic.Env
	// Conns, for a persistent server (-P), stops it after this many
	// connections have ended (0: serve until ctx ends). Tests use it.
	Conns int
}

// Failure is a run that failed after rping.c's lines saying why were
// printed: the tool exits with Status and prints nothing more.
type Failure struct {
	Status int
	Msg    string
}

func (f *Failure) Error() string { return f.Msg }

// failed is the error of a run that failed: rping.c's main returns -1.
func failed(msg string) error { return &Failure{Status: statusFailed, Msg: msg} }

// Pattern returns the source buffer of ping number ping (from 0) of size
// bytes, as rping_test_client fills it: "rdma-ping-<ping>: ", then ASCII
// from 'A'+ping%58 rising to 'z' and wrapping to 'A', the last byte NUL.
func Pattern(size, ping int) []byte {
	b := make([]byte, size)
	fillPattern(b, ping)
	return b
}

func fillPattern(b []byte, ping int) {
	head := fmt.Sprintf(msgFmt, ping)
	cc := copy(b, head) // snprintf(start_buf, size, ...): size >= MinSize holds it
	c := byte(65 + ping%58)
	for i := cc; i < len(b); i++ {
		b[i] = c
		c++
		if c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// cString is buf up to its first NUL, as printf's %s reads it.
func cString(buf []byte) []byte {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return buf[:i]
	}
	return buf
}

// state is enum test_state.
type state int

const (
	stIdle state = iota + 1
	stConnectRequest
	stAddrResolved
	stRouteResolved
	stConnected
	stRDMAReadAdv
	stRDMAReadComplete
	stRDMAWriteAdv
	stRDMAWriteComplete
	stDisconnected
	stError
)

// cb is struct rping_cb: one connection's control block (and, for a
// server, the listener's).
type cb struct {
	cfg *Config
	env *Env
	run *runner

	server bool // 0 iff client

	mu    sync.Mutex
	state state
	sem   chan struct{} // sem_t sem
	// acceptReady is sem_t accept_ready: the listener's CM event handler
	// takes it before handing a CONNECT_REQUEST to the main loop.
	acceptReady chan struct{}

	id    *cm.ID // the client's ID; the server's listening ID
	child *cm.ID // the server's connection

	pd       *verbs.PD
	cq       *verbs.CQ
	qp       *verbs.QP
	recvMR   *verbs.MR // rping_rdma_info received
	sendMR   *verbs.MR // rping_rdma_info sent
	rdmaMR   *verbs.MR // the RDMA sink (client) or READ target (server)
	startMR  *verbs.MR // the client's source buffer
	cqDone   chan struct{}
	cqCancel context.CancelFunc

	remoteRKey uint32
	remoteAddr uint64
	remoteLen  uint32
}

func (c *cb) setState(s state) {
	c.mu.Lock()
	c.state = s
	c.mu.Unlock()
}

func (c *cb) getState() state {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// post is sem_post.
func (c *cb) post() {
	select {
	case c.sem <- struct{}{}:
	default: // more posts than a run ever waits for: the count saturates
	}
}

// wait is sem_wait, bounded by the stall time.
func (c *cb) wait(ctx context.Context) error {
	t := time.NewTimer(c.env.Stall)
	defer t.Stop()
	select {
	case <-c.sem:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("no progress for %v (state %d)", c.env.Stall, c.getState())
	}
}

// debugf is DEBUG_LOG: printf to standard output under -d.
func (c *cb) debugf(format string, args ...any) {
	if c.cfg.Debug {
		c.run.printf(c.env.Out, format, args...)
	}
}

// runner is what the connections of one run share: the event channel,
// its goroutine, and the map from IDs to their control blocks (the C
// tool keeps the cb in cma_id->context; a child ID's context is the
// listener's until rping sets it, which the skeleton API has no call
// for, so the map stands in for rdma_cm_id.context's assignment).
type runner struct {
	cfg *Config
	env *Env
	ch  *cm.EventChannel

	outMu  sync.Mutex
	exited bool // the CM event handler failed: rping.c exits there
	mu     sync.Mutex
	cbs    map[*cm.ID]*cb
	root   *cb
	fatal  error // the CM event handler's exit(ret)
}

// printf prints unless the run has ended as the C tool's exit() in its
// CM thread would have ended the process.
func (r *runner) printf(w io.Writer, format string, args ...any) {
	if w == nil {
		return
	}
	r.outMu.Lock()
	if !r.exited {
		fmt.Fprintf(w, format, args...)
	}
	r.outMu.Unlock()
}

func (r *runner) errorf(format string, args ...any) { r.printf(r.env.Err, format, args...) }

func (r *runner) cbOf(id *cm.ID) *cb {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cbs[id]; ok {
		return c
	}
	return r.root
}

func (r *runner) setCB(id *cm.ID, c *cb) {
	r.mu.Lock()
	r.cbs[id] = c
	r.mu.Unlock()
}

func (r *runner) newCB() *cb {
	return &cb{cfg: r.cfg, env: r.env, run: r, state: stIdle,
		sem: make(chan struct{}, 64), acceptReady: make(chan struct{}, 1)}
}

// Run runs rping as cfg says: a server (-s) or a client (-c) on env.CM.
// A failure's lines are printed to env.Err as rping.c prints them and the
// error is a *Failure with the exit status.
func Run(ctx context.Context, cfg Config, env Env) error {
	if err := cfg.Check(); err != nil {
		return &Failure{Status: statusEINVAL, Msg: err.Error()}
	}
	if env.CM == nil {
		return &Failure{Status: statusEINVAL, Msg: "no connection manager"}
	}
	env.Env = env.Env.WithDefaults()
	r := &runner{cfg: &cfg, env: &env, cbs: map[*cm.ID]*cb{}}
	root := r.newCB()
	root.server = cfg.Server
	r.root = root
	root.acceptReady <- struct{}{} // sem_init(&cb->accept_ready, 0, 1)

	r.ch = env.CM.CreateEventChannel()
	if r.ch == nil {
		r.errorf("rdma_create_event_channel: %v\n", errNoChannel)
		return failed("rdma_create_event_channel failed")
	}
	defer r.ch.Close()
	id, err := env.CM.CreateID(r.ch, root, cm.PSTCP, ibv.QPTypeRC)
	if err != nil {
		r.errorf("rdma_create_id: %v\n", err)
		return failed("rdma_create_id: " + err.Error())
	}
	root.id = id
	r.setCB(id, root)
	root.debugf("created cm_id %p\n", id)

	cmCtx, stopCM := context.WithCancel(context.WithoutCancel(ctx))
	cmDone := make(chan struct{})
	go func() { defer close(cmDone); r.cmThread(cmCtx) }()

	var status int
	switch {
	case cfg.Server && cfg.Persistent:
		status = r.runPersistentServer(ctx, root)
	case cfg.Server:
		status = r.runServer(ctx, root)
	default:
		status = r.runClient(ctx, root)
	}

	root.debugf("destroy cm_id %p\n", root.id)
	root.id.Destroy()
	stopCM() // write(cb->eventfd, ...)
	<-cmDone
	r.mu.Lock()
	fatal := r.fatal
	r.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if status != 0 {
		return &Failure{Status: status & 0xff, Msg: "rping failed"}
	}
	return nil
}

var errNoChannel = errors.New("cannot create an event channel")

// cmThread is cm_thread: it takes each CM event, hands it to the
// event handler, acks it, and ends the run on a handler's error (exit).
func (r *runner) cmThread(ctx context.Context) {
	for {
		ev, err := r.ch.GetEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.errorf("rdma_get_cm_event: %v\n", err)
				r.setFatal(failed("rdma_get_cm_event: " + err.Error()))
			}
			return
		}
		if r.isFatal() {
			ev.Ack() // the C process is gone; its events only need acks
			continue
		}
		ret := r.eventHandler(ctx, ev)
		ev.Ack()
		if ret != 0 {
			r.setFatal(failed("cma event " + ev.Type.String()))
		}
	}
}

// setFatal records the event handler's exit and wakes every waiter, as
// the C tool's exit() ends them.
func (r *runner) setFatal(err error) {
	r.outMu.Lock()
	r.exited = true
	r.outMu.Unlock()
	r.mu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	cbs := make([]*cb, 0, len(r.cbs)+1)
	cbs = append(cbs, r.root)
	for _, c := range r.cbs {
		cbs = append(cbs, c)
	}
	r.mu.Unlock()
	for _, c := range cbs {
		c.setState(stError)
		c.post()
	}
}

func (r *runner) isFatal() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal != nil
}

// eventHandler is rping_cma_event_handler.
func (r *runner) eventHandler(ctx context.Context, ev *cm.Event) int {
	id := ev.ID
	c := r.cbOf(id)
	if ev.Type == cm.EventConnectRequest && ev.ListenID != nil {
		c = r.cbOf(ev.ListenID)
	}
	rel := "child"
	if id == c.id {
		rel = "parent"
	}
	c.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, id, rel)

	switch ev.Type {
	case cm.EventAddrResolved:
		c.setState(stAddrResolved)
		if err := id.ResolveRoute(cmkit.ResolveTimeout); err != nil {
			c.setState(stError)
			r.errorf("rdma_resolve_route: %v\n", err)
			c.post()
		}
	case cm.EventRouteResolved:
		c.setState(stRouteResolved)
		c.post()
	case cm.EventConnectRequest:
		select { // sem_wait(&cb->accept_ready)
		case <-c.acceptReady:
		case <-ctx.Done():
			return 0
		}
		c.mu.Lock()
		c.state = stConnectRequest
		c.child = id
		c.mu.Unlock()
		c.debugf("child cma %p\n", id)
		c.post()
	case cm.EventConnectResponse:
		c.debugf("CONNECT_RESPONSE\n")
		c.setState(stConnected)
		c.post()
	case cm.EventEstablished:
		c.debugf("ESTABLISHED\n")
		// The server wakes up when the first RECV completes.
		if !c.server {
			c.setState(stConnected)
		}
		c.post()
	case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected:
		r.errorf("cma event %s, error %d\n", ev.Type, ev.Status)
		c.post()
		return -1
	case cm.EventDisconnected:
		who := "client"
		if c.server {
			who = "server"
		}
		r.errorf("%s DISCONNECT EVENT...\n", who)
		c.setState(stDisconnected)
		c.post()
	case cm.EventDeviceRemoval:
		r.errorf("cma detected device removal!!!!\n")
		c.setState(stError)
		c.post()
		return -1
	default:
		r.errorf("unhandled event: %s, ignoring\n", ev.Type)
	}
	return 0
}
