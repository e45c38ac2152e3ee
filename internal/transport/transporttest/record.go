package transporttest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/wire"
)

// Packet is one datagram as the recorder saw it when it was offered to
// the fabric, before filters and impairments: a private copy, and the
// fake time it left at.
type Packet struct {
	fabric.Packet
	At time.Time
}

// Desc describes a packet compactly: the opcode's name without "RC_", its
// PSN, "!" for AckReq, and the syndrome of an AETH that is not a plain
// ACK: "SEND_MIDDLE/3", "SEND_LAST/4!", "ACKNOWLEDGE/2 NAK_PSN_SEQ_ERR".
func (p *Packet) Desc() string {
	if !p.Parsed {
		return fmt.Sprintf("unparsed(%d bytes)", len(p.Data))
	}
	w := &p.Wire
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", strings.TrimPrefix(w.Opcode.String(), "RC_"), w.PSN())
	if w.AckReq() {
		b.WriteString("!")
	}
	if a := w.AETH(); a != nil && a.Syndrome() != wire.AckUnlimited {
		fmt.Fprintf(&b, " %v", a.Syndrome())
	}
	return b.String()
}

// Syndrome returns the packet's AETH syndrome, 0 without an AETH.
func (p *Packet) Syndrome() wire.Syndrome {
	if a := p.Wire.AETH(); a != nil {
		return a.Syndrome()
	}
	return 0
}

// Recorder keeps every datagram offered to a fabric, in order.
type Recorder struct {
	clk    clock.Clock
	remove func()
	mu     sync.Mutex
	pkts   []Packet // guarded by mu
}

func newRecorder(f *fabric.Fabric, clk clock.Clock) *Recorder {
	r := &Recorder{clk: clk}
	r.remove = f.Tap(func(p fabric.Packet) {
		s := Packet{Packet: p.Clone(), At: clk.Now()}
		r.mu.Lock()
		r.pkts = append(r.pkts, s)
		r.mu.Unlock()
	})
	return r
}

// Match returns the recorded datagrams m matches (all for nil), in order.
func (r *Recorder) Match(m fabric.Matcher) []Packet {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Packet
	for i := range r.pkts {
		if m == nil || m(&r.pkts[i].Packet) {
			out = append(out, r.pkts[i])
		}
	}
	return out
}

// Count returns how many recorded datagrams m matches.
func (r *Recorder) Count(m fabric.Matcher) int { return len(r.Match(m)) }

// Reset forgets what was recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.pkts = nil
	r.mu.Unlock()
}

// Descs describes ps, one string per packet (Packet.Desc).
func Descs(ps []Packet) []string {
	out := make([]string, len(ps))
	for i := range ps {
		out[i] = ps[i].Desc()
	}
	return out
}

// CheckSeq fails the test unless ps are described by want, in order.
func CheckSeq(t testing.TB, what string, ps []Packet, want ...string) {
	t.Helper()
	if got := Descs(ps); !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// Index returns the position in ps of the first packet m matches, or -1.
func Index(ps []Packet, m fabric.Matcher) int {
	for i := range ps {
		if m(&ps[i].Packet) {
			return i
		}
	}
	return -1
}

// IsNAK matches ACKs whose AETH carries a NAK or an RNR NAK.
func IsNAK(p *fabric.Packet) bool {
	return p.Parsed && p.Wire.Opcode.Op() == wire.RCAck.Op() && p.Wire.AETH() != nil &&
		!p.Wire.AETH().Syndrome().IsACK()
}

// IsRNRNAK matches ACKs whose AETH carries an RNR NAK.
func IsRNRNAK(p *fabric.Packet) bool {
	return IsNAK(p) && p.Wire.AETH().Syndrome().Type() == wire.SyndromeRNRNAK
}

// DropFirst returns a filter that drops the first n datagrams m matches.
func DropFirst(n int, m fabric.Matcher) fabric.Filter {
	seen := 0
	var mu sync.Mutex
	return func(p *fabric.Packet) fabric.Action {
		if m != nil && !m(p) {
			return fabric.Pass
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen <= n {
			return fabric.Drop
		}
		return fabric.Pass
	}
}
