package wire

import (
	"bytes"
	"errors"
	"testing"
)

// The layout of tm_types.h: opcode, 3 reserved bytes, be32 app_ctx, be64
// tag; then be64 va, be32 rkey, be32 len.
func TestTMHeadersLayout(t *testing.T) {
	b := make([]byte, TMHLen+RVHLen+3)
	PutTMH(b, TMRndv, 0x01020304, 0x1112131415161718)
	PutRVH(b[TMHLen:], 0x2122232425262728, 0x31323334, 0x41424344)
	copy(b[TMHLen+RVHLen:], "usr")
	want := []byte{
		1, 0, 0, 0, 1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
		0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x32, 0x33, 0x34, 0x41, 0x42, 0x43, 0x44,
		'u', 's', 'r',
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("headers % x\nwant    % x", b, want)
	}
	m, err := ParseTM(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.TMH.Op() != TMRndv || m.TMH.AppCtx() != 0x01020304 || m.TMH.Tag() != 0x1112131415161718 {
		t.Errorf("TMH %v %#x %#x", m.TMH.Op(), m.TMH.AppCtx(), m.TMH.Tag())
	}
	if m.RVH.VA() != 0x2122232425262728 || m.RVH.RKey() != 0x31323334 || m.RVH.Len() != 0x41424344 {
		t.Errorf("RVH %#x %#x %#x", m.RVH.VA(), m.RVH.RKey(), m.RVH.Len())
	}
	if string(m.UserHdr) != "usr" || m.Data != nil {
		t.Errorf("user header %q, data %q", m.UserHdr, m.Data)
	}
}

func TestParseTM(t *testing.T) {
	eager := make([]byte, TMHLen+5)
	PutTMH(eager, TMEager, 7, 42)
	copy(eager[TMHLen:], "hello")
	m, err := ParseTM(eager)
	if err != nil || m.TMH.Op() != TMEager || string(m.Data) != "hello" || m.RVH != nil {
		t.Errorf("eager: %+v, %v", m, err)
	}
	noTag := make([]byte, TMHLen)
	PutTMH(noTag, TMNoTag, 0, 0)
	if m, err := ParseTM(noTag); err != nil || m.TMH.Op() != TMNoTag || len(m.Data) != 0 {
		t.Errorf("no tag: %+v, %v", m, err)
	}
	fin := make([]byte, TMHLen)
	PutTMH(fin, TMFin, 1, 2)
	if m, err := ParseTM(fin); err != nil || m.TMH.Op() != TMFin {
		t.Errorf("fin: %+v, %v", m, err)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short TMH", eager[:TMHLen-1], ErrTruncated},
		{"RNDV without RVH", rndvPrefix(), ErrTruncated},
		{"bad opcode", append([]byte{4}, eager[1:]...), ErrMalformed},
	} {
		if _, err := ParseTM(c.msg); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

// rndvPrefix is a RNDV TMH followed by 15 bytes: one short of an RVH.
func rndvPrefix() []byte {
	b := make([]byte, TMHLen+RVHLen-1)
	PutTMH(b, TMRndv, 0, 9)
	return b
}

// FuzzParseTM: any payload parses or fails without a panic, and what
// parses re-encodes to the bytes it came from.
func FuzzParseTM(f *testing.F) {
	f.Add([]byte{})
	f.Add(rndvPrefix())
	f.Add(append(rndvPrefix(), 0, 'x'))
	b := make([]byte, TMHLen+3)
	PutTMH(b, TMEager, 1, 2)
	f.Add(b)
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := ParseTM(msg)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		out := make([]byte, TMHLen, len(msg))
		PutTMH(out, m.TMH.Op(), m.TMH.AppCtx(), m.TMH.Tag())
		copy(out[1:4], m.TMH.Reserved())
		if m.RVH != nil {
			r := make([]byte, RVHLen)
			PutRVH(r, m.RVH.VA(), m.RVH.RKey(), m.RVH.Len())
			out = append(append(out, r...), m.UserHdr...)
		} else {
			out = append(out, m.Data...)
		}
		if m.TMH.Op() == TMFin {
			out = append(out, msg[TMHLen:]...)
		}
		if !bytes.Equal(out, msg) {
			t.Fatalf("re-encoded % x\nfrom         % x", out, msg)
		}
	})
}
