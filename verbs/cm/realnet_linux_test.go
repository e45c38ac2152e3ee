package cm_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/test/netnstest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// TestResolveAndConnectOnARealNetwork runs the CM on a UDP link in a
// network namespace joined to another by a veth, against the kernel's
// routing and neighbour tables, as rdma_resolve_addr resolves
// (drivers/infiniband/core/addr.c): an address with no route is
// ADDR_ERROR -ENETUNREACH at once; behind an unreachable route
// -EHOSTUNREACH; on the veth's subnet with nobody there, -ETIMEDOUT once
// timeout_ms has passed (not before); the peer's address resolves (its
// neighbour answers). The peer runs no softnic: its kernel answers the
// REQ with an ICMP port unreachable, which the link reads from its error
// queue, and Connect ends with UNREACHABLE -ECONNREFUSED within a round
// trip, where the kernel's CM would send 16 REQs over 98 s and report
// -ETIMEDOUT. Root only.
func TestResolveAndConnectOnARealNetwork(t *testing.T) {
	netnstest.Require(t)
	a := netnstest.New(t, fmt.Sprintf("p30b-%d-ca", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("p30b-%d-cb", os.Getpid()))
	netnstest.Veth(t, a, "p30bc0", "10.91.0.1/24", b, "p30bc1", "10.91.0.2/24", 1500)
	a.IP(t, "route", "add", "unreachable", "10.92.0.0/16")

	var l *link.UDPLink
	if err := a.Do(func() (err error) {
		l, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("10.91.0.1")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: l})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	defer dev.Close()
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	resolve := func(dst string, timeout time.Duration) (*cm.ID, time.Duration, error) {
		t.Helper()
		id, err := c.CreateID(nil, nil, cm.PSTCP, ibv.QPTypeRC) // synchronous
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(netip.MustParseAddr(dst), 7471), timeout)
		return id, time.Since(start), err
	}
	for _, tc := range []struct {
		dst  string
		want syscall.Errno
	}{{"10.99.0.1", syscall.ENETUNREACH}, {"10.92.0.1", syscall.EHOSTUNREACH}} {
		id, took, err := resolve(tc.dst, 2*time.Second)
		if !errors.Is(err, tc.want) || took > time.Second {
			t.Errorf("ResolveAddr %s: %v after %v; want ADDR_ERROR %v at once", tc.dst, err, took, tc.want)
		}
		id.Destroy()
	}
	id, took, err := resolve("10.91.0.77", 500*time.Millisecond)
	if !errors.Is(err, syscall.ETIMEDOUT) || took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("ResolveAddr of an address nobody answers for: %v after %v; want ETIMEDOUT after 500 ms", err, took)
	}
	id.Destroy()

	id, took, err = resolve("10.91.0.2", 2*time.Second)
	if err != nil {
		t.Fatalf("ResolveAddr of the peer: %v after %v", err, took)
	}
	defer id.Destroy()
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := id.CreateQP(nil, verbs.QPInitAttr{Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	defer id.DestroyQP()
	start := time.Now()
	err = id.Connect(nil)
	took = time.Since(start)
	if !errors.Is(err, cm.ECONNREFUSED) || took > 2*time.Second {
		t.Fatalf("Connect to a host without softnic: %v after %v; want UNREACHABLE (ECONNREFUSED) within a round trip", err, took)
	}
	t.Logf("UNREACHABLE -ECONNREFUSED %v after Connect (the kernel's CM: 16 REQs, 98.3 s, -ETIMEDOUT)", took)
}
