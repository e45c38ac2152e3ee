// Package tmpingpong is the logic of "softnic tm_pingpong": two sides,
// each with one RC QP on a tag-matching SRQ (ibv_create_srq_ex with
// IBV_SRQT_TM; rdma-core Documentation/tag_matching.md,
// ibv_post_srq_ops(3)), send each other tagged messages in windows of
// Config.Tags messages, ping-pong fashion: the client sends a window, the
// server receives it and sends its own, and so on.
//
// A message below Config.RndvThreshold bytes goes eager (a TMH with
// IBV_TMH_EAGER, then the payload); one of at least that size goes
// rendezvous (a TMH with IBV_TMH_RNDV and an RVH naming the sender's
// registered buffer, which allows remote reads): the receiving NIC READs
// the data and SENDs a FIN TMH back, and the sender reuses the buffer
// only after that FIN.
//
// The receiver adds a tagged buffer (IBV_WR_TAG_ADD) for every message of
// the window it expects, in a shuffled order, before the peer may send
// it, except Config.Unexpected of them, which it "posts" only after their
// message arrived. Those messages, and any message that comes while
// matching is off, arrive unexpected: whole, TMH included, in an ordinary
// SRQ buffer (ibv_post_srq_recv). Software matches them (copying an eager
// payload; for a rendezvous request, RDMA READing the data itself and
// sending the FIN), deletes the tag it had added (IBV_WR_TAG_DEL), counts
// them, and reports the count with IBV_WR_TAG_SYNC and IBV_OPS_TM_SYNC so
// the NIC matches again.
//
// Message i (0-based, the same numbering each way) carries Size>>(i%4)
// bytes (at least 1), so one run can mix eager and rendezvous; its tag is
// TagBase|i and its TMH app_ctx is i. rdma-core has no tm_pingpong: the
// protocol is softnic's own, over pingpong's out-of-band exchange.
package tmpingpong

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// TagBase is or-ed into every message's number to make its tag, so tags
// use the TMH's high bytes too.
const TagBase = 0x5450_0000_0000_0000 // "TP"

// Config holds a run's options.
type Config struct {
	ServerName string  // client mode: the server's host
	Port       int     // -p: TCP port of the out-of-band exchange
	IBDev      string  // -d: accepted; the device is the NIC the caller opened
	IBPort     int     // -i
	GIDIndex   int     // -g; -1 sends an all-zero GID
	MTU        ibv.MTU // -m: path MTU
	Iters      int     // -n: messages each way
	Size       int     // -s: the largest message (message i carries Size>>(i%4))
	Tags       int     // -t: tags in flight, the window
	// RndvThreshold is -r: messages of at least this many bytes go
	// rendezvous (0: all of them).
	RndvThreshold int
	// Unexpected is -u: how many tags of each window the receiver posts
	// only after their message arrived.
	Unexpected int
	Check      bool // -c: check every byte
	QPTimeout  int  // --qp-timeout: local ACK timeout exponent (14)
	// Seed seeds the shuffle of the posting order; 0 picks one at random.
	Seed uint64

	// corrupt, set by tests, damages message k's payload after it is
	// filled, before it is sent.
	corrupt func(k int, payload []byte)
}

// Defaults returns the defaults: 1000 messages each way of up to 4096
// bytes, 16 tags in flight, rendezvous from 2048 bytes (so messages of
// 4096 and 2048 bytes go rendezvous, of 1024 and 512 eager), one tag per
// window posted late.
func Defaults() Config {
	return Config{Port: 18515, IBPort: 1, MTU: ibv.MTU1024, Iters: 1000, Size: 4096, Tags: 16,
		RndvThreshold: 2048, Unexpected: 1, QPTimeout: 14}
}

// maxWindowBytes bounds Tags × Size, the memory of one window.
const maxWindowBytes = 1 << 30

// MaxTags bounds Config.Tags: the tag list holds two windows' worth.
const MaxTags = 256

