// Package pingpong is the logic of softnic's rc_pingpong, uc_pingpong,
// ud_pingpong and srq_pingpong: softnic's versions of rdma-core's
// libibverbs/examples, which pair with the C tools in either role. They
// take the same options, exchange the same out-of-band messages over TCP
// ("%04x:%06x:%06x:%s" LID:QPN:PSN:GID, then "done"), in the same order,
// connect their QPs with the same attributes (RC: timeout 14, retry 7,
// rnr_retry 7, min_rnr_timer 12, one outstanding read, hop limit 1), run
// the same ping-pong and print the same lines.
//
// Differences, all on purpose: the GID index defaults to 0 (softnic's
// table has one entry, the NIC address) instead of none, and an index the
// table lacks falls back to 0 with a warning, so "-g 1" from rxe scripts
// works; waits are bounded (toolnic.Env.Stall); and "-c" checks every byte, not
// only the first of each page, while staying compatible with the C tools'
// check, and a failed check is an error (exit status 1) rather than a
// printed line only. A peer that dies mid-run ends an RC run when the
// transport gives up on it - retry_cnt 7 is seven retries in softnic, so
// within 8 local ACK timeouts (8 × 67 ms) - and the error says so:
// "peer stopped answering: transport retry counter exceeded after 7
// retries" (or "peer not ready: RNR retry counter exceeded after 7
// retries"). UC and UD have no acknowledgements: a dead peer there shows
// as the stall timeout, as it does when an RC peer dies after its NIC
// acknowledged the last SEND and before it answered (nothing is in
// flight then, and the QPs allow no remote access that a probe could
// use, unlike perftest's write_lat and send_lat).
package pingpong

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// Kind selects the example.
type Kind uint8

const (
	RC  Kind = iota // rc_pingpong: RC QP, SEND/RECV
	UC              // uc_pingpong: UC QP
	UD              // ud_pingpong: UD QP with an address handle, 40-byte GRH room
	SRQ             // srq_pingpong: many RC QPs sharing a receive queue
)

var kindNames = [...]string{"rc_pingpong", "uc_pingpong", "ud_pingpong", "srq_pingpong"}

// String returns the tool name, e.g. "rc_pingpong".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "pingpong"
}

// Work request IDs (PINGPONG_RECV_WRID, PINGPONG_SEND_WRID).
const (
	recvWRID = 1
	sendWRID = 2
)

// UDQKey is the Q_Key ud_pingpong uses on both sides.
const UDQKey = 0x11111111

// udGRH is the room a UD receive leaves for the GRH.
const udGRH = 40

// Config holds a run's options, one field per rdma-core flag.
type Config struct {
	Kind          Kind
	ServerName    string  // client mode: the server's host (the C tools' "servername")
	Port          int     // -p: TCP port of the out-of-band exchange
	IBDev         string  // -d: accepted; the device is the NIC the caller opened
	IBPort        int     // -i
	Size          int     // -s
	MTU           ibv.MTU // -m (not ud_pingpong): used as given, as rc_pingpong.c does (see Defaults)
	RxDepth       int     // -r
	Iters         int     // -n
	SL            int     // -l
	Events        bool    // -e: sleep on CQ events
	GIDIndex      int     // -g; -1 sends an all-zero GID as the C tools do without -g
	Check         bool    // -c
	NewSend       bool    // -N: post with the ibv_wr_* API (rc_pingpong)
	NumQP         int     // -q (srq_pingpong)
	ODP           bool    // -o
	ImplicitODP   bool    // -O
	Prefetch      bool    // -P
	Timestamps    bool    // -t
	DM            bool    // -j
	CCUnprotected bool    // -U: no effect on softnic
	// QPTimeout is the RC/UC QPs' local ACK timeout exponent (4.096 µs ×
	// 2^QPTimeout): 14 as the C tools hard-code it. softnic's own option
	// (--qp-timeout), for peers slower than hardware, such as an emulated
	// rxe guest: with retry_cnt 7 a peer is declared dead after 8 timeouts.
	QPTimeout int
}

