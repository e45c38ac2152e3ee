package ud

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/wire"
)

// TestPutGRHRoundTrip: the GRH area PutGRH writes, followed by the UDP
// header and payload, parses back (wire.ParseEncap) to the Encap it was
// built from; IPv4 puts 20 zero bytes first.
func TestPutGRHRoundTrip(t *testing.T) {
	for _, e := range []wire.Encap{
		{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 0xC123, DstPort: 4791,
			TrafficClass: 0x2A, HopLimit: 3, ID: 0x1234, FragOff: wire.IPv4DF},
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 0xD000, DstPort: 4791,
			TrafficClass: 0x81, HopLimit: 200, FlowLabel: 0xFEDCB},
	} {
		payload := bytes.Repeat([]byte{0xAB}, 36)
		var grh [GRHLen]byte
		PutGRH(grh[:], &e, len(payload))
		ipLen := wire.IPv6HeaderLen
		if e.IsIPv4() {
			ipLen = wire.IPv4HeaderLen
			if !bytes.Equal(grh[:20], make([]byte, 20)) {
				t.Fatalf("IPv4 GRH area starts % x, want 20 zero bytes", grh[:20])
			}
		}
		dg := append([]byte(nil), grh[GRHLen-ipLen:]...)
		udp := make([]byte, 8)
		binary.BigEndian.PutUint16(udp, e.SrcPort)
		binary.BigEndian.PutUint16(udp[2:], e.DstPort)
		binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
		dg = append(append(dg, udp...), payload...)
		got, rest, err := wire.ParseEncap(dg)
		if err != nil {
			t.Fatalf("%v: ParseEncap: %v", e.Src, err)
		}
		if got != e || !bytes.Equal(rest, payload) {
			t.Fatalf("round trip: got %+v, want %+v", got, e)
		}
	}
}

// TestCheckAV: the address vectors a UD destination may have.
func TestCheckAV(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	av := func(dgid string, mod func(*ibv.AHAttr)) *ibv.AHAttr {
		a := &ibv.AHAttr{IsGlobal: true, PortNum: 1}
		if dgid != "" {
			a.GRH.DGID = netip.MustParseAddr(dgid)
		}
		if mod != nil {
			mod(a)
		}
		return a
	}
	for _, tc := range []struct {
		name  string
		local netip.Addr
		av    *ibv.AHAttr
		ok    bool
	}{
		{"v4", v4, av("10.0.0.2", nil), true},
		{"v4 mapped", v4, av("::ffff:10.0.0.2", nil), true},
		{"v6", v6, av("fd00::2", nil), true},
		{"port 0", v4, av("10.0.0.2", func(a *ibv.AHAttr) { a.PortNum = 0 }), true},
		{"multicast", v6, av("ff02::1", nil), true},
		{"not global", v4, av("10.0.0.2", func(a *ibv.AHAttr) { a.IsGlobal = false }), false},
		{"no dgid", v4, av("", nil), false},
		{"unspecified", v6, av("::", nil), false},
		{"mapped unspecified", v4, av("::ffff:0.0.0.0", nil), false},
		{"family", v4, av("fd00::2", nil), false},
		{"family 2", v6, av("10.0.0.2", nil), false},
		{"sgid", v4, av("10.0.0.2", func(a *ibv.AHAttr) { a.GRH.SGIDIndex = 1 }), false},
		{"port 2", v4, av("10.0.0.2", func(a *ibv.AHAttr) { a.PortNum = 2 }), false},
	} {
		err := CheckAV(tc.av, tc.local)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errno.Invalid)) {
			t.Errorf("%s: CheckAV = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