// Result is what a run did; with --json it is the tool's output, one
// object (see tools/tooljson for the conventions).
type Result struct {
	Role      string    `json:"role"` // "server" or "client"
	LocalQPN  uint32    `json:"local_qpn"`
	RemoteQPN uint32    `json:"remote_qpn"`
	LocalGID  verbs.GID `json:"local_gid"`
	RemoteGID verbs.GID `json:"remote_gid"`
	Iters     int       `json:"iters"` // messages each way
	Size      int       `json:"size"`  // the largest message, bytes
	Tags      int       `json:"tags"`  // tags in flight
	// RndvThreshold is the smallest message, in bytes, sent rendezvous.
	RndvThreshold int `json:"rndv_threshold"`
	SentEager     int `json:"sent_eager"` // messages sent eager
	SentRndv      int `json:"sent_rndv"`  // messages sent rendezvous (each FIN seen)
	// Matched counts the received messages the NIC placed into a tagged
	// buffer (eager, or rendezvous read by the NIC); Unexpected those that
	// arrived in an SRQ buffer and software matched; Late those of them
	// whose tag was posted only after they arrived, on purpose. Matched +
	// Unexpected = Iters.
	Matched    int `json:"matched"`
	Unexpected int `json:"unexpected"`
	Late       int `json:"late"`
	// Eager and Rendezvous split the received messages by protocol:
	// Eager + Rendezvous = Iters.
	Eager      int `json:"eager"`
	Rendezvous int `json:"rendezvous"`
	Syncs      int `json:"syncs"` // IBV_WR_TAG_SYNC operations posted
	// Bytes is the payload moved, both ways.
	Bytes       int64   `json:"bytes"`
	ElapsedUsec float64 `json:"elapsed_usec"`
	MsgsPerSec  float64 `json:"msgs_per_sec"` // messages both ways per second
	MBPerSec    float64 `json:"mb_per_sec"`   // Bytes / 10^6 per second
	Checked     bool    `json:"checked"`      // -c checked every byte received
}

// ErrBadData is returned (wrapped) when -c found a message that differs
// from what its sender sent.
var ErrBadData = errors.New("received data differs from what was sent")

// ErrUnsupported is returned (wrapped) when the device has no tag matching.
var ErrUnsupported = errors.New("not supported by the device")

func fail(err error, format string, args ...any) error {
	return &pingpong.Error{Msg: fmt.Sprintf(format, args...), Err: err}
}

// checkConfig refuses options that cannot run.
func (c *Config) checkConfig() error {
	switch {
	case c.Iters < 1:
		return fail(nil, "iters must be at least 1")
	case c.Size < 1:
		return fail(nil, "size must be at least 1")
	case c.Tags < 1 || c.Tags > MaxTags:
		return fail(nil, "tags must be 1..%d", MaxTags)
	case c.RndvThreshold < 0:
		return fail(nil, "invalid rendezvous threshold %d", c.RndvThreshold)
	case c.Unexpected < 0 || c.Unexpected > c.Tags:
		return fail(nil, "unexpected must be 0..tags (%d)", c.Tags)
	case c.MTU.Bytes() == 0:
		return fail(nil, "invalid MTU")
	case int64(c.Tags)*int64(c.Size) > maxWindowBytes:
		// Each side holds a window to send and a window to receive.
		return fail(nil, "tags x size is %d bytes, at most %d", int64(c.Tags)*int64(c.Size), maxWindowBytes)
	}
	return nil
}

// length returns message k's payload size.
func (c *Config) length(k int) int { return max(1, c.Size>>(k%4)) }

// rndv reports whether message k goes rendezvous.
func (c *Config) rndv(k int) bool { return c.length(k) >= c.RndvThreshold }

// tag returns message k's tag.
func tag(k int) uint64 { return TagBase | uint64(k) }

// patternByte is byte j of message k's payload under -c: a hash of both,
// so a byte left from another message in the same buffer shows.
func patternByte(k, j int) byte {
	v := uint32(k)*2654435761 + uint32(j)*7 + 1
	return byte(v>>24 ^ v)
}

// Work request IDs: the kind in the low byte, the message number (or the
// SRQ buffer's index) above it.
const (
	wrSend   = 1 + iota // an EAGER or RNDV request we send
	wrTagged            // a tagged buffer (recv_wr_id of a TAG_ADD)
	wrUnexp             // an ordinary SRQ buffer
	wrRead              // software's READ of an unexpected RNDV's data
	wrFin               // software's FIN
	wrDone              // the NO_TAG message that ends a run
	wrOps               // a list operation
)

func wrid(kind, n int) uint64 { return uint64(kind) | uint64(n)<<8 }