// Defaults returns the C tool's defaults for k, except GIDIndex (0).
//
// The path MTU is 1024 unless -m gives one, and -m is not checked against
// the port's active MTU, as in rc_pingpong.c (rxe accepts any path MTU up
// to max_mtu, 4096; packets the link cannot carry are lost). ud_pingpong
// instead refuses a -s above the port's active MTU, which follows the
// interface's ("Requested size larger than port MTU").
func Defaults(k Kind) Config {
	c := Config{Kind: k, Port: 18515, IBPort: 1, Size: 4096, MTU: ibv.MTU1024,
		RxDepth: 500, Iters: 1000, NumQP: 16, QPTimeout: 14}
	if k == UD {
		c.Size = 1024 // ud_pingpong.c: "size = 1024" (its usage text says 2048)
	}
	return c
}

// Result is what a run did.
type Result struct {
	Local, Remote []Dest
	Size, Iters   int
	Elapsed       time.Duration
	Checked       bool  // -c ran (on the server, as in the C tools)
	BadPages      []int // pages that failed the check
}

// Error is a failure with the C tool's wording and, when there is one,
// its cause.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func fail(err error, format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Err: err}
}

// wcError is the error of the failed completion c: the C tool's words
// ("Failed status ... for wr_id ..."), wrapping, when the transport gave
// up on the peer, a *toolnic.ErrRetryExceeded that says so ("peer
// stopped answering: transport retry counter exceeded after 7
// retries"). A flushed WR has its cause looked for on cq, where the
// completion that moved the QP to ERR came first.
func wcError(c ibv.WorkCompletion, wrid int, cq *verbs.CQ, qps ...*verbs.QP) error {
	pe := toolnic.PeerError(c, qps...)
	if pe == nil && c.Status == ibv.WCWRFlushErr {
		pe = toolnic.FindPeerError([]*verbs.CQ{cq}, qps)
	}
	return fail(pe, "Failed status %s (%d) for wr_id %d", c.Status, c.Status, wrid)
}

// ErrBadData is returned (wrapped) when -c found data that did not
// survive the round trip.
var ErrBadData = errors.New("received data differs from what was sent")

// ErrUnsupported is returned (wrapped) for features softnic lacks.
var ErrUnsupported = errors.New("not supported by softnic")

// checkConfig refuses what the C tool refuses, with its words.
func (c *Config) checkConfig() error {
	switch {
	case c.Size < 1 && c.Kind == SRQ:
		return fail(nil, "size must be at least 1")
	case c.Size < 0:
		return fail(nil, "invalid size %d", c.Size)
	case c.Iters < 1:
		return fail(nil, "iters must be at least 1")
	case c.RxDepth < 1:
		return fail(nil, "rx_depth must be at least 1")
	case c.MTU.Bytes() == 0:
		return fail(nil, "invalid MTU")
	case c.ODP && c.DM:
		return fail(nil, "DM memory region can't be on demand")
	case c.CCUnprotected && c.ODP:
		return fail(nil, "CoCo unprotected memory cannot be used with ODP")
	case c.CCUnprotected && c.DM:
		return fail(nil, "CoCo unprotected memory cannot be used with device memory")
	case !c.ODP && c.Prefetch:
		return fail(nil, "prefetch is valid only with on-demand memory region")
	case c.ODP:
		return fail(ErrUnsupported, "The device isn't ODP capable or does not support RC send and receive with ODP")
	case c.Timestamps:
		return fail(ErrUnsupported, "The device isn't completion timestamp capable")
	case c.DM:
		return fail(ErrUnsupported, "Device doesn't support dm allocation")
	case c.Kind == SRQ && c.NumQP > c.RxDepth:
		return fail(nil, "rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", c.RxDepth, c.NumQP)
	case c.Kind == SRQ && c.NumQP >= MaxQP:
		return fail(nil, "num_qp %d must be less than %d", c.NumQP, MaxQP-1)
	case c.Kind == SRQ && c.NumQP < 1:
		return fail(nil, "num_qp must be at least 1")
	}
	return nil
}

