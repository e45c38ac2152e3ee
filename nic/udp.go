package nic

import (
	"net/netip"
	"sync/atomic"
)

// UDP link: RoCEv2 over a kernel UDP socket (STYLE.md 11).
//
// # Transmit
//
// The link sends from one unconnected UDP socket bound to its address and
// port (4791), with IP_MTU_DISCOVER = IP_PMTUDISC_DO. For an unconnected
// socket with DF set the kernel sends IPv4 identification 0
// (ip_select_ident_segs), and the segments of a UDP GSO send get the
// identifications 0, 1, 2, ... when they are cut (inet_gso_segment), so
// the whole IPv4 header the ICRC covers is known before sending
// (rxe-interop-facts.md §3; TestUDPWireHeaders checks it on a packet
// socket).
//
// Source port. The engine gives each QP a UDP source port in 0xC000-0xFFFF
// (rxe style) and computes the ICRC over it, but a socket bound to 4791
// sends from 4791. rxe never checks the source port it receives (§2.1,
// §3), so sending from the bound port is interoperable; only the ICRC,
// which covers the source port, must follow. The link patches it: a CRC
// is linear, so replacing two header bytes changes the ICRC by a value
// computed from those bytes and the packet length alone (udp_icrc.go,
// about 0.2 µs, against about 1.5 µs for a CRC pass over a 4 KiB packet
// on the machine this was written on). The same patch gives GSO segment i
// its identification i. No engine change is needed, any caller of
// WriteBatch gets a correct ICRC, and WriteBatch reports what went on the
// wire by rewriting each Datagram's Encap (source address and port,
// identification, DF, hop limit). The cost is ECMP entropy: every QP's
// packets share one 5-tuple. A raw-socket transmit mode could keep the
// per-QP ports at the price of GSO and CAP_NET_RAW.
//
// Traffic class and hop limit follow each Datagram's Encap through IP_TOS
// / IP_TTL (IPV6_TCLASS / IPV6_HOPLIMIT) control messages, sent only when
// they differ from the socket's defaults (TOS 0, the route's TTL). Runs of
// datagrams to one destination with one size (the last may be shorter)
// go out as one UDP GSO send (UDP_SEGMENT, at most 64 segments and 64 KiB);
// everything is batched with sendmmsg. If the kernel refuses GSO (EIO: no
// checksum offload on the route), the link turns GSO off and resends
// plainly.
//
// # Receive
//
// recvmmsg fills a batch; with UDP_GRO the kernel may hand over several
// coalesced datagrams in one buffer with their segment size, which the
// link splits (copying each into the caller's buffer; without GRO the
// kernel writes straight into the caller's buffers). Each Datagram's
// Encap comes from the socket: source address and port from the sender's
// address, destination from IP_PKTINFO / IPV6_PKTINFO, traffic class from
// IP_RECVTOS / IPV6_RECVTCLASS, TTL / hop limit from IP_RECVTTL /
// IPV6_RECVHOPLIMIT. The UDP checksum and IPv6 flow label are masked by
// the ICRC and left 0. IPv6 sockets set UDP_NO_CHECK6_RX so that rxe's
// zero-checksum IPv6 datagrams are accepted.
//
// IPv6: every field the ICRC covers is visible, so the engine checks the
// ICRC fully.
//
// IPv4: a UDP socket cannot see the identification field, which the ICRC
// covers, nor the DF bit. The choices were:
//
//   - a packet socket (AF_PACKET, BPF filter on address and port) next to
//     the UDP socket: sees real headers, but needs CAP_NET_RAW, receives
//     every datagram a second time (the UDP socket must still be bound and
//     drained or filtered), and still cannot tell the identifications of
//     a GRO-coalesced packet's segments (GRO accepts both fixed and
//     incrementing identifications and does not say which);
//   - a raw IPPROTO_UDP socket: a copy of every UDP packet of the host;
//   - assuming identification 0 and DF: right for softnic senders without
//     GSO, wrong for GSO segments and for every rxe packet (the kernel
//     hashes rxe's identifications), which would then be dropped;
//   - solving for the identification. The ICRC is linear in the header
//     bits, so from the mismatch between the stored ICRC and the one
//     computed with a guessed identification the engine can compute the
//     only identification that fits, in one multiplication and two table
//     look-ups (solveIPv4ID), and accept the packet if one exists. The
//     ICRC is still computed once, as for IPv6; what is lost is 16 of its
//     32 bits against corruption (a corrupted packet passes with
//     probability 2^-16). DF is assumed set (rxe and softnic always set
//     it).
//
// The default, [IPv4ICRCSolve], is the last: full speed, every sender
// (softnic with or without GSO, rxe) verified, no privileges, and the
// UDP checksum (which softnic senders fill in and the kernel checks)
// still guards softnic-to-softnic traffic. The link guesses
// identification 0, or i for the i-th segment of a GRO batch, which is
// right for softnic senders; the engine's ICRC check corrects it (one line
// in NIC.receive: verifyICRC instead of wire.CheckICRC). The cheap
// alternative, [IPv4ICRCSkip], marks IPv4 datagrams ICRCUnverifiable: the
// engine counts them (ICRCUnverified) and spends no CRC pass on them.
//
// # Costs and limits
//
// No allocation and no goroutine hand-off per packet: the link owns
// preallocated mmsghdr, iovec, address and control-message arrays, one
// set for the reader and one per concurrent writer (kept in a free list).
// golang.org/x/net's ipv4.PacketConn.ReadBatch would allocate a net.IP and
// a *net.UDPAddr per datagram, so the link calls recvmmsg and sendmmsg
// itself through the socket's syscall.RawConn, which keeps Go's poller
// (Close unblocks a reader). With GRO the link holds BatchSize receive
// buffers of 64 KiB. Socket buffers default to 8 MiB (SO_SNDBUFFORCE /
// SO_RCVBUFFORCE when permitted, else capped by net.core.wmem_max /
// rmem_max); rxe-interop-facts.md §3 saw 1-4 % receive loss with the
// default 208 KiB. Datagrams the kernel dropped for want of receive
// buffer are counted (SO_RXQ_OVFL).

