package link_test

import (
	"bytes"
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
)

// mcastEnd is a softnic device on a UDP link with a UD QP in RTS.
type mcastEnd struct {
	link *link.UDPLink
	dev  *verbs.Device
	pd   *verbs.PD
	cq   *verbs.CQ
	qp   *verbs.QP
	buf  []byte
	mr   *verbs.MR
}

// newMcastEnd opens a UDP link on addr (port 4791) and a device with a UD
// QP of Q_Key qkey on it; call it inside the test's namespace.
func newMcastEnd(t *testing.T, addr string, qkey uint32) (*mcastEnd, error) {
	l, err := link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr(addr)})
	if err != nil {
		return nil, err
	}
	e := &mcastEnd{link: l, buf: make([]byte, 1<<16)}
	if e.dev, err = verbs.Open(verbs.Config{Link: l, Name: "mc-" + addr}); err != nil {
		l.Close()
		return nil, err
	}
	t.Cleanup(func() { e.dev.Close() })
	if e.pd, err = e.dev.AllocPD(); err != nil {
		return nil, err
	}
	if e.cq, err = e.dev.CreateCQ(64, nil); err != nil {
		return nil, err
	}
	if e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite); err != nil {
		return nil, err
	}
	if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	for _, m := range []struct {
		a    ibv.QPAttr
		mask ibv.AttrMask
	}{
		{ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, QKey: qkey}, ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrQKey},
		{ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState},
		{ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState | ibv.QPAttrSQPSN},
	} {
		if err := e.qp.Modify(&m.a, m.mask); err != nil {
			return nil, err
		}
	}
	for i := range 8 {
		if _, err := e.qp.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{e.mr.SGE(i*1024, 1024)}}); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// waitCQ waits up to 5 s for n completions on cq.
