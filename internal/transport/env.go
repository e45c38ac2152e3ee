package transport

import (
	"net/netip"
	"sync/atomic"
	"syscall"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// RouteHopLimit is the IP TTL / hop limit of everything softnic sends.
// Linux's RoCE stack resolves an address vector through the route and
// replaces the GRH hop limit the application asked for with the route's
// (ib_resolve_eth_dmac → rdma_addr_find_l2_eth_by_grh), so rxe's packets
// leave with TTL 64 whatever ibv_rc_pingpong (1) or perftest (255) set
// (rxe-interop-facts.md §3). softnic does the same.
const RouteHopLimit = 64

// RouteEncap returns the IP/UDP header of a packet from the NIC's address
// local along the global route g to UDP port dstPort (rxe_net.c
// prepare4/prepare6): g's traffic class, RouteHopLimit, DF on IPv4, and
// both addresses in their 4-byte form when the destination is IPv4. The
// source port, and the flow label of IPv6, are the transport's to set:
// they differ between connected QPs and UD.
func RouteEncap(local netip.Addr, g *ibv.GlobalRoute, dstPort uint16) wire.Encap {
	e := wire.Encap{
		Src:          local,
		Dst:          g.DGID,
		DstPort:      dstPort,
		TrafficClass: g.TrafficClass,
		HopLimit:     RouteHopLimit,
		FragOff:      wire.IPv4DF,
	}
	if e.Dst.Unmap().Is4() {
		e.Src, e.Dst = e.Src.Unmap(), e.Dst.Unmap()
	}
	return e
}

// Output is where a transport puts the packets it builds: a batch owned by
// the goroutine running the transport, flushed to the link when full and
// at the end of each processing pass (STYLE.md 8, 12).
type Output interface {
	// Buf returns the buffer to build the next packet in; it has room for
	// the largest datagram.
	Buf() []byte
	// Send queues Buf()[:n], whose ICRC was computed for e, for transmission.
	Send(n int, e *wire.Encap)
}

// SplitOutput is an Output whose link can send a packet's payload from
// where it lies (link.Datagram.Payload): the kernel then copies it
// straight from the application's memory region, and the NIC does not
// copy it into the packet first. The engine's Output is one.
type SplitOutput interface {
	// SendsSplit reports whether SendSplit may be used.
	SendsSplit() bool
	// SendSplit queues the datagram Buf()[:split], then payload, then
	// Buf()[split:n], whose ICRC was computed for e (wire.FinishSplit).
	// payload must stay as it is until the datagram is written: a
	// transport passes only memory whose WQE cannot complete before the
	// packet is acknowledged (RC), so that the application cannot reuse
	// it under the send.
	SendSplit(n, split int, payload []byte, e *wire.Encap)
}

// Flusher is an Output that can write what it holds at once and say
// which datagrams the link could not send. The engine's Output is one;
// the UD and UC transports use it (RC recovers a packet lost on send like
// one lost on the wire, and needs no result). The Output counts sent_pkts
// and the bytes sent, for the datagrams the link took; the transports do
// not.
type Flusher interface {
	// Flush writes every queued datagram to the link and returns the
	// errno of each datagram queued with Send since the current Process
	// call began, in order: 0 for a datagram the link took. The slice is
	// valid until the next Send.
	Flush() []syscall.Errno
}

// Unroutable reports whether a link's send error e means the NIC cannot
// reach the destination at all: no route (ENETUNREACH; EHOSTUNREACH from
// an unreachable route; EACCES from a prohibit route), the interface down
// (ENETDOWN) or the link closed under the NIC (EBADF), or an address the
// link cannot send to (EAFNOSUPPORT, EDESTADDRREQ). rxe meets these
// before it sends, when it resolves the route (rxe_net.c rxe_find_route
// fails, prepare4/prepare6 return -EHOSTUNREACH; it looks up with its
// netdev's index, which finds no route while the netdev is down) and
// fails the WQE with IB_WC_LOC_QP_OP_ERR (rxe_req.c rxe_requester,
// finish_packet's error); every other error comes in rxe from
// ip_local_out, after the packet was built, and rxe_send returns it as
// -EAGAIN: the requester rolls the WQE back and sends the packet again.
func Unroutable(e syscall.Errno) bool {
	switch e {
	case syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.EACCES, syscall.EAFNOSUPPORT, syscall.EDESTADDRREQ,
		syscall.ENETDOWN, syscall.EBADF:
		return true
	}
	return false
}

// CQ receives a QP's completions.
type CQ interface {
	// Push adds wc; solicited marks a completion that satisfies a
	// solicited-only notification request. It returns false when the CQ
	// overflowed (the QP then moves to the error state).
	Push(wc *ibv.WorkCompletion, solicited bool) bool
}

// Counters are a NIC's protocol counters, named after rxe's hw_counters
// (rxe_hw_counters.h), plus softnic's own. The hot path only increments
// them; a Prometheus collector reads them.
type Counters struct {
	SentPkts            atomic.Uint64 // sent_pkts
	RcvdPkts            atomic.Uint64 // rcvd_pkts
	SentBytes           atomic.Uint64
	RcvdBytes           atomic.Uint64
	DuplicateRequest    atomic.Uint64 // duplicate_request
	OutOfSequence       atomic.Uint64 // out_of_sequence
	RcvdRNRErr          atomic.Uint64 // rcvd_rnr_err
	SendRNRErr          atomic.Uint64 // send_rnr_err
	RcvdSeqErr          atomic.Uint64 // rcvd_seq_err
	AckDeferred         atomic.Uint64 // ack_deferred
	AnswerJoined        atomic.Uint64 // read batches whose ACKs waited for the application's answer and left with it
	AnswerMissed        atomic.Uint64 // read batches whose ACKs waited for an answer that did not come
	PollLeaseExpired    atomic.Uint64 // times the receive goroutine took the link back from polls that stopped without a block
	PollLeaseStepOffs   atomic.Uint64 // times the receive goroutine stepped off the link for a busy-polling application (link.SetReadYield)
	RxTurnTimeout       atomic.Uint64 // read batches delivered before an earlier one, after waiting maxTurnWait (100 ms)
	RetryExceededErr    atomic.Uint64 // retry_exceeded_err
	RetryRNRExceededErr atomic.Uint64 // retry_rnr_exceeded_err
	CompleterRetryErr   atomic.Uint64 // completer_retry_err
	SendErr             atomic.Uint64 // send_err
	LinkDowned          atomic.Uint64 // link_downed
	RDMASends           atomic.Uint64 // rdma_sends
	RDMARecvs           atomic.Uint64 // rdma_recvs
	ICRCErr             atomic.Uint64 // bad ICRC, dropped
	ICRCUnverified      atomic.Uint64 // accepted without an ICRC check (link hid the IP header)
	DropMalformed       atomic.Uint64 // failed wire.Parse
	DropNoQP            atomic.Uint64 // no such QP, or wrong class for the QP
	DropState           atomic.Uint64 // QP not in a state that accepts the packet
	DropAddr            atomic.Uint64 // source/destination do not match the QP's path
	DropPKey            atomic.Uint64 // bad_pkey_cntr
	DropQKey            atomic.Uint64 // qkey_viol_cntr
	DropQueueFull       atomic.Uint64 // QP inbox full
	DropLength          atomic.Uint64 // UC/UD length errors, silently dropped
	DropUCMessage       atomic.Uint64 // UC packets dropped until the next FIRST/ONLY
	DropNoRecvWQE       atomic.Uint64 // UD datagrams dropped for want of a receive WQE
	DropResponse        atomic.Uint64 // unexpected or stale responses
	RemoteAccessErr     atomic.Uint64 // NAKs sent for remote access errors
	InvalidRequestErr   atomic.Uint64 // NAKs sent for invalid requests
	RemoteOpErr         atomic.Uint64 // NAKs sent for remote operational errors
	Retransmits         atomic.Uint64 // go-back-N retries started (each resends from the oldest unacknowledged PSN)
	Timeouts            atomic.Uint64 // retransmit timer expiries
	Reasked             atomic.Uint64 // requests sent again alone to re-ask responses found lost (READ runs, atomics)
	EarlyRetries        atomic.Uint64 // go-back-N retries started two round trips after the last progress, without spending a retry
	HeldRequests        atomic.Uint64 // requests received beyond the expected PSN and held for the reorder window instead of NAKed at once
	// Congestion control (DCQCN), named as mlx5's counters.
	NPECNMarkedRoCEPackets atomic.Uint64 // np_ecn_marked_roce_packets: CE-marked packets received
	NPCNPSent              atomic.Uint64 // np_cnp_sent: CNPs sent for them
	RPCNPHandled           atomic.Uint64 // rp_cnp_handled: CNPs received that cut a QP's rate
	RPCNPIgnored           atomic.Uint64 // rp_cnp_ignored: CNPs received for a QP without congestion control, dropped
}