// DefaultUDPBatch is the UDP link's default batch size.
const DefaultUDPBatch = 64

// DefaultUDPSocketBuffer is the UDP link's default socket buffer size.
const DefaultUDPSocketBuffer = 8 << 20

// IPv4ICRCMode selects how a UDP link lets the engine check the ICRC of
// IPv4 datagrams, whose identification a UDP socket cannot see.
type IPv4ICRCMode uint8

const (
	// IPv4ICRCSolve guesses the identification and has the engine solve
	// for the right one when the ICRC does not match (16 bits of check
	// left); the default.
	IPv4ICRCSolve IPv4ICRCMode = iota
	// IPv4ICRCSkip marks IPv4 datagrams ICRCUnverifiable: no CRC pass, no
	// check, counted by the engine as ICRCUnverified.
	IPv4ICRCSkip
)

func (m IPv4ICRCMode) String() string {
	switch m {
	case IPv4ICRCSolve:
		return "solve"
	case IPv4ICRCSkip:
		return "skip"
	}
	return "IPv4ICRCMode(?)"
}

// UDPConfig configures ListenUDP.
type UDPConfig struct {
	// Addr is the local address: the NIC's address and GID. IPv4 (or
	// IPv4-mapped) or IPv6, never unspecified or multicast; an IPv6
	// link-local address needs its zone.
	Addr netip.Addr
	// Port is the UDP port to bind, wire.UDPPort (4791) when 0. Tests on
	// one host may bind others; peers must then send to it (nic.Config
	// PeerPort).
	Port uint16
	// BatchSize is the number of datagrams per call worth passing (0:
	// DefaultUDPBatch).
	BatchSize int
	// SocketBuffer is the send and receive socket buffer size in bytes
	// (0: DefaultUDPSocketBuffer).
	SocketBuffer int
	// DisableGSO turns off UDP segmentation offload on send.
	DisableGSO bool
	// DisableGRO turns off UDP GRO on receive.
	DisableGRO bool
	// IPv4ICRC selects the IPv4 receive check (IPv4ICRCSolve by default).
	IPv4ICRC IPv4ICRCMode
}

// UDPStats are a UDP link's counters.
type UDPStats struct {
	TxPackets   uint64 // datagrams the kernel accepted
	TxBytes     uint64 // their UDP payload bytes
	TxGSOSends  uint64 // sends of more than one datagram with UDP GSO
	TxErrors    uint64 // datagrams dropped on a send error (no route, too big, refused)
	TxBadEncap  uint64 // datagrams dropped for an Encap the link cannot send (family, address, port)
	RxPackets   uint64 // datagrams returned by ReadBatch
	RxBytes     uint64 // their UDP payload bytes
	RxGRO       uint64 // receive buffers holding more than one coalesced datagram
	RxTruncated uint64 // datagrams longer than the buffer, dropped
	RxErrors    uint64 // failed receive calls, retried
	// RxKernelDrops is the socket's drop count (SO_RXQ_OVFL): datagrams
	// the kernel discarded because the receive buffer was full.
	RxKernelDrops uint64
}

type udpCounters struct {
	txPackets, txBytes, txGSOSends, txErrors, txBadEncap      atomic.Uint64
	rxPackets, rxBytes, rxGRO, rxTruncated, rxErrors, rxDrops atomic.Uint64
}

func (c *udpCounters) snapshot() UDPStats {
	return UDPStats{
		TxPackets: c.txPackets.Load(), TxBytes: c.txBytes.Load(), TxGSOSends: c.txGSOSends.Load(),
		TxErrors: c.txErrors.Load(), TxBadEncap: c.txBadEncap.Load(),
		RxPackets: c.rxPackets.Load(), RxBytes: c.rxBytes.Load(), RxGRO: c.rxGRO.Load(),
		RxTruncated: c.rxTruncated.Load(), RxErrors: c.rxErrors.Load(), RxKernelDrops: c.rxDrops.Load(),
	}
}
