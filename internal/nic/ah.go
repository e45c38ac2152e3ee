package nic

import (
	"fmt"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport/ud"
)

// maxAH is the number of address handles a NIC makes (QueryDevice MaxAH,
// rxe's RXE_MAX_AH).
const maxAH = 32767

// AH is an address handle (ibv_ah): a validated address vector of a PD,
// the destination of UD send work requests. It is immutable; a send WR
// copies its address vector when posted, so destroying the handle does
// not affect WRs already posted.
type AH struct {
	n         *NIC
	pd        *mem.PD
	attr      ibv.AHAttr
	destroyed atomic.Bool
}

var _ ibv.AddressHandle = (*AH)(nil)

// CreateAH creates an address handle in pd (ibv_create_ah; rxe
// rxe_ah_chk_attr, rdma_check_ah_attr): RoCE needs a global route to a
// GID of the device's family through port 1, GID index 0.
func (n *NIC) CreateAH(pd *mem.PD, attr *ibv.AHAttr) (*AH, error) {
	switch {
	case n.closed.Load():
		return nil, ErrClosed
	case pd == nil || attr == nil:
		return nil, fmt.Errorf("%w: AH needs a PD and attributes", errno.Invalid)
	}
	if err := ud.CheckAV(attr, n.addr); err != nil {
		return nil, err
	}
	if int(n.ahs.Add(1)) > maxAH {
		n.ahs.Add(-1)
		return nil, fmt.Errorf("%w: %d address handles exist", errno.NoMemory, maxAH)
	}
	pd.Ref()
	return &AH{n: n, pd: pd, attr: *attr}, nil
}

// AddressVector returns the handle's address vector and PD; ok is false
// once the handle is destroyed.
func (ah *AH) AddressVector() (av *ibv.AHAttr, pd uint32, ok bool) {
	return &ah.attr, ah.pd.Handle(), !ah.destroyed.Load()
}

// Attr returns the handle's address vector (rdma_query_ah).
func (ah *AH) Attr() ibv.AHAttr { return ah.attr }

// PD returns the protection domain the handle belongs to.
func (ah *AH) PD() *mem.PD { return ah.pd }

// Destroy destroys the handle (ibv_destroy_ah) and releases its PD.
func (ah *AH) Destroy() error {
	if ah.destroyed.Swap(true) {
		return fmt.Errorf("%w: AH already destroyed", errno.Invalid)
	}
	ah.pd.Unref()
	ah.n.ahs.Add(-1)
	return nil
}
