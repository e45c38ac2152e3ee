package wire

import "fmt"

// Tag matching (rdma-core Documentation/tag_matching.md, libibverbs
// tm_types.h): tag-matching messages are ordinary RC SENDs whose payload
// starts with a 16-byte Tag Matching Header; a rendezvous request adds a
// 16-byte Rendezvous Header and optional user data after it. Nothing in
// the BTH marks them: only a tag-matching SRQ reads the headers.

// TMOp is the TMH's operation (enum ibv_tmh_op).
type TMOp uint8

const (
	TMNoTag TMOp = 0 // IBV_TMH_NO_TAG: an ordinary message, not matched
	TMRndv  TMOp = 1 // IBV_TMH_RNDV: a rendezvous request (TMH, RVH, user data)
	TMFin   TMOp = 2 // IBV_TMH_FIN: a rendezvous is done
	TMEager TMOp = 3 // IBV_TMH_EAGER: an eager message (TMH, payload)
)

func (o TMOp) String() string {
	switch o {
	case TMNoTag:
		return "NO_TAG"
	case TMRndv:
		return "RNDV"
	case TMFin:
		return "FIN"
	case TMEager:
		return "EAGER"
	}
	return fmt.Sprintf("TMOp(%d)", uint8(o))
}

// TMHLen and RVHLen are the sizes of the two headers (struct ibv_tmh,
// struct ibv_rvh).
const (
	TMHLen = 16
	RVHLen = 16
)

// TMH is a Tag Matching Header (struct ibv_tmh): u8 opcode, 3 reserved
// bytes, be32 app_ctx, be64 tag.
type TMH []byte

// AsTMH returns the TMH at the start of b (a SEND's payload).
func AsTMH(b []byte) (TMH, error) {
	if len(b) < TMHLen {
		return nil, fmt.Errorf("%w: TMH needs %d bytes, have %d", ErrTruncated, TMHLen, len(b))
	}
	return TMH(b[:TMHLen]), nil
}

func (h TMH) Op() TMOp         { return TMOp(h[0]) }
func (h TMH) Reserved() []byte { return h[1:4] }
func (h TMH) AppCtx() uint32   { return be.Uint32(h[4:]) }
func (h TMH) Tag() uint64      { return be.Uint64(h[8:]) }

// PutTMH writes a TMH (reserved bytes zero) at the start of b.
func PutTMH(b []byte, op TMOp, appCtx uint32, tag uint64) {
	_ = b[TMHLen-1]
	b[0], b[1], b[2], b[3] = byte(op), 0, 0, 0
	be.PutUint32(b[4:], appCtx)
	be.PutUint64(b[8:], tag)
}

// RVH is a Rendezvous Header (struct ibv_rvh): be64 va, be32 rkey, be32
// len — where the sender's data is, for the receiver's RDMA READ.
type RVH []byte

// AsRVH returns the RVH at the start of b (a RNDV payload after its TMH).
func AsRVH(b []byte) (RVH, error) {
	if len(b) < RVHLen {
		return nil, fmt.Errorf("%w: RVH needs %d bytes, have %d", ErrTruncated, RVHLen, len(b))
	}
	return RVH(b[:RVHLen]), nil
}

func (h RVH) VA() uint64   { return be.Uint64(h[0:]) }
func (h RVH) RKey() uint32 { return be.Uint32(h[8:]) }
func (h RVH) Len() uint32  { return be.Uint32(h[12:]) }

// PutRVH writes an RVH at the start of b.
func PutRVH(b []byte, va uint64, rkey, length uint32) {
	_ = b[RVHLen-1]
	be.PutUint64(b[0:], va)
	be.PutUint32(b[8:], rkey)
	be.PutUint32(b[12:], length)
}

// TMMessage is a tag-matching message's headers, as ParseTM found them at
// the start of a SEND's payload.
type TMMessage struct {
	TMH TMH
	RVH RVH // RNDV only
	// UserHdr is a RNDV request's user data after the RVH (may be empty);
	// Data is an EAGER or NO_TAG message's payload after the TMH.
	UserHdr []byte
	Data    []byte
}

// ParseTM splits msg, the whole payload of a SEND, into its tag-matching
// headers. A message too short for its headers, or with an operation
// that is not one of TMOp's, is an error (the NIC treats such a message
// as one without a tag: it is unexpected, delivered whole).
func ParseTM(msg []byte) (TMMessage, error) {
	h, err := AsTMH(msg)
	if err != nil {
		return TMMessage{}, err
	}
	m := TMMessage{TMH: h}
	switch h.Op() {
	case TMNoTag, TMEager:
		m.Data = msg[TMHLen:]
	case TMRndv:
		r, err := AsRVH(msg[TMHLen:])
		if err != nil {
			return TMMessage{}, err
		}
		m.RVH, m.UserHdr = r, msg[TMHLen+RVHLen:]
	case TMFin:
	default:
		return TMMessage{}, fmt.Errorf("%w: TMH opcode %d", ErrMalformed, h.Op())
	}
	return m, nil
}
