package pingpong

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/softnic/softnic/verbs"
)

func gid(s string) verbs.GID { return verbs.GIDFromAddr(netip.MustParseAddr(s)) }

func TestWireGID(t *testing.T) {
	// rxe-interop-facts.md §3: ::ffff:10.77.0.2 on the wire of ibv_*_pingpong.
	if got, want := WireGID(gid("10.77.0.2")), "00000000000000000000ffff0a4d0002"; got != want {
		t.Errorf("WireGID: got %q, want %q", got, want)
	}
	if got, want := WireGID(gid("fe80::5054:ff:fe4d:7702")), "fe80000000000000505400fffe4d7702"; got != want {
		t.Errorf("WireGID: got %q, want %q", got, want)
	}
	g, err := ParseWireGID("00000000000000000000FFFF0a4d0002")
	if err != nil || g != gid("10.77.0.2") {
		t.Errorf("ParseWireGID: got %v, %v", g, err)
	}
	for _, s := range []string{"", "00", "0000000000000000000000000000000g", "00000000000000000000ffff0a4d00020"} {
		if _, err := ParseWireGID(s); err == nil {
			t.Errorf("ParseWireGID(%q): got no error", s)
		}
	}
}

func TestDestMarshal(t *testing.T) {
	d := Dest{LID: 0, QPN: 0x11, PSN: 0x87c0ac, GID: gid("10.77.0.3")}
	b := d.Marshal()
	want := "0000:000011:87c0ac:00000000000000000000ffff0a4d0003\x00"
	if string(b[:]) != want {
		t.Errorf("Marshal: got %q, want %q", b, want)
	}
	if len(b) != len("0000:000000:000000:00000000000000000000000000000000")+1 {
		t.Errorf("message size %d", len(b))
	}
	got, err := ParseDest(b[:])
	if err != nil || got != d {
		t.Errorf("ParseDest(Marshal(d)): got %+v, %v, want %+v", got, err, d)
	}
	// srq_pingpong's unused entries are all zero.
	z := Dest{}.Marshal()
	if string(z[:]) != "0000:000000:000000:00000000000000000000000000000000\x00" {
		t.Errorf("zero Dest: got %q", z)
	}
}

func TestParseDest(t *testing.T) {
	// Messages from rdma-core's sprintf("%04x:%06x:%06x:%s"), as in the
	// captures of rxe-peer (rc_pingpong_5000.txt).
	for _, tt := range []struct {
		msg  string
		want Dest
	}{
		{"0000:000012:5fd283:00000000000000000000ffff0a4d0003\x00", Dest{QPN: 0x12, PSN: 0x5fd283, GID: gid("10.77.0.3")}},
		{"0000:000012:169c56:00000000000000000000ffff0a4d0002\x00", Dest{QPN: 0x12, PSN: 0x169c56, GID: gid("10.77.0.2")}},
		{"0001:ffffff:000000:fe80000000000000505400fffe4d7702\x00", Dest{LID: 1, QPN: 0xffffff, GID: gid("fe80::5054:ff:fe4d:7702")}},
	} {
		got, err := ParseDest([]byte(tt.msg))
		if err != nil || got != tt.want {
			t.Errorf("ParseDest(%q): got %+v, %v, want %+v", tt.msg, got, err, tt.want)
		}
	}
	for _, msg := range []string{
		"", "garbage", "0000:000012:5fd283\x00", "0000:00001x:5fd283:00000000000000000000ffff0a4d0003\x00",
		"0000:000012:5fd283:00000000000000000000ffff0a4d00\x00", "10000:000012:5fd283:00000000000000000000ffff0a4d0003",
	} {
		if _, err := ParseDest([]byte(msg)); err == nil {
			t.Errorf("ParseDest(%q): got no error", msg)
		}
	}
	var fe *ErrFormat
	_, err := ParseDest([]byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "perftest") {
		t.Errorf("perftest version message: got %v, want an ErrFormat naming perftest", err)
	}
}

func TestLooksLikeDest(t *testing.T) {
	for s, want := range map[string]bool{"": true, "00": true, "0000:": true, "0000:00001": true, "6.06": false, "0000x": false, "GET /": false} {
		if got := LooksLikeDest([]byte(s)); got != want {
			t.Errorf("LooksLikeDest(%q): got %v, want %v", s, got, want)
		}
	}
}
