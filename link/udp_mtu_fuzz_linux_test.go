package link

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// newLinkMsg builds an RTM_NEWLINK netlink message for interface index
// with an IFLA_MTU attribute, as the kernel sends on NETDEV_CHANGEMTU.
func newLinkMsg(index int32, mtu uint32) []byte {
	attr := make([]byte, unix.SizeofRtAttr+4)
	binary.NativeEndian.PutUint16(attr[0:], uint16(len(attr)))
	binary.NativeEndian.PutUint16(attr[2:], unix.IFLA_MTU)
	binary.NativeEndian.PutUint32(attr[4:], mtu)
	ifi := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(ifi[4:], uint32(index))
	n := unix.SizeofNlMsghdr + len(ifi) + len(attr)
	b := make([]byte, unix.SizeofNlMsghdr, n)
	binary.NativeEndian.PutUint32(b[0:], uint32(n))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_NEWLINK)
	return append(append(b, ifi...), attr...)
}

// TestIfaceMTUParse: an RTM_NEWLINK for the watched interface sets the
// MTU; one for another interface, another message type or a truncated
// message changes nothing.
func TestIfaceMTUParse(t *testing.T) {
	var m ifaceWatch
	m.index = 7
	m.mtu.Store(1500)
	m.parse(newLinkMsg(8, 9000))
	if got := m.mtu.Load(); got != 1500 {
		t.Fatalf("another interface's message: MTU %d, want 1500", got)
	}
	msg := newLinkMsg(7, 9000)
	m.parse(msg[:len(msg)-3])
	if got := m.mtu.Load(); got != 1500 {
		t.Fatalf("truncated message: MTU %d, want 1500", got)
	}
	del := newLinkMsg(7, 1280)
	binary.NativeEndian.PutUint16(del[4:], unix.RTM_DELLINK)
	m.parse(del)
	if got := m.mtu.Load(); got != 1500 {
		t.Fatalf("RTM_DELLINK: MTU %d, want 1500", got)
	}
	m.parse(append(newLinkMsg(8, 1280), newLinkMsg(7, 9000)...))
	if got := m.mtu.Load(); got != 9000 {
		t.Fatalf("two messages in one read: MTU %d, want 9000", got)
	}
}

// FuzzIfaceMTUParse: whatever a netlink read returns, parse never panics,
// and it changes the MTU only from an RTM_NEWLINK of the watched index.
func FuzzIfaceMTUParse(f *testing.F) {
	f.Add(newLinkMsg(7, 9000))
	f.Add(newLinkMsg(3, 1500))
	f.Add(append(newLinkMsg(7, 1280), newLinkMsg(7, 65536)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m ifaceWatch
		m.index = 7
		m.mtu.Store(-1)
		m.parse(b)
		if m.mtu.Load() != -1 && len(b) < unix.SizeofNlMsghdr+unix.SizeofIfInfomsg+unix.SizeofRtAttr+4 {
			t.Fatalf("MTU set from %d bytes, shorter than any RTM_NEWLINK with IFLA_MTU", len(b))
		}
	})
}