// Run runs one side of a ping-pong: the client when cfg.ServerName is
// set, else the server. It writes the tool's output to env.Out.
func Run(ctx context.Context, cfg Config, env toolnic.Env) (*Result, error) {
	if err := cfg.checkConfig(); err != nil {
		return nil, err
	}
	env = env.WithDefaults()
	var p interface {
		init() error
		run(context.Context) (*Result, error)
		close()
	}
	base := pp{cfg: &cfg, env: &env, sendFlags: ibv.SendSignaled}
	if cfg.Kind == SRQ {
		p = &srqCtx{pp: base}
	} else {
		p = &single{pp: base}
	}
	defer p.close()
	if err := p.init(); err != nil {
		return nil, err
	}
	return p.run(ctx)
}

// localGID returns the GID to advertise and the sgid index to use: the
// GID at cfg.GIDIndex, or index 0's with a warning when the table lacks
// it, or zeros for -g -1.
func localGID(cfg *Config, env *toolnic.Env) (verbs.GID, int, error) {
	if cfg.GIDIndex < 0 {
		return verbs.GID{}, -1, nil
	}
	g, err := env.Dev.QueryGID(uint8(cfg.IBPort), cfg.GIDIndex)
	if err == nil {
		return g, cfg.GIDIndex, nil
	}
	g0, err0 := env.Dev.QueryGID(uint8(cfg.IBPort), 0)
	if err0 != nil {
		return verbs.GID{}, 0, fail(err, "can't read sgid of index %d", cfg.GIDIndex)
	}
	fmt.Fprintf(env.Err, "softnic: GID index %d is not in %s's GID table (softnic has one GID per NIC); using GID[0] %s\n",
		cfg.GIDIndex, env.Dev.Name(), InetNtop6(g0))
	return g0, 0, nil
}

// hasInterfaceID reports whether g's low 8 bytes are non-zero, the C
// tools' test (dest->gid.global.interface_id) for using a GRH.
func hasInterfaceID(g verbs.GID) bool {
	for _, b := range g[8:] {
		if b != 0 {
			return true
		}
	}
	return false
}

// ahAttr builds the address vector towards rem as the examples do.
func ahAttr(cfg *Config, rem Dest, sgid int, hopLimit uint8) ibv.AHAttr {
	ah := ibv.AHAttr{DLID: rem.LID, SL: uint8(cfg.SL), PortNum: uint8(cfg.IBPort)}
	if hasInterfaceID(rem.GID) {
		ah.IsGlobal = true
		ah.GRH = ibv.GlobalRoute{DGID: rem.GID.Addr(), HopLimit: hopLimit, SGIDIndex: uint8(max(sgid, 0))}
	}
	return ah
}

// noGRHHint explains a failed connect to a peer that sent no GID.
func noGRHHint(rem Dest, err error) error {
	if !hasInterfaceID(rem.GID) {
		return fmt.Errorf("%w (the peer sent an all-zero GID: RoCE needs one, run the peer with -g)", err)
	}
	return err
}

// The check pattern. The C tools' client sets the first byte of each
// page of its buffer to 0 (i / page_size % sizeof(char)) over a buffer
// filled with 0x7b (0 for srq_pingpong), and the server checks those
// bytes. softnic's client also fills every other byte with a pattern, and
// softnic's server checks every byte against whichever of the two the
// buffer holds: softnic's pattern or the C client's fill.

func patternByte(i, page int) byte {
	if i%page == 0 {
		return 0
	}
	return byte(1 + (i*7+i/page)%251)
}

func fillPattern(b []byte, page int) {
	for i := range b {
		b[i] = patternByte(i, page)
	}
}

// checkPattern returns the pages of b that hold neither softnic's pattern
// nor the C client's fill (fill elsewhere, 0 at page starts).
func checkPattern(b []byte, page int, fill byte) []int {
	cFill := len(b) > 1 && b[1] == fill && patternByte(1, page) != fill
	var bad []int
	for p := 0; p*page < len(b); p++ {
		seg := b[p*page : min((p+1)*page, len(b))]
		for j, v := range seg {
			want := patternByte(p*page+j, page)
			if cFill && j != 0 {
				want = fill
			}
			if v != want {
				bad = append(bad, p)
				break
			}
		}
	}
	return bad
}
