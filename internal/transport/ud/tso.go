package ud

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// UD TSO (IBV_WR_TSO, ibv_wr_send_tso): a work request whose payload is
// cut into pieces of mss bytes, each sent as an ordinary UD SEND_ONLY
// datagram that carries a copy of the WR's header in front of its piece,
// the last piece possibly shorter. It is the verbs form of the IPoIB
// driver's LSO (the kernel's IB_WR_LSO with ib_ud_wr.header, hlen and
// mss; drivers/infiniband/ulp/ipoib/ipoib_ib.c post_send), which mlx5
// offers to user space only on RAW_PACKET QPs (providers/mlx5/qp.c,
// the eth segment's inline header and mss). rxe has no TSO at all.
//
// On the wire nothing is new: each piece is a UD_SEND_ONLY with a DETH
// and a PSN of its own, the pieces taking consecutive PSNs as separate
// sends would, so any UD receiver (rxe included) takes each piece into
// a receive WQE of its own. The sender gets one completion, IBV_WC_TSO,
// for the whole WR once every piece has gone out.
const (
	// MaxTSO is the device's max_tso (struct ibv_tso_caps): the largest
	// payload, header not counted, of one TSO WR: 256 KiB, a power of
	// two as mlx5's (the kernel's mlx5_ib_query_device reports
	// 1 << max_lso_cap) and above the 64 KiB a TCP/IP GSO packet can
	// reach.
	MaxTSO = 256 << 10
	// MaxTSOHeader is the largest max_tso_header a UD QP may ask for:
	// 192 bytes, room for an Ethernet, IPv6 and TCP header with
	// options, as DPDK's mlx4 driver bounds its TSO headers
	// (MLX4_MAX_TSO_HEADER, L2+L3+L4). mlx5 derives its bound from the
	// WQE size instead; softnic fixes one.
	MaxTSOHeader = 192
)

// TSOSupportedQPTs is the device's tso_caps.supported_qpts: UD only.
const TSOSupportedQPTs = 1 << ibv.QPTypeUD

// checkTSO checks a TSO WR of length payload bytes against the QP
// (ibv_wr_post(3) ibv_wr_send_tso; ibv_post_send(3) wr.tso): the QP was
// created with max_tso_header, the header fits it, mss is not 0, a
// piece (header and mss bytes) fits the port MTU (the UD bound, see
// Config.MTU), and the payload is at most MaxTSO. Every refusal wraps
// errno.Invalid (EINVAL).
func (qp *QP) checkTSO(wr *ibv.SendWR, payload uint64) error {
	switch hdr, mtu := len(wr.TSOHeader), qp.cfg.MTU(); {
	case qp.cfg.MaxTSOHeader == 0:
		return fmt.Errorf("%w: TSO on a UD QP created without max_tso_header", errno.Invalid)
	case hdr > qp.cfg.MaxTSOHeader:
		return fmt.Errorf("%w: TSO header of %d bytes, QP max_tso_header %d", errno.Invalid, hdr, qp.cfg.MaxTSOHeader)
	case wr.MSS == 0:
		return fmt.Errorf("%w: TSO with mss 0", errno.Invalid)
	case hdr+int(wr.MSS) > mtu:
		return fmt.Errorf("%w: TSO header %d + mss %d exceeds the port MTU %d", errno.Invalid, hdr, wr.MSS, mtu)
	case payload > MaxTSO:
		return fmt.Errorf("%w: TSO payload of %d bytes, device max_tso %d", errno.Invalid, payload, MaxTSO)
	}
	return nil
}

// tsoPieces returns how many datagrams a TSO payload of length bytes cut
// at mss takes: one at least, so that a WR with no payload still sends
// its header.
func tsoPieces(length uint64, mss uint16) int {
	if length == 0 {
		return 1
	}
	return int((length + uint64(mss) - 1) / uint64(mss))
}

// piece returns the offset and length in the WQE's payload of its
// datagram k: the whole message for an ordinary SEND, the k-th mss-byte
// piece of a TSO WR.
func (w *sendWQE) piece(k int) (off uint64, n int) {
	if w.opcode != ibv.WRTSO {
		return 0, int(w.length)
	}
	off = uint64(k) * uint64(w.mss)
	return off, int(min(uint64(w.mss), w.length-off))
}