// Receive slot states.
type rstate uint8

const (
	rFree    rstate = iota // no message expected
	rListed                // its tag is in the NIC's list
	rLate                  // expected, its tag posted only after arrival
	rReading               // unexpected RNDV: software's READ in flight
	rDone                  // received
)

// rslot is the receive side of one window slot.
type rslot struct {
	k      int
	state  rstate
	handle uint32
	fin    [wire.TMHLen]byte // rReading: the FIN to send after the READ
}

// tmpp is one side's resources and run state.
type tmpp struct {
	cfg *Config
	env *toolnic.Env
	res *Result

	pingpong.Resources
	qp *verbs.QP

	// buf holds Tags send slots of TMHLen+Size bytes (the TMH, then the
	// payload an RVH names), Tags tagged receive slots of Size bytes, and
	// nUnexp SRQ buffers of ubuf bytes.
	sendSlot, tagOff, unexpOff, ubuf, nUnexp int

	rng   *rand.Rand
	recv  []rslot // by slot
	rwin  int     // the receive window in progress
	rleft int     // its messages not yet received

	sendsLeft, finsLeft int    // of the window last sent
	finWait             []bool // by slot: a RNDV awaiting its FIN
	swUnexp, synced     uint32 // unexpected messages seen; the count last synced
	doneSent, peerDone  bool
	peerGone            bool // the peer closed before acknowledging our last sends
}

// Run runs one side: the client when cfg.ServerName is set, else the
// server. It writes the address lines and the result lines to env.Out.
func Run(ctx context.Context, cfg Config, env toolnic.Env) (*Result, error) {
	if err := cfg.checkConfig(); err != nil {
		return nil, err
	}
	env = env.WithDefaults()
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	p, err := newTMPP(&cfg, &env)
	if err != nil {
		return nil, err
	}
	defer p.close()
	return p.run(ctx)
}

func newTMPP(cfg *Config, env *toolnic.Env) (*tmpp, error) {
	dev := env.Dev
	caps := dev.QueryDeviceEx().TMCaps
	if caps.Flags&ibv.TMCapRC == 0 {
		return nil, fail(ErrUnsupported, "The device has no tag matching on RC (tm_caps)")
	}
	T := cfg.Tags
	if 2*T > int(caps.MaxNumTags) {
		return nil, fail(ErrUnsupported, "%d tags in flight need a tag list of %d, the device's max_num_tags is %d", T, 2*T, caps.MaxNumTags)
	}
	p := &tmpp{cfg: cfg, env: env, rng: rand.New(rand.NewPCG(cfg.Seed, 0x746d)), recv: make([]rslot, T), finWait: make([]bool, T)}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()
	// An SRQ buffer takes an unexpected message whole: a RNDV request's
	// TMH and RVH, or an EAGER message's TMH and payload.
	maxEager := 0
	for k := range 4 {
		if !cfg.rndv(k) {
			maxEager = max(maxEager, cfg.length(k))
		}
	}
	p.ubuf = wire.TMHLen + max(wire.RVHLen, maxEager)
	// Room for a window of unexpected messages and a window of FINs.
	p.nUnexp = 2*T + 4
	p.sendSlot = wire.TMHLen + cfg.Size
	p.tagOff = T * p.sendSlot
	p.unexpOff = p.tagOff + T*cfg.Size
	// Completions: our sends, software's READs and FINs, the tagged and
	// ordinary receives, list operation errors, with room to spare.
	if err := p.Open(dev, make([]byte, p.unexpOff+p.nUnexp*p.ubuf), ibv.AccessLocalWrite|ibv.AccessRemoteRead,
		8*T+p.nUnexp+16); err != nil {
		return nil, err
	}
	var err error
	p.SRQ, err = p.PD.CreateSRQEx(verbs.SRQInitAttrEx{
		SRQInitAttr: verbs.SRQInitAttr{MaxWR: uint32(p.nUnexp), MaxSGE: 1},
		Type:        ibv.SRQTypeTM, CQ: p.CQ, TM: ibv.TMCap{MaxNumTags: uint32(2 * T), MaxOps: uint32(2 * T)},
	})
	if err != nil {
		return nil, fail(err, "Couldn't create tag-matching SRQ")
	}
	// The send queue holds a window of our messages, software's READ and
	// FIN for a window of unexpected RNDVs, the NIC's READ and FIN for a
	// window of matched ones (verbs.PD.CreateSRQEx), and the final NO_TAG.
	p.qp, err = p.PD.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: p.CQ, RecvCQ: p.CQ, SRQ: p.SRQ,
		Cap: ibv.QPCap{MaxSendWR: uint32(5*T + 4), MaxSendSGE: 1, MaxInlineData: wire.TMHLen + wire.RVHLen}})
	if err != nil {
		return nil, fail(err, "Couldn't create QP")
	}
	if err := p.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: uint8(cfg.IBPort),
		AccessFlags: ibv.AccessRemoteRead},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags); err != nil {
		return nil, fail(err, "Failed to modify QP to INIT")
	}
	ok = true
	return p, nil
}

