package link

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/softnic/softnic/wire"
)

// TestCoalesce: which datagrams of a batch go out in one GSO send
// (coalesce), as wireguard-go's TestCoalesceMessages checks its own.
func TestCoalesce(t *testing.T) {
	flow := wire.Encap{Dst: netip.MustParseAddr("192.0.2.2"), DstPort: wire.UDPPort, HopLimit: 64}
	other := func(f func(e *wire.Encap)) wire.Encap { e := flow; f(&e); return e }
	dg := func(n int) Datagram { return Datagram{Encap: flow, Buf: make([]byte, n)} }
	dgs := func(k, n int) []Datagram {
		ds := make([]Datagram, k)
		for i := range ds {
			ds[i] = dg(n)
		}
		return ds
	}
	with := func(d Datagram, e wire.Encap) Datagram { d.Encap = e; return d }
	split := Datagram{Encap: flow, Buf: make([]byte, 40), Payload: make([]byte, 60), Split: 12}
	for _, c := range []struct {
		name     string
		msgs     []Datagram
		skip     []int // datagrams dropped before grouping (sendable said no)
		maxBytes int
		gso      bool
		want     [][]int // each send's datagrams
	}{
		{name: "one", msgs: dgs(1, 100), gso: true, want: [][]int{{0}}},
		{name: "same size", msgs: dgs(3, 100), gso: true, want: [][]int{{0, 1, 2}}},
		{name: "no gso", msgs: dgs(3, 100), want: [][]int{{0}, {1}, {2}}},
		{name: "shorter last ends the send", msgs: []Datagram{dg(100), dg(100), dg(50), dg(100)}, gso: true,
			want: [][]int{{0, 1, 2}, {3}}},
		{name: "larger starts a send", msgs: []Datagram{dg(100), dg(200), dg(200)}, gso: true,
			want: [][]int{{0}, {1, 2}}},
		{name: "empty never joins", msgs: []Datagram{dg(100), dg(0), dg(0)}, gso: true,
			want: [][]int{{0}, {1}, {2}}},
		{name: "split payload counts", msgs: []Datagram{split, dg(100), split}, gso: true,
			want: [][]int{{0, 1, 2}}},
		{name: "another destination", msgs: []Datagram{dg(100),
			with(dg(100), other(func(e *wire.Encap) { e.Dst = netip.MustParseAddr("192.0.2.3") }))}, gso: true,
			want: [][]int{{0}, {1}}},
		{name: "another port", msgs: []Datagram{dg(100),
			with(dg(100), other(func(e *wire.Encap) { e.DstPort = 4792 }))}, gso: true,
			want: [][]int{{0}, {1}}},
		{name: "another traffic class", msgs: []Datagram{dg(100),
			with(dg(100), other(func(e *wire.Encap) { e.TrafficClass = 0x68 }))}, gso: true,
			want: [][]int{{0}, {1}}},
		{name: "another hop limit", msgs: []Datagram{dg(100),
			with(dg(100), other(func(e *wire.Encap) { e.HopLimit = 1 }))}, gso: true,
			want: [][]int{{0}, {1}}},
		{name: "source port and ID do not matter", msgs: []Datagram{dg(100),
			with(dg(100), other(func(e *wire.Encap) { e.SrcPort, e.ID = 0xC001, 7 }))}, gso: true,
			want: [][]int{{0, 1}}},
		{name: "a dropped datagram ends the send", msgs: dgs(4, 100), skip: []int{2}, gso: true,
			want: [][]int{{0, 1}, {3}}},
		{name: "segment limit", msgs: dgs(gsoMaxSegments+1, 100), gso: true,
			want: [][]int{seq(0, gsoMaxSegments), {gsoMaxSegments}}},
		// 16 of 4095 bytes are 65520: within IPv6's 65527, over IPv4's 65507.
		{name: "IPv4 byte limit", msgs: dgs(17, 4095), maxBytes: gsoMaxBytes4, gso: true,
			want: [][]int{seq(0, 15), seq(15, 17)}},
		{name: "IPv6 byte limit", msgs: dgs(17, 4095), maxBytes: gsoMaxBytes6, gso: true,
			want: [][]int{seq(0, 16), {16}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			maxBytes := c.maxBytes
			if maxBytes == 0 {
				maxBytes = gsoMaxBytes4
			}
			first, count := make([]int, len(c.msgs)), make([]int, len(c.msgs))
			nm := 0
			for i := range c.msgs {
				if !slices.Contains(c.skip, i) {
					nm = coalesce(c.msgs, i, first, count, nm, maxBytes, c.gso)
				}
			}
			var got [][]int
			for g := range nm {
				got = append(got, seq(first[g], first[g]+count[g]))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("sends %v, want %v", got, c.want)
			}
		})
	}
}

// seq returns a, a+1, ..., b-1.
func seq(a, b int) []int {
	s := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		s = append(s, i)
	}
	return s
}
