package verbs

import (
	"fmt"
	"sync"
)

// TD is a thread domain (struct ibv_td, ibv_alloc_td(3)): the
// application's promise that the objects created through a parent domain
// holding it are used by one thread at a time, so that a provider may
// leave out its locks (mlx5 does, for the doorbell and send queue). A
// softnic device keeps its locks whatever the promise, so a TD changes
// nothing but is checked and held like the rest: the promise costs
// nothing to keep, and breaking it is no harm here.
type TD struct {
	d *Device

	mu      sync.Mutex
	dead    bool // guarded by mu
	parents int  // guarded by mu; parent domains holding the TD
}

// AllocTD allocates a thread domain (ibv_alloc_td).
func (d *Device) AllocTD() (*TD, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return &TD{d: d}, nil
}

// Dealloc frees the thread domain (ibv_dealloc_td): EBUSY while a parent
// domain holds it, EINVAL when it already was.
func (td *TD) Dealloc() error {
	if td == nil || td.d == nil {
		return errNil("TD")
	}
	td.mu.Lock()
	defer td.mu.Unlock()
	switch {
	case td.dead:
		return fmt.Errorf("%w: TD already deallocated", EINVAL)
	case td.parents > 0:
		return fmt.Errorf("%w: TD held by %d parent domains", EBUSY, td.parents)
	}
	td.dead = true
	return nil
}

// ParentDomainInitAttr describes a parent domain (struct
// ibv_parent_domain_init_attr).
type ParentDomainInitAttr struct {
	// PD is the protection domain the parent domain protects with (pd):
	// a PD of this device, not itself a parent domain.
	PD *PD
	// TD is the thread domain (td), or nil.
	TD *TD
	// PDContext is pd_context (IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT),
	// returned by PD.Context. The custom allocators of
	// IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS have no counterpart: softnic's
	// queues live in Go memory, never in the application's buffers.
	PDContext any
}

// AllocParentDomain allocates a parent domain (ibv_alloc_parent_domain):
// a *PD usable wherever a PD is (CreateQP, CreateSRQ, CreateWQ, RegMR,
// AllocMW, CreateAH, CreateCQEx's ParentDomain), whose objects are in
// attr.PD's protection domain: its MRs' keys work on attr.PD's QPs and
// the other way round, Handle is attr.PD's. It holds attr.PD and attr.TD:
// their Dealloc is EBUSY until the parent domain's Dealloc, which in turn
// is EBUSY while objects were created through it. A missing PD, a parent
// domain as PD, or a PD or TD of another device is EINVAL.
func (d *Device) AllocParentDomain(attr ParentDomainInitAttr) (*PD, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	pd, td := attr.PD, attr.TD
	switch {
	case !pd.ok():
		return nil, errNil("ParentDomainInitAttr.PD")
	case pd.parent != nil:
		return nil, fmt.Errorf("%w: ParentDomainInitAttr.PD is a parent domain; give its protection domain", EINVAL)
	case td != nil && td.d == nil:
		return nil, errNil("ParentDomainInitAttr.TD")
	}
	if err := d.sameDevice("ParentDomainInitAttr.PD", pd.d); err != nil {
		return nil, err
	}
	if td != nil {
		if err := d.sameDevice("ParentDomainInitAttr.TD", td.d); err != nil {
			return nil, err
		}
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead {
		return nil, fmt.Errorf("%w: PD %d was deallocated", EINVAL, pd.pd.Handle())
	}
	if td != nil {
		td.mu.Lock()
		defer td.mu.Unlock()
		if td.dead {
			return nil, fmt.Errorf("%w: TD was deallocated", EINVAL)
		}
		td.parents++
	}
	pd.parents++
	return &PD{d: d, pd: pd.pd, parent: pd, td: td, context: attr.PDContext}, nil
}

// Context returns a parent domain's pd_context (ParentDomainInitAttr.PDContext);
// nil for a plain PD.
func (pd *PD) Context() any {
	if !pd.ok() {
		return nil
	}
	return pd.context
}

// TD returns a parent domain's thread domain, nil for a plain PD or a
// parent domain without one.
func (pd *PD) TD() *TD {
	if !pd.ok() {
		return nil
	}
	return pd.td
}

// ProtectionDomain returns the PD a parent domain protects with, or pd
// itself for a plain PD.
func (pd *PD) ProtectionDomain() *PD {
	if pd.ok() && pd.parent != nil {
		return pd.parent
	}
	return pd
}

// checkParent refuses anything but a live parent domain of device d.
func (pd *PD) checkParent(d *Device) error {
	switch {
	case !pd.ok():
		return errNil("parent domain")
	case pd.parent == nil:
		return fmt.Errorf("%w: PD %d is not a parent domain (ibv_alloc_parent_domain)", EINVAL, pd.Handle())
	}
	return d.sameDevice("the parent domain", pd.d)
}

// deallocParent frees a parent domain (PD.Dealloc of one): EBUSY while
// objects created through it live (CQs included), then it lets go of its
// PD and TD.
func (pd *PD) deallocParent() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead {
		return fmt.Errorf("%w: parent domain already deallocated", EINVAL)
	}
	if h := pd.d.objs.holders(func(obj any) bool { return pdOf(obj) == pd }); h != "" {
		return fmt.Errorf("%w: parent domain in use by %s", EBUSY, h)
	}
	if pd.cqs > 0 {
		return fmt.Errorf("%w: parent domain in use by %d CQs", EBUSY, pd.cqs)
	}
	pd.dead = true
	p := pd.parent
	p.mu.Lock()
	p.parents--
	p.mu.Unlock()
	if pd.td != nil {
		pd.td.mu.Lock()
		pd.td.parents--
		pd.td.mu.Unlock()
	}
	return nil
}

// pdOf returns the PD an object of the device was created in.
func pdOf(obj any) *PD {
	switch v := obj.(type) {
	case *QP:
		return v.pd
	case *SRQ:
		return v.pd
	case *WQ:
		return v.pd
	case *AH:
		return v.pd
	case *MR:
		return v.pd.Load()
	case *MW:
		return v.pd
	}
	return nil
}