func (p *tmpp) close() { p.Close(p.qp) }

// ppConfig is the part of the pingpong configuration the exchange and the
// address vector use.
func (p *tmpp) ppConfig() pingpong.Config {
	c := pingpong.Defaults(pingpong.RC)
	c.ServerName, c.Port, c.IBPort, c.GIDIndex, c.IBDev = p.cfg.ServerName, p.cfg.Port, p.cfg.IBPort, p.cfg.GIDIndex, p.cfg.IBDev
	return c
}

// maxRdAtomic is the READs each side lets the other have outstanding:
// a window of rendezvous reads at once.
const maxRdAtomic = 16

// connect moves the QP to RTR and RTS towards rem, with rc_pingpong's
// attributes except the outstanding READs (rendezvous reads them).
func (p *tmpp) connect(my, rem pingpong.Dest, sgid int) error {
	cfg := p.cfg
	attr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: cfg.MTU, DestQPN: rem.QPN, RQPSN: rem.PSN,
		MaxDestRdAtomic: maxRdAtomic, MinRNRTimer: 12, AHAttr: pingpong.AHAttr(p.ppConfig(), rem, sgid, 1)}
	if err := p.qp.Modify(&attr, ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|
		ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer); err != nil {
		return fail(pingpong.NoGRHHint(rem, err), "Failed to modify QP to RTR")
	}
	attr.State, attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.SQPSN, attr.MaxRdAtomic = ibv.QPStateRTS, uint8(cfg.QPTimeout), 7, 7, my.PSN, maxRdAtomic
	if err := p.qp.Modify(&attr, ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|
		ibv.QPAttrSQPSN|ibv.QPAttrMaxQPRdAtomic); err != nil {
		return fail(err, "Failed to modify QP to RTS")
	}
	return nil
}

func (p *tmpp) windows() int { return (p.cfg.Iters + p.cfg.Tags - 1) / p.cfg.Tags }

// window returns the message numbers of window w.
func (p *tmpp) window(w int) (lo, hi int) {
	return w * p.cfg.Tags, min(p.cfg.Iters, (w+1)*p.cfg.Tags)
}

