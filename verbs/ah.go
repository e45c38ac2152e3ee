package verbs

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// AH is an address handle (ibv_ah): a checked, immutable address vector of
// a PD, the destination of UD send work requests (ibv.SendWR.AH, an
// ibv.AddressHandle: an *AH, checked when it is created, or a bare
// *ibv.AHAttr for a one-off destination any QP may use, checked when the
// WR is posted). A WR copies the handle's address vector when it is
// posted, so destroying the handle afterwards does not affect it; posting
// with a destroyed handle, or one of another PD than the QP's, completes
// the WR with WCLocQPOpErr and moves the QP to SQE (rxe_get_av finds no
// AH). A handle of another device is refused by PostSend (EINVAL).
type AH struct {
	pd *PD
	ah *nic.AH
}

var _ ibv.AddressHandle = (*AH)(nil)

func (ah *AH) ok() bool { return ah != nil && ah.ah != nil }

// CreateAH creates an address handle (ibv_create_ah). RoCE needs a global
// route: IsGlobal set, GRH.DGID an address of the device address's
// family (an IPv4 address or an IPv4-mapped GID for an IPv4 device),
// GRH.SGIDIndex 0 (the GID table's one entry) and PortNum 1 (0 is taken
// as 1). GRH.TrafficClass becomes the IP TOS and GRH.FlowLabel the IPv6
// flow label (rxe sends 0 there; the ICRC masks it). GRH.HopLimit is kept
// (Attr reports it) but does not reach the wire: every packet leaves with
// the route's hop limit, 64 (nic.RouteHopLimit), as Linux's RoCE
// stack replaces the GRH hop limit with the route's
// (ib_resolve_eth_dmac), so rxe sends TTL 64 whatever the AH says. A multicast DGID sends to that IP multicast group, with
// GRH.HopLimit (no route is resolved for it; 0 keeps 64), to the QPs
// attached to it (QP.AttachMcast; RemoteQPN MulticastQPN). More than
// MaxAH handles is ENOMEM.
func (pd *PD) CreateAH(attr ibv.AHAttr) (*AH, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	ah, err := pd.d.n.CreateAH(pd.pd, &attr)
	if err != nil {
		return nil, err
	}
	h := &AH{pd: pd, ah: ah}
	pd.d.objs.add(h)
	return h, nil
}

// Destroy destroys the handle (ibv_destroy_ah); destroying it again is
// EINVAL.
func (ah *AH) Destroy() error {
	if !ah.ok() {
		return errNil("AH")
	}
	if err := ah.ah.Destroy(); err != nil {
		return err
	}
	ah.pd.d.objs.del(ah)
	return nil
}

// Attr returns the handle's address vector (the kernel's rdma_query_ah).
func (ah *AH) Attr() ibv.AHAttr {
	if !ah.ok() {
		return ibv.AHAttr{}
	}
	return ah.ah.Attr()
}

// PD returns the protection domain the handle belongs to.
func (ah *AH) PD() *PD {
	if !ah.ok() {
		return nil
	}
	return ah.pd
}

// AddressVector implements AddressHandle for the engine: the handle's
// address vector, its PD's handle, and whether it is still alive.
func (ah *AH) AddressVector() (av *ibv.AHAttr, pd uint32, ok bool) {
	if !ah.ok() {
		return nil, 0, false
	}
	return ah.ah.AddressVector()
}

// String describes the handle.
func (ah *AH) String() string {
	if !ah.ok() {
		return "AH(nil)"
	}
	a := ah.ah.Attr()
	return fmt.Sprintf("AH(%v tc=%d hop=%d)", a.GRH.DGID, a.GRH.TrafficClass, a.GRH.HopLimit)
}