func waitCQ(t *testing.T, cq *verbs.CQ, n int) []ibv.WorkCompletion {
	t.Helper()
	var got []ibv.WorkCompletion
	buf := make([]ibv.WorkCompletion, 8)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < n {
		k := cq.Poll(buf)
		got = append(got, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d completions, want %d: %+v", len(got), n, got)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return got
}

// TestUDPMulticast: in a namespace whose loopback takes multicast, two
// softnic devices attach UD QPs to a group and a third sends to it over
// real UDP: both receive every datagram, with the group in the GRH and
// the ICRC checked; after one detaches, only the other receives. Over
// IPv4 (127.0.0.1-3 on lo, 239.1.2.3) and IPv6 (fd00::1-3 on a veth,
// ff0e::1:2:3). Root only.
func TestUDPMulticast(t *testing.T) {
	netnstest.Require(t)
	ns := netnstest.New(t, fmt.Sprintf("mc-%d", os.Getpid()))
	ns.IP(t, "link", "set", "lo", "multicast", "on")
	ns.IP(t, "route", "add", "224.0.0.0/4", "dev", "lo")
	// IPv6 has no multicast over lo (the kernel turns a non-local route
	// through a loopback device into a reject route, fib6_nh_init): the
	// IPv6 devices sit on one end of a veth pair of the namespace, whose
	// multicast route the kernel adds, and reach each other through the
	// sender's own loopback of multicast (IPV6_MULTICAST_LOOP).
	ns.IP(t, "link", "add", "mc0", "type", "veth", "peer", "name", "mc1")
	ns.IP(t, "link", "set", "mc1", "up")
	ns.IP(t, "link", "set", "mc0", "up")
	for _, a := range []string{"fd00::1/64", "fd00::2/64", "fd00::3/64"} {
		ns.AddAddr(t, "mc0", a)
	}
	for _, c := range []struct {
		name  string
		addrs [3]string
		group string
	}{
		{"IPv4", [3]string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, "239.1.2.3"},
		{"IPv6", [3]string{"fd00::1", "fd00::2", "fd00::3"}, "ff0e::1:2:3"},
	} {
		t.Run(c.name, func(t *testing.T) { mcastRound(t, ns, ns, c.addrs, c.group) })
	}
}

// TestUDPMulticastTwoHosts is TestUDPMulticast across a veth pair between
// two namespaces, as between two hosts: the sender in one, the two
// receivers in the other, over IPv4 and IPv6. The multicast leaves by the
// interface holding the sender's address (IP_MULTICAST_IF) with no route
// for it. Root only.
func TestUDPMulticastTwoHosts(t *testing.T) {
	netnstest.Require(t)
	a := netnstest.New(t, fmt.Sprintf("mc2-%d-a", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("mc2-%d-b", os.Getpid()))
	netnstest.Veth(t, a, "mca", "10.78.0.1/24", b, "mcb", "10.78.0.2/24", 1500)
	b.AddAddr(t, "mcb", "10.78.0.3/24")
	a.AddAddr(t, "mca", "fd00:78::1/64")
	b.AddAddr(t, "mcb", "fd00:78::2/64")
	b.AddAddr(t, "mcb", "fd00:78::3/64")
	t.Run("IPv4", func(t *testing.T) {
		mcastRound(t, a, b, [3]string{"10.78.0.1", "10.78.0.2", "10.78.0.3"}, "239.1.2.4")
	})
	t.Run("IPv6", func(t *testing.T) {
		mcastRound(t, a, b, [3]string{"fd00:78::1", "fd00:78::2", "fd00:78::3"}, "ff0e::1:2:4")
	})
}

// mcastRound runs the multicast exchange: a device at addrs[0] in sns
// sends to group, devices at addrs[1] and addrs[2] in rns are attached to
// it; both receive every datagram (the group in the GRH, the AH's hop
// limit, the ICRC checked), and after one detaches only the other.
func mcastRound(t *testing.T, sns, rns *netnstest.NS, addrs [3]string, group string) {
	var ends [3]*mcastEnd
	gid := verbs.GIDFromAddr(netip.MustParseAddr(group))
	err := sns.Do(func() error {
		e, err := newMcastEnd(t, addrs[0], 0x5151)
		ends[0] = e
		return err
	})
	if err == nil {
		err = rns.Do(func() error {
			for i, a := range addrs[1:] {
				e, err := newMcastEnd(t, a, 0x5151)
				if err != nil {
					return fmt.Errorf("%s: %w", a, err)
				}
				ends[i+1] = e
				// Attach inside the namespace: the group's socket is
				// made there.
				if err := e.qp.AttachMcast(gid, 0); err != nil {
					return fmt.Errorf("attach: %w", err)
				}
			}
			return nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	s := ends[0]
	ah, err := s.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr(group), HopLimit: 4}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(k int) {
		t.Helper()
		for i := range 300 {
			s.buf[i] = byte(i*5 + k)
		}
		if _, err := s.qp.PostSend(ibv.SendWR{WRID: uint64(k), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{s.mr.SGE(0, 300)}, AH: ah, RemoteQPN: verbs.MulticastQPN, RemoteQKey: 0x5151}); err != nil {
			t.Fatal(err)
		}
		if w := waitCQ(t, s.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send: %+v", w)
		}
	}
	check := func(k int, r *mcastEnd) {
		t.Helper()
		w := waitCQ(t, r.cq, 1)[0]
		if w.Status != ibv.WCSuccess || w.SrcQP != s.qp.QPN() || w.ByteLen != verbs.GRHLen+300 {
			t.Fatalf("%v: %+v", r.dev.Addr(), w)
		}
		b := r.buf[int(w.WRID)*1024:]
		g, err := verbs.ParseGRH(b[:verbs.GRHLen])
		if err != nil || g.Src != s.dev.Addr() || g.Dst != netip.MustParseAddr(group) || g.HopLimit != 4 {
			t.Fatalf("%v: GRH %+v, %v", r.dev.Addr(), g, err)
		}
		if !bytes.Equal(b[verbs.GRHLen:verbs.GRHLen+300], s.buf[:300]) {
			t.Fatalf("%v: payload differs", r.dev.Addr())
		}
	}
	for k := range 3 {
		send(k)
		check(k, ends[1])
		check(k, ends[2])
	}
	if err := ends[1].qp.DetachMcast(gid, 0); err != nil {
		t.Fatal(err)
	}
	send(3)
	check(3, ends[2])
	time.Sleep(50 * time.Millisecond)
	if n := ends[1].cq.Poll(make([]ibv.WorkCompletion, 4)); n != 0 {
		t.Fatalf("a detached device received %d", n)
	}
	for _, e := range ends {
		if c := e.dev.Counters(); c.ICRCErr != 0 {
			t.Fatalf("%v: ICRC errors %d", e.dev.Addr(), c.ICRCErr)
		}
	}
	if st := ends[2].link.Stats(); st.RxMcastDrops != 0 {
		t.Fatalf("multicast queue drops %d", st.RxMcastDrops)
	}
}

// TestUDPJoinGroupErrors: a unicast address, another family, a group
// joined twice and one never joined are refused with the errno the
// kernel would give. Needs only a loopback socket.
func TestUDPJoinGroupErrors(t *testing.T) {
	netnstest.Require(t)
	ns := netnstest.New(t, fmt.Sprintf("mcerr-%d", os.Getpid()))
	ns.IP(t, "link", "set", "lo", "multicast", "on")
	ns.IP(t, "route", "add", "224.0.0.0/4", "dev", "lo")
	err := ns.Do(func() error {
		l, err := link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("127.0.0.1")})
		if err != nil {
			return err
		}
		defer l.Close()
		g := netip.MustParseAddr("239.9.9.9")
		for _, c := range []struct {
			err  error
			do   func() error
			what string
		}{
			{syscall.EINVAL, func() error { return l.JoinGroup(netip.MustParseAddr("10.0.0.1")) }, "unicast"},
			{syscall.EINVAL, func() error { return l.JoinGroup(netip.MustParseAddr("ff0e::1")) }, "IPv6 group"},
			{nil, func() error { return l.JoinGroup(g) }, "join"},
			{syscall.EADDRINUSE, func() error { return l.JoinGroup(g) }, "join twice"},
			{nil, func() error { return l.LeaveGroup(g) }, "leave"},
			{syscall.EADDRNOTAVAIL, func() error { return l.LeaveGroup(g) }, "leave twice"},
		} {
			if err := c.do(); !errors.Is(err, c.err) && (c.err != nil || err != nil) {
				return fmt.Errorf("%s: %v, want %v", c.what, err, c.err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