func (p *tmpp) run(ctx context.Context) (*Result, error) {
	cfg, env := p.cfg, p.env
	client := cfg.ServerName != ""
	p.res = &Result{Role: "server", Iters: cfg.Iters, Size: cfg.Size, Tags: cfg.Tags, RndvThreshold: cfg.RndvThreshold, Checked: cfg.Check}
	if client {
		p.res.Role = "client"
	}
	for i := range p.nUnexp {
		if err := p.postUnexp(i); err != nil {
			return nil, err
		}
	}
	// The server's tags for the client's first window are in place before
	// the client can send it.
	if !client {
		if err := p.postTags(0); err != nil {
			return nil, err
		}
	}
	port, err := env.Dev.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return nil, fail(err, "Couldn't get port info")
	}
	gid, sgid, err := pingpong.LocalGID(p.ppConfig(), *env)
	if err != nil {
		return nil, err
	}
	my := pingpong.Dest{LID: port.LID, QPN: p.qp.QPN(), PSN: env.PSN(), GID: gid}
	fmt.Fprint(env.Out, pingpong.AddressLine(true, my, false))
	rems, err := pingpong.Exchange(ctx, p.ppConfig(), *env, []pingpong.Dest{my},
		func(rem []pingpong.Dest) error { return p.connect(my, rem[0], sgid) })
	if err != nil {
		return nil, err
	}
	rem := rems[0]
	fmt.Fprint(env.Out, pingpong.AddressLine(false, rem, false))
	if client {
		if err := p.connect(my, rem, sgid); err != nil {
			return nil, err
		}
	}
	p.res.LocalQPN, p.res.RemoteQPN, p.res.LocalGID, p.res.RemoteGID = my.QPN, rem.QPN, my.GID, rem.GID

	start := time.Now()
	// Each side adds the tags of a window before it sends what lets the
	// peer send that window: the client before its own window w, the
	// server (which has window 0's already) before its answer to w.
	for w := range p.windows() {
		if client {
			if err := p.postTags(w); err != nil {
				return nil, err
			}
			if err := p.sendWindow(ctx, w); err != nil {
				return nil, err
			}
			if err := p.pollUntil(ctx, func() bool { return p.rleft == 0 }); err != nil {
				return nil, err
			}
		} else {
			if err := p.pollUntil(ctx, func() bool { return p.rleft == 0 }); err != nil {
				return nil, err
			}
			if w+1 < p.windows() {
				if err := p.postTags(w + 1); err != nil {
					return nil, err
				}
			}
			if err := p.sendWindow(ctx, w); err != nil {
				return nil, err
			}
		}
	}
	if err := p.finish(ctx); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	r := p.res
	for k := range cfg.Iters {
		r.Bytes += 2 * int64(cfg.length(k))
	}
	r.ElapsedUsec = float64(elapsed.Nanoseconds()) / 1e3
	if secs := elapsed.Seconds(); secs > 0 {
		r.MsgsPerSec = float64(2*cfg.Iters) / secs
		r.MBPerSec = float64(r.Bytes) / 1e6 / secs
	}
	fmt.Fprint(env.Out, ResultLines(r))
	return r, nil
}

// ResultLines formats a run's counts and rates as the tool prints them.
func ResultLines(r *Result) string {
	return fmt.Sprintf("%d messages each way, up to %d bytes, %d tags in flight, rendezvous from %d bytes\n",
		r.Iters, r.Size, r.Tags, r.RndvThreshold) +
		fmt.Sprintf("sent: %d eager, %d rendezvous\n", r.SentEager, r.SentRndv) +
		fmt.Sprintf("received: %d matched, %d unexpected (%d posted late), %d eager, %d rendezvous, %d syncs\n",
			r.Matched, r.Unexpected, r.Late, r.Eager, r.Rendezvous, r.Syncs) +
		fmt.Sprintf("%d bytes in %s seconds = %s messages/sec, %s MB/sec\n",
			r.Bytes, pingpong.F2(r.ElapsedUsec/1e6), pingpong.F2(r.MsgsPerSec), pingpong.F2(r.MBPerSec))
}

// postUnexp posts SRQ buffer i for unexpected messages and FINs.
func (p *tmpp) postUnexp(i int) error {
	if _, err := p.SRQ.PostRecv(ibv.RecvWR{WRID: wrid(wrUnexp, i), SGList: []ibv.SGE{p.MR.SGE(p.unexpOff+i*p.ubuf, p.ubuf)}}); err != nil {
		return fail(err, "Couldn't post receive")
	}
	return nil
}

func (p *tmpp) tagged(slot int) []byte {
	return p.Buf[p.tagOff+slot*p.cfg.Size : p.tagOff+(slot+1)*p.cfg.Size]
}

// postTags expects window w: it adds a tagged buffer for each of its
// messages in a shuffled order, leaving the last cfg.Unexpected of that
// order to be posted after their message arrives.
func (p *tmpp) postTags(w int) error {
	lo, hi := p.window(w)
	order := p.rng.Perm(hi - lo)
	late := min(p.cfg.Unexpected, len(order))
	ops := make([]ibv.OpsWR, 0, len(order))
	for i, j := range order {
		k := lo + j
		s := &p.recv[k%p.cfg.Tags]
		if s.state != rFree && s.state != rDone {
			return fail(nil, "tag slot %d still busy for message %d", k%p.cfg.Tags, s.k)
		}
		*s = rslot{k: k, state: rListed}
		if i >= len(order)-late {
			s.state = rLate
			continue
		}
		ops = append(ops, ibv.OpsWR{WRID: wrid(wrOps, k), Opcode: ibv.WRTagAdd, RecvWRID: wrid(wrTagged, k),
			SGList: []ibv.SGE{p.MR.SGE(p.tagOff+(k%p.cfg.Tags)*p.cfg.Size, p.cfg.Size)}, Tag: tag(k), Mask: ^uint64(0)})
	}
	if _, err := p.SRQ.PostOps(ops); err != nil {
		return fail(err, "Couldn't add tags")
	}
	for _, op := range ops {
		p.recv[int(op.RecvWRID>>8)%p.cfg.Tags].handle = op.Handle
	}
	p.rwin, p.rleft = w, hi-lo
	return nil
}

