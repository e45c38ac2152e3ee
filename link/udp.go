package link

import (
	"net/netip"
	"sync/atomic"
	"syscall"
)

// DefaultUDPBatch is the UDP link's default batch size.
const DefaultUDPBatch = 64

// DefaultUDPSocketBuffer is the UDP link's default socket buffer size.
const DefaultUDPSocketBuffer = 8 << 20

// IPv4ICRCMode selects how a UDP link hands over IPv4 datagrams, whose
// identification, covered by the ICRC, a UDP socket cannot see.
type IPv4ICRCMode uint8

const (
	// IPv4ICRCSolve guesses the identification (ICRCGuessedIPv4ID): the
	// receiver's check solves for the right one when the ICRC does not
	// match (16 bits of check left); the default.
	IPv4ICRCSolve IPv4ICRCMode = iota
	// IPv4ICRCSkip marks IPv4 datagrams ICRCUnverifiable: no CRC pass, no
	// check, counted by the engine as ICRCUnverified; their Encap.ID is
	// a guess.
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
	// ECN makes ECT(0) the socket's default ECN codepoint (IP_TOS /
	// IPV6_TCLASS set to wire.ECNECT0): what a NIC running congestion
	// control (DCQCN) sends, marked ECN-capable so that switches mark
	// it CE instead of dropping it. A datagram whose Encap asks another
	// traffic class still gets it, by a control message. The traffic
	// class of every datagram received, its ECN codepoint included, is
	// in its Encap whether ECN is set or not (IP_RECVTOS /
	// IPV6_RECVTCLASS); the kernel's GRO never coalesces datagrams whose
	// traffic classes differ (inet_gro_receive, ipv6_gro_receive), so a
	// coalesced buffer's one control message is every segment's.
	ECN bool
	// Unpolled keeps the socket out of Go's netpoller: a ReadBatch with
	// nothing to read waits in ppoll(2), a blocking system call that
	// holds its thread (and its P until the runtime hands it off), so
	// that a datagram wakes no thread of the process unless a reader
	// waits for it. For a process that runs the engine beside a program
	// which polls the link itself from a thread of its own, with at least
	// two Ps (softnic's libibverbs); with GOMAXPROCS=1 a waiting reader
	// would stall every other goroutine. See udp_unpolled_linux.go.
	Unpolled bool
}

// LinkErrno is a class of errno a link counts its send and receive
// errors by: the causes an operator can act on (a packet too big for the
// route, no route, a firewall, no buffer, an ICMP error reported back),
// and everything else.
type LinkErrno uint8

const (
	ErrnoEMSGSIZE     LinkErrno = iota // larger than the route's MTU with DF set
	ErrnoENETUNREACH                   // no route to the network
	ErrnoEHOSTUNREACH                  // an unreachable route, or no neighbour
	ErrnoEPERM                         // a firewall (netfilter OUTPUT) dropped it
	ErrnoENOBUFS                       // no buffer or queue space
	ErrnoECONNREFUSED                  // an ICMP port unreachable reported back
	ErrnoOther                         // anything else
	NumLinkErrnos                      // the number of classes
)

var linkErrnoNames = [NumLinkErrnos]string{"EMSGSIZE", "ENETUNREACH", "EHOSTUNREACH", "EPERM", "ENOBUFS", "ECONNREFUSED", "other"}

// String returns the errno's name ("EMSGSIZE"), or "other".
func (c LinkErrno) String() string {
	if c < NumLinkErrnos {
		return linkErrnoNames[c]
	}
	return "LinkErrno(?)"
}

// LinkErrnoOf returns the class of e.
func LinkErrnoOf(e syscall.Errno) LinkErrno {
	switch e {
	case syscall.EMSGSIZE:
		return ErrnoEMSGSIZE
	case syscall.ENETUNREACH:
		return ErrnoENETUNREACH
	case syscall.EHOSTUNREACH:
		return ErrnoEHOSTUNREACH
	case syscall.EPERM:
		return ErrnoEPERM
	case syscall.ENOBUFS:
		return ErrnoENOBUFS
	case syscall.ECONNREFUSED:
		return ErrnoECONNREFUSED
	}
	return ErrnoOther
}

