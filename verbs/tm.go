package verbs

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// SRQInitAttrEx describes a shared receive queue to create with
// CreateSRQEx (struct ibv_srq_init_attr_ex; the PD is the receiver of
// CreateSRQEx).
type SRQInitAttrEx struct {
	SRQInitAttr // MaxWR, MaxSGE, SRQLimit as for CreateSRQ
	// Type is srq_type: ibv.SRQTypeBasic (an SRQ as CreateSRQ makes) or
	// ibv.SRQTypeTM (a tag-matching SRQ) or ibv.SRQTypeXRC (an SRQ of an
	// XRC domain, reached by its Num from XRC_SEND QPs; it needs XRCD and
	// CQ, and no QP attaches to it with QPInitAttr.SRQ).
	Type ibv.SRQType
	// CQ is cq, required for a tag-matching SRQ: its list operations
	// complete there, and so does every receive of the QPs attached to
	// it, whatever their RecvCQ.
	CQ *CQ
	// TM is tm_cap (tag-matching only): MaxNumTags in 1..tm_caps
	// max_num_tags, MaxOps in 1..tm_caps max_ops.
	TM ibv.TMCap
	// XRCD is xrcd (XRC only): the domain whose XRC_RECV QPs may take
	// receives from the SRQ. The SRQ's receives complete on CQ, and the
	// rkeys of requests naming it are checked in pd, the SRQ's PD.
	XRCD *XRCD
}

// CreateSRQEx creates a shared receive queue in pd (ibv_create_srq_ex),
// with CreateSRQ's rules for MaxWR and MaxSGE. A tag-matching SRQ
// (rdma-core Documentation/tag_matching.md, ibv_post_srq_ops(3)) takes
// tagged buffers with PostOps and ordinary buffers, for messages that
// match none of them, with PostRecv; RC QPs attach to it with
// QPInitAttr.SRQ (another QP type is EOPNOTSUPP).
//
// On such an SRQ an incoming SEND whose payload starts with an EAGER TMH
// (wire.PutTMH) that matches a tagged buffer is placed there without its
// TMH and completes as ibv.WCTMRecv with ibv.WCTMMatch|ibv.WCTMDataValid,
// the buffer's RecvWRID, TMTag and TMPriv (app_ctx); a message of several
// packets gives first a WCTMRecv with WCTMMatch alone, then one with
// WCTMDataValid, as mlx5 does. A RNDV request (TMH, RVH, user data) that
// matches starts a rendezvous: the QP RDMA READs the RVH's range into the
// tagged buffer, then SENDs a FIN (a TMH with opcode FIN) back, and the
// buffer completes as WCTMRecv with WCTMMatch|WCTMDataValid once the data
// is there; data larger than the buffer is not read: the request goes
// into the buffer and completes with status ibv.WCTMRndvIncomplete.
//
// Any other message goes whole, headers included, into an ordinary
// buffer: a NO_TAG one (or a FIN) completes as ibv.WCTMNoTag, every other
// one (no match, matching off, a short or malformed TMH) as ibv.WCRecv
// with ibv.WCTMSyncReq and counts as unexpected: tag matching stays off
// until a PostOps with ibv.OpsTMSync reports the number of unexpected
// messages seen. A tagged buffer too small for an EAGER message completes
// as ibv.WCLocLenErr and the QP goes to ERR, as for any receive buffer.
//
// softnic differs from mlx5 in that list operations are done, and their
// completions written, inside PostOps, and in that a rendezvous's READ
// and FIN take two slots of the QP's send queue (never completing on its
// send CQ); with no room, the RNDV request is answered with an RNR NAK.
func (pd *PD) CreateSRQEx(attr SRQInitAttrEx) (*SRQ, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	a := nic.SRQInitAttr{MaxWR: attr.MaxWR, MaxSGE: attr.MaxSGE, SRQLimit: attr.SRQLimit, Type: attr.Type, TM: attr.TM}
	if attr.CQ != nil {
		if !attr.CQ.ok() {
			return nil, errNil("SRQInitAttrEx.CQ")
		}
		if err := pd.d.sameDevice("SRQInitAttrEx.CQ", attr.CQ.d); err != nil {
			return nil, err
		}
		a.CQ = attr.CQ.q
	}
	if attr.XRCD != nil {
		if !attr.XRCD.ok() {
			return nil, errNil("SRQInitAttrEx.XRCD")
		}
		if err := pd.d.sameDevice("SRQInitAttrEx.XRCD", attr.XRCD.d); err != nil {
			return nil, err
		}
		a.XRCD = attr.XRCD.x
	}
	v := &SRQ{pd: pd, cq: attr.CQ}
	a.Context = v
	s, err := pd.d.n.CreateSRQ(pd.pd, a)
	if err != nil {
		return nil, err
	}
	v.s = s
	pd.d.objs.add(v)
	return v, nil
}

// PostOps runs tag list operations on a tag-matching SRQ
// (ibv_post_srq_ops), in order; on error it returns the index of the
// first op not run (bad_wr), the ones before it done. A WRTagAdd writes
// its handle into ops[i].Handle. Signaled ops (ibv.OpsSignaled) complete
// on the SRQ's CQ with their WRID and opcode ibv.WCTMAdd, WCTMDel or
// WCTMSync, flagged ibv.WCTMSyncReq while software's unexpected count
// lags the device's; a WRTagDel of a tag already consumed by a message
// (or deleted) completes, signaled or not, with status ibv.WCTMErr.
//
// Errors, as mlx5_post_srq_ops returns them: ENOMEM for a full tag list
// or more than max_ops ops in one post; EINVAL for more SGEs than tm_caps
// max_sge, an unknown opcode or a handle outside the list (which mlx5
// does not check); EOPNOTSUPP on a basic SRQ.
func (s *SRQ) PostOps(ops []ibv.OpsWR) (bad int, err error) {
	if err := s.live(); err != nil {
		return 0, err
	}
	n, err := s.s.PostOps(ops)
	return n, err
}

// QueryDeviceEx returns the device's extended attributes
// (ibv_query_device_ex): QueryDevice's, the tag-matching capabilities
// (tm_caps: ibv.TMCapRC, max_num_tags, max_ops, max_sge,
// max_rndv_hdr_size) and the TSO capabilities (tso_caps: max_tso and
// supported_qpts, UD only; see QPEx.WrSendTSO), the on-demand paging
// capabilities (odp_caps: every operation of RC, UC and UD, no implicit
// ODP; see PD.AdviseMR), the completion clock (hca_core_clock 1 GHz and a
// 64-bit completion_timestamp_mask; see CQEx.ReadCompletionTS), the CQ
// moderation limits (cq_mod_caps; see CQ.Modify) and max_wq_type_rq; no
// RSS (rss_caps zero: see CreateRWQIndTable).
func (d *Device) QueryDeviceEx() ibv.DeviceAttrEx {
	if !d.ok() {
		return ibv.DeviceAttrEx{}
	}
	attr := d.n.QueryDevice()
	return ibv.DeviceAttrEx{DeviceAttr: attr, TMCaps: nic.TMCaps(), TSOCaps: nic.TSOCaps(),
		ODPCaps: odpCaps, CompletionTimestampMask: ^uint64(0), HCACoreClock: 1_000_000,
		CQModCaps: cqModCaps, MaxWQTypeRQ: uint32(attr.MaxQP)}
}