// sendWindow waits until every buffer of the previous window is free
// (sends completed, FINs in) and sends window w.
func (p *tmpp) sendWindow(ctx context.Context, w int) error {
	if err := p.pollUntil(ctx, func() bool { return p.sendsLeft == 0 && p.finsLeft == 0 }); err != nil {
		return err
	}
	cfg := p.cfg
	lo, hi := p.window(w)
	for k := lo; k < hi; k++ {
		slot := k % cfg.Tags
		off := slot * p.sendSlot
		n := cfg.length(k)
		payload := p.Buf[off+wire.TMHLen : off+wire.TMHLen+n]
		if cfg.Check {
			for j := range payload {
				payload[j] = patternByte(k, j)
			}
			if cfg.corrupt != nil {
				cfg.corrupt(k, payload)
			}
		}
		wr := ibv.SendWR{WRID: wrid(wrSend, k), Opcode: ibv.WRSend, Flags: ibv.SendSignaled}
		if cfg.rndv(k) {
			// TMH(RNDV) + RVH naming the payload, inline.
			var hdr [wire.TMHLen + wire.RVHLen]byte
			wire.PutTMH(hdr[:], wire.TMRndv, uint32(k), tag(k))
			wire.PutRVH(hdr[wire.TMHLen:], p.MR.Addr()+uint64(off+wire.TMHLen), p.MR.RKey(), uint32(n))
			wr.Flags |= ibv.SendInline
			wr.InlineData = hdr[:]
			p.finWait[slot] = true
			p.finsLeft++
			p.res.SentRndv++
		} else {
			wire.PutTMH(p.Buf[off:], wire.TMEager, uint32(k), tag(k))
			wr.SGList = []ibv.SGE{p.MR.SGE(off, wire.TMHLen+n)}
			p.res.SentEager++
		}
		if _, err := p.qp.PostSend(wr); err != nil {
			return fail(err, "Couldn't post send")
		}
		p.sendsLeft++
	}
	return nil
}

// finish waits for the last sends and FINs, then sends a NO_TAG message
// and waits for its completion and the peer's: every FIN either side's
// NIC queued went before it, so both may close.
func (p *tmpp) finish(ctx context.Context) error {
	if err := p.pollUntil(ctx, func() bool { return p.sendsLeft == 0 && p.finsLeft == 0 }); err != nil {
		return err
	}
	var hdr [wire.TMHLen]byte
	wire.PutTMH(hdr[:], wire.TMNoTag, 0, 0)
	if _, err := p.qp.PostSend(ibv.SendWR{WRID: wrid(wrDone, 0), Opcode: ibv.WRSend,
		Flags: ibv.SendSignaled | ibv.SendInline, InlineData: hdr[:]}); err != nil {
		return fail(err, "Couldn't post send")
	}
	return p.pollUntil(ctx, func() bool { return p.doneSent && p.peerDone })
}

// pollUntil handles completions until done() holds, syncing the tag list
// after every batch that brought unexpected messages.
func (p *tmpp) pollUntil(ctx context.Context, done func() bool) error {
	w := toolnic.Waiter{CQ: p.CQ, Ch: p.Ch, Stall: p.env.Stall}
	wc := make([]ibv.WorkCompletion, 32)
	for !done() {
		n, err := w.Poll(ctx, wc)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fail(err, "poll CQ failed (window %d, %d messages of it to come)", p.rwin, p.rleft)
		}
		for _, c := range wc[:n] {
			if err := p.handle(c); err != nil {
				return err
			}
		}
		if p.swUnexp != p.synced {
			// Software has seen swUnexp unexpected messages: tell the NIC,
			// which matches again once the counts agree
			// (ibv_post_srq_ops(3) IBV_OPS_TM_SYNC).
			if _, err := p.SRQ.PostOps([]ibv.OpsWR{{WRID: wrid(wrOps, 0), Opcode: ibv.WRTagSync,
				Flags: ibv.OpsTMSync, UnexpectedCnt: p.swUnexp}}); err != nil {
				return fail(err, "Couldn't sync the tag list")
			}
			p.synced = p.swUnexp
			p.res.Syncs++
		}
	}
	return nil
}

