//go:build interop

package interop

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/softnic/softnic/wire"
)

// The bed's self-check: a RoCEv2 UD endpoint made of nothing but package
// wire plays ibv_ud_pingpong's client against rxe in the guest. It needs no
// softnic tool, so it proves the bed (namespace, bridge, tap, guest, GIDs,
// capture) and softnic's packet building and ICRC against the kernel, which
// drops every packet whose ICRC is wrong. It is host-ud-peer.py of the
// rxe-peer harness, in Go.

const (
	// udPingpongQKey is the Q_Key ibv_ud_pingpong uses.
	udPingpongQKey = 0x11111111
	// udpNoCheck6Rx is Linux's UDP_NO_CHECK6_RX socket option.
	udpNoCheck6Rx = 102
)

// udPeer runs iters round trips of size-byte UD SENDs from host to guest,
// where ibv_ud_pingpong listens for the out-of-band exchange on oob.
func udPeer(ctx context.Context, ns string, host, guest netip.Addr, oob netip.AddrPort, iters, size int, log io.Writer) error {
	qpn := uint32(rand.IntN(0xFFFFF-0x100) + 0x100)
	psn := wire.PSN(rand.Uint32() & 0xFFFFFF)
	sport := wire.RxeSrcPort(qpn)
	var conn net.Conn
	var rx, tx *net.UDPConn
	err := inNetns(ns, func() error {
		var err error
		if rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(host, wire.UDPPort))); err != nil {
			return err
		}
		if tx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(host, sport))); err != nil {
			return err
		}
		d := net.Dialer{Timeout: 10 * time.Second}
		conn, err = d.DialContext(ctx, "tcp", oob.String())
		return err
	})
	for _, c := range []io.Closer{rx, tx, conn} {
		if c != nil {
			defer c.Close()
		}
	}
	if err != nil {
		return err
	}
	if host.Is6() {
		// rxe sends IPv6 datagrams with UDP checksum 0 (the ICRC covers
		// them), which Linux drops unless told otherwise
		if err := setsockopt(rx, syscall.IPPROTO_UDP, udpNoCheck6Rx, 1); err != nil {
			return err
		}
	}
	if host.Is4() {
		// DF like rxe; Linux then gives an unconnected socket's datagrams IP
		// identification 0, which the ICRC covers
		if err := setsockopt(tx, syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DO); err != nil {
			return err
		}
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	rx.SetDeadline(deadline)

	// the pingpong exchange: "LID:QPN:PSN:GID" and a NUL each way, then "done"
	gid := host.As16()
	msg := fmt.Sprintf("%04x:%06x:%06x:%s\x00", 0, qpn, uint32(psn), hex.EncodeToString(gid[:]))
	if _, err := io.WriteString(conn, msg); err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	if _, err := io.WriteString(conn, "done\x00"); err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	var lid, rqpn, rpsn uint32
	var rgid string
	if _, err := fmt.Sscanf(strings.TrimRight(string(buf), "\x00"), "%x:%x:%x:%s", &lid, &rqpn, &rpsn, &rgid); err != nil {
		return fmt.Errorf("exchange: server sent %q: %w", buf, err)
	}
	fmt.Fprintf(log, "local  QPN 0x%06x PSN 0x%06x GID %v sport %d\nremote QPN 0x%06x GID %s\n", qpn, uint32(psn), host, sport, rqpn, rgid)
	time.Sleep(300 * time.Millisecond) // the server posts its receives around the exchange

	e := wire.Encap{Src: host, Dst: guest, SrcPort: sport, DstPort: wire.UDPPort, HopLimit: 64}
	if host.Is4() {
		e.FragOff = wire.IPv4DF
	}
	pkt := make([]byte, 9000) // the bed's largest MTU
	rbuf := make([]byte, 9000)
	payload := make([]byte, size)
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(guest, wire.UDPPort))
	for i := range iters {
		for j := range payload {
			payload[j] = byte(i + j)
		}
		h := wire.Headers{
			BTH:  wire.BTHFields{Opcode: wire.UDSendOnly, PKey: 0xFFFF, DestQP: rqpn, PSN: psn.Add(uint32(i))},
			DETH: wire.DETHFields{QKey: udPingpongQKey, SrcQP: qpn},
		}
		n, err := wire.Build(pkt, &e, &h, payload)
		if err != nil {
			return err
		}
		if _, err := tx.WriteToUDP(pkt[:n], dst); err != nil {
			return err
		}
		if err := udPeerReply(rx, rbuf, guest, host, qpn, rqpn, size); err != nil {
			return fmt.Errorf("round trip %d of %d: %w", i+1, iters, err)
		}
	}
	fmt.Fprintf(log, "%d/%d round trips\n", iters, iters)
	return nil
}

// udPeerReply reads the server's answer and checks its headers (and, for
// IPv6, whose header a UDP socket does not hide, its ICRC).
func udPeerReply(rx *net.UDPConn, buf []byte, from, to netip.Addr, qpn, rqpn uint32, size int) error {
	for {
		n, src, err := rx.ReadFromUDPAddrPort(buf)
		if err != nil {
			return fmt.Errorf("no reply (rxe drops packets whose ICRC is wrong): %w", err)
		}
		if src.Addr().Unmap() != from {
			continue
		}
		var p wire.Packet
		if err := wire.Parse(buf[:n], &p); err != nil {
			return fmt.Errorf("reply does not parse: %w", err)
		}
		if p.Opcode != wire.UDSendOnly || p.DestQP() != qpn || p.DETH().SrcQP() != rqpn || p.DETH().QKey() != udPingpongQKey || len(p.Payload) != size {
			return fmt.Errorf("reply: got %v to QP 0x%x from QP 0x%x Q_Key 0x%x, %d bytes; want UD_SEND_ONLY to 0x%x from 0x%x Q_Key 0x%x, %d bytes",
				p.Opcode, p.DestQP(), p.DETH().SrcQP(), p.DETH().QKey(), len(p.Payload), qpn, rqpn, udPingpongQKey, size)
		}
		if from.Is6() {
			e := wire.Encap{Src: from, Dst: to, SrcPort: src.Port(), DstPort: wire.UDPPort}
			if err := wire.CheckICRC(&e, buf[:n]); err != nil {
				return fmt.Errorf("reply: %w", err)
			}
		}
		return nil
	}
}

func setsockopt(c *net.UDPConn, level, opt, value int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), level, opt, value) }); err != nil {
		return err
	}
	return serr
}