// UDPStats are a UDP link's counters.
type UDPStats struct {
	TxPackets  uint64 // datagrams the kernel accepted
	TxBytes    uint64 // their UDP payload bytes
	TxGSOSends uint64 // sends of more than one datagram with UDP GSO
	TxErrors   uint64 // datagrams dropped on a send error (the sum of TxErrnos)
	TxBadEncap uint64 // datagrams dropped for an Encap the link cannot send (family, address, port), or a Payload's Split outside Buf
	// TxGSOFallbacks counts GSO sends the kernel refused with EIO (no
	// checksum offload on the route); their datagrams went out plainly.
	TxGSOFallbacks uint64
	RxPackets      uint64 // datagrams returned by ReadBatch
	RxBytes        uint64 // their UDP payload bytes
	RxGRO          uint64 // receive buffers holding more than one coalesced datagram
	// RxLent counts the datagrams handed over in place, in the link's GRO
	// buffer (Datagram.Loan, after Lend), and RxLentReleased those whose
	// consumer released them: the difference is what is held now.
	RxLent, RxLentReleased uint64
	RxTruncated            uint64 // datagrams longer than the buffer, dropped
	RxErrors               uint64 // failed receive calls, retried (the sum of RxErrnos)
	// RxKernelDrops is the socket's drop count (SO_RXQ_OVFL): datagrams
	// the kernel discarded because the receive buffer was full.
	RxKernelDrops uint64
	// RxMcastDrops counts multicast datagrams dropped because
	// mcastQueueLen of them already waited for a reader.
	RxMcastDrops uint64
	// TxErrnos splits TxErrors by errno: datagrams a failed sendmmsg
	// message dropped (a GSO message drops all its segments).
	TxErrnos [NumLinkErrnos]uint64
	// RxErrnos splits RxErrors by errno: failed recvmmsg calls (a failed
	// call loses no datagram: the kernel keeps them queued).
	RxErrnos [NumLinkErrnos]uint64
}

type udpCounters struct {
	txPackets, txBytes, txGSOSends, txErrors, txBadEncap, txGSOFallbacks    atomic.Uint64
	rxPackets, rxBytes, rxGRO, rxTruncated, rxErrors, rxDrops, rxMcastDrops atomic.Uint64
	rxLent, rxLentReleased                                                  atomic.Uint64
	txErrnos, rxErrnos                                                      [NumLinkErrnos]atomic.Uint64
}

// txError counts n datagrams a send error e dropped.
func (c *udpCounters) txError(e syscall.Errno, n int) {
	c.txErrors.Add(uint64(n))
	c.txErrnos[LinkErrnoOf(e)].Add(uint64(n))
}

// rxError counts a failed receive call.
func (c *udpCounters) rxError(e syscall.Errno) {
	c.rxErrors.Add(1)
	c.rxErrnos[LinkErrnoOf(e)].Add(1)
}

func (c *udpCounters) snapshot() UDPStats {
	s := UDPStats{
		TxPackets: c.txPackets.Load(), TxBytes: c.txBytes.Load(), TxGSOSends: c.txGSOSends.Load(),
		TxErrors: c.txErrors.Load(), TxBadEncap: c.txBadEncap.Load(), TxGSOFallbacks: c.txGSOFallbacks.Load(),
		RxPackets: c.rxPackets.Load(), RxBytes: c.rxBytes.Load(), RxGRO: c.rxGRO.Load(),
		RxTruncated: c.rxTruncated.Load(), RxErrors: c.rxErrors.Load(), RxKernelDrops: c.rxDrops.Load(),
		RxMcastDrops: c.rxMcastDrops.Load(), RxLent: c.rxLent.Load(), RxLentReleased: c.rxLentReleased.Load(),
	}
	for i := range s.TxErrnos {
		s.TxErrnos[i] = c.txErrnos[i].Load()
		s.RxErrnos[i] = c.rxErrnos[i].Load()
	}
	return s
}