// wcError is the error of failed completion c, naming the peer's failure
// when the transport gave up on it.
func (p *tmpp) wcError(c ibv.WorkCompletion) error {
	pe := toolnic.PeerError(c, p.qp)
	if pe == nil && c.Status == ibv.WCWRFlushErr {
		pe = toolnic.FindPeerError([]*verbs.CQ{p.CQ}, []*verbs.QP{p.qp})
	}
	return fail(pe, "Failed status %s (%d) for wr_id %#x (%s)", c.Status, c.Status, c.WRID, c.Opcode)
}

// handle takes one completion.
func (p *tmpp) handle(c ibv.WorkCompletion) error {
	if c.Status == ibv.WCRetryExcErr && p.peerDone && !p.peerGone {
		// A send went unanswered after the peer's final NO_TAG arrived. The
		// peer sends that only once it has all our messages and FINs, and
		// closes once it also has our final NO_TAG and its own is
		// acknowledged. So either it has everything and closed before its
		// ACK of our last sends reached us (the ACK was lost: nothing
		// answers the retries), or it never got our NO_TAG and fails its
		// own wait. Every byte of the peer's is here, so this side is done;
		// the sends after the failed one flush.
		fmt.Fprintf(p.env.Err, "the peer closed before its acknowledgement of our last messages arrived\n")
		p.peerGone, p.doneSent = true, true
		return nil
	}
	if p.peerGone && c.Status == ibv.WCWRFlushErr {
		return nil
	}
	if c.Status != ibv.WCSuccess {
		return p.wcError(c)
	}
	n := int(c.WRID >> 8)
	switch c.WRID & 0xff {
	case wrSend:
		p.sendsLeft--
	case wrDone:
		p.doneSent = true
	case wrFin:
	case wrRead:
		s := &p.recv[n%p.cfg.Tags]
		if s.state != rReading || s.k != n {
			return fail(nil, "READ completion for message %d, not being read", n)
		}
		if _, err := p.qp.PostSend(ibv.SendWR{WRID: wrid(wrFin, n), Opcode: ibv.WRSend,
			Flags: ibv.SendSignaled | ibv.SendInline, InlineData: s.fin[:]}); err != nil {
			return fail(err, "Couldn't post FIN")
		}
		// A READ's byte_len is not defined (ibv_poll_cq(3)): the RVH's length
		// was checked when the READ was posted.
		return p.received(n, p.cfg.length(n))
	case wrTagged:
		if c.Opcode != ibv.WCTMRecv {
			return fail(nil, "tagged buffer completed as %s", c.Opcode)
		}
		if c.Flags&ibv.WCTMDataValid == 0 {
			return nil // the first of a multi-packet message's two completions
		}
		if c.TMTag != tag(n) || c.TMPriv != uint32(n) {
			return fail(nil, "message %d matched tag %#x app_ctx %d, want %#x and %d", n, c.TMTag, c.TMPriv, tag(n), uint32(n))
		}
		s := &p.recv[n%p.cfg.Tags]
		if s.state != rListed || s.k != n {
			return fail(nil, "message %d matched a tag not listed", n)
		}
		p.res.Matched++
		return p.received(n, int(c.ByteLen))
	case wrUnexp:
		return p.handleUnexp(c, n)
	case wrOps:
		// Only failed list operations complete (none is signaled).
		return fail(nil, "list operation %s completed", c.Opcode)
	default:
		return fail(nil, "Completion for unknown wr_id %#x", c.WRID)
	}
	return nil
}

