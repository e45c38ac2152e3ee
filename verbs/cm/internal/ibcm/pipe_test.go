package ibcm

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/wire"
)

// pipe is an in-memory MAD network between agents: SendMAD queues, pump
// delivers in order (so no agent calls another under its lock), and a
// drop function may lose chosen MADs.
type pipe struct {
	mu     sync.Mutex
	q      []pkt
	agents map[netip.Addr]*Agent
	drop   func(p pkt) bool
	log    []string
}

type pkt struct {
	from, to netip.Addr
	mad      []byte
}

func (p pkt) attr() uint16 { return wire.MAD(p.mad).AttrID() }

type pipePort struct {
	p    *pipe
	self netip.Addr
}

func (pp pipePort) SendMAD(dst netip.Addr, mad []byte) error {
	pp.p.mu.Lock()
	defer pp.p.mu.Unlock()
	pp.p.q = append(pp.p.q, pkt{pp.self, dst, append([]byte(nil), mad...)})
	return nil
}

var attrNames = map[uint16]string{wire.CMAttrREQ: "REQ", wire.CMAttrMRA: "MRA", wire.CMAttrREJ: "REJ",
	wire.CMAttrREP: "REP", wire.CMAttrRTU: "RTU", wire.CMAttrDREQ: "DREQ", wire.CMAttrDREP: "DREP",
	wire.CMAttrSIDRREQ: "SIDR_REQ", wire.CMAttrSIDRREP: "SIDR_REP"}

// pump delivers queued MADs until none are left; it returns how many.
func (p *pipe) pump() int {
	n := 0
	for {
		p.mu.Lock()
		if len(p.q) == 0 {
			p.mu.Unlock()
			return n
		}
		k := p.q[0]
		p.q = p.q[1:]
		drop := p.drop != nil && p.drop(k)
		mark := ""
		if drop {
			mark = " (dropped)"
		}
		p.log = append(p.log, fmt.Sprintf("%v>%v %s%s", k.from, k.to, attrNames[k.attr()], mark))
		a := p.agents[k.to]
		p.mu.Unlock()
		n++
		if !drop && a != nil {
			a.Receive(k.mad, k.from)
		}
	}
}

func (p *pipe) takeLog() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.log
	p.log = nil
	return l
}

// recorder collects the events of every ID of an agent.
type recorder struct {
	mu  sync.Mutex
	evs []*Event
	// onEvent, when set, runs in the handler (to answer at once).
	onEvent func(*Event)
}

func (r *recorder) handle(ev *Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	f := r.onEvent
	r.mu.Unlock()
	if f != nil {
		f(ev)
	}
}

func (r *recorder) types() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.evs {
		s = append(s, e.Type.String())
	}
	return strings.Join(s, " ")
}

func (r *recorder) last(t *testing.T) *Event {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.evs) == 0 {
		t.Fatal("no event")
	}
	return r.evs[len(r.evs)-1]
}

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

type bed struct {
	t      *testing.T
	clk    *clock.Manual
	p      *pipe
	a, b   *Agent
	ra, rb *recorder
}

func newBed(t *testing.T) *bed {
	t.Helper()
	clk := clock.NewManual(time.Unix(1000, 0))
	p := &pipe{agents: map[netip.Addr]*Agent{}}
	mk := func(self netip.Addr, guid uint64, seed uint64) *Agent {
		a, err := New(Config{Port: pipePort{p, self}, Clock: clk, GID: self, CAGUID: guid, AckDelay: 15, HiTID: 2, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		p.agents[self] = a
		return a
	}
	return &bed{t: t, clk: clk, p: p, a: mk(addrA, 0xa, 1), b: mk(addrB, 0xb, 2), ra: &recorder{}, rb: &recorder{}}
}

// reqParam is what cma.c sends for an RC connection on RoCE.
func reqParam(service uint64, qpn uint32, pd []byte) *ReqParam {
	return &ReqParam{
		Path: Path{SGID: addrA, DGID: addrB, FlowLabel: 0x68f03, HopLimit: 64, PKey: 0xffff, MTU: 3,
			PacketLifeTime: 18},
		ServiceID: service, QPNum: qpn, QPType: QPTypeRC, StartingPSN: 0x61ebe5, PrivateData: pd,
		ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20,
		RetryCount: 7, RNRRetryCount: 7, MaxCMRetries: 15,
	}
}

const service = 0x0106_1C06 // RDMA_PS_TCP port 7174

// listen makes b listen on service.
func (bd *bed) listen() *ID {
	l, err := bd.b.CreateID(bd.rb.handle, "listener")
	if err != nil {
		bd.t.Fatal(err)
	}
	if err := l.Listen(service, 0); err != nil {
		bd.t.Fatal(err)
	}
	return l
}

// connect sends a REQ from a.
func (bd *bed) connect(qpn uint32) *ID {
	id, err := bd.a.CreateID(bd.ra.handle, "active")
	if err != nil {
		bd.t.Fatal(err)
	}
	if err := id.SendREQ(reqParam(service, qpn, []byte("hello"))); err != nil {
		bd.t.Fatal(err)
	}
	return id
}

func (bd *bed) wantLog(want ...string) {
	bd.t.Helper()
	got := bd.p.takeLog()
	var short []string
	for _, g := range got {
		g = strings.ReplaceAll(g, addrA.String(), "A")
		g = strings.ReplaceAll(g, addrB.String(), "B")
		short = append(short, g)
	}
	if strings.Join(short, ", ") != strings.Join(want, ", ") {
		bd.t.Errorf("MADs:\n got %s\nwant %s", strings.Join(short, ", "), strings.Join(want, ", "))
	}
}

func wantEvents(t *testing.T, r *recorder, want string) {
	t.Helper()
	if got := r.types(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}