// handleUnexp takes a message delivered whole into SRQ buffer i: a FIN, the
// peer's final NO_TAG, or an unexpected tagged message that software
// matches.
func (p *tmpp) handleUnexp(c ibv.WorkCompletion, i int) error {
	b := p.Buf[p.unexpOff+i*p.ubuf : p.unexpOff+i*p.ubuf+int(c.ByteLen)]
	m, err := wire.ParseTM(b)
	if err != nil {
		return fail(err, "a message without a valid TMH")
	}
	k := int(m.TMH.Tag() &^ TagBase)
	switch c.Opcode {
	case ibv.WCTMNoTag:
		switch m.TMH.Op() {
		case wire.TMFin:
			if m.TMH.Tag() != tag(k) || k >= p.cfg.Iters || !p.finWait[k%p.cfg.Tags] {
				return fail(nil, "FIN for tag %#x, no rendezvous waits for it", m.TMH.Tag())
			}
			p.finWait[k%p.cfg.Tags] = false
			p.finsLeft--
		case wire.TMNoTag:
			p.peerDone = true
		default:
			return fail(nil, "%s message completed as %s", m.TMH.Op(), c.Opcode)
		}
		return p.postUnexp(i)
	case ibv.WCRecv:
	default:
		return fail(nil, "SRQ buffer completed as %s", c.Opcode)
	}
	// An unexpected message: the NIC counted it and stopped matching.
	p.swUnexp++
	p.res.Unexpected++
	lo, hi := p.window(p.rwin)
	if m.TMH.Tag() != tag(k) || k < lo || k >= hi {
		return fail(nil, "unexpected message with tag %#x outside window %d", m.TMH.Tag(), p.rwin)
	}
	s := &p.recv[k%p.cfg.Tags]
	switch s.state {
	case rListed:
		// The NIC did not match the tag we added (matching was off): take
		// it back before placing the message ourselves.
		if _, err := p.SRQ.PostOps([]ibv.OpsWR{{WRID: wrid(wrOps, k), Opcode: ibv.WRTagDel, Handle: s.handle}}); err != nil {
			return fail(err, "Couldn't delete tag %#x", tag(k))
		}
	case rLate:
		// Posted now, after its message: found among the unexpected.
		p.res.Late++
	default:
		return fail(nil, "unexpected message %d, already received", k)
	}
	switch m.TMH.Op() {
	case wire.TMEager:
		n := copy(p.tagged(k%p.cfg.Tags), m.Data)
		if n != len(m.Data) {
			return fail(nil, "message %d: %d bytes, the buffer holds %d", k, len(m.Data), n)
		}
		if err := p.postUnexp(i); err != nil {
			return err
		}
		return p.received(k, n)
	case wire.TMRndv:
		// Do what the NIC would have: READ the data, then send the FIN.
		l := int(m.RVH.Len())
		if l != p.cfg.length(k) {
			return fail(nil, "message %d: rendezvous of %d bytes, want %d", k, l, p.cfg.length(k))
		}
		s.state = rReading
		wire.PutTMH(s.fin[:], wire.TMFin, m.TMH.AppCtx(), m.TMH.Tag())
		read := ibv.SendWR{WRID: wrid(wrRead, k), Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{p.MR.SGE(p.tagOff+(k%p.cfg.Tags)*p.cfg.Size, l)}, RemoteAddr: m.RVH.VA(), RKey: m.RVH.RKey()}
		if _, err := p.qp.PostSend(read); err != nil {
			return fail(err, "Couldn't post RDMA READ")
		}
		return p.postUnexp(i)
	}
	return fail(nil, "unexpected %s message", m.TMH.Op())
}

// received completes message k, n bytes in its tagged buffer.
func (p *tmpp) received(k, n int) error {
	cfg := p.cfg
	if want := cfg.length(k); n != want {
		return fail(nil, "message %d: %d bytes, want %d", k, n, want)
	}
	if cfg.rndv(k) {
		p.res.Rendezvous++
	} else {
		p.res.Eager++
	}
	if cfg.Check {
		b := p.tagged(k % cfg.Tags)[:n]
		for j, v := range b {
			if v != patternByte(k, j) {
				return fail(ErrBadData, "message %d (tag %#x): byte %d is %#02x, want %#02x", k, tag(k), j, v, patternByte(k, j))
			}
		}
	}
	p.recv[k%cfg.Tags].state = rDone
	p.rleft--
	return nil
}

// JSON returns r as the one-line JSON object --json prints.
func JSON(r *Result) ([]byte, error) {
	b, err := json.Marshal(r)
	return append(b, '\n'), err
}
