package verbs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// objects is the set of a device's live QPs, SRQs, WQs, AHs, MRs and MWs,
// kept so that EBUSY can say what holds an object: "CQ in use by 2 QPs
// (QPN 0x11, 0x12)". It belongs to its Device (no global registry: a
// closed device is garbage).
type objects struct {
	mu  sync.Mutex
	set map[any]struct{} // guarded by mu
}

func (o *objects) add(obj any) {
	o.mu.Lock()
	if o.set == nil {
		o.set = make(map[any]struct{})
	}
	o.set[obj] = struct{}{}
	o.mu.Unlock()
}

func (o *objects) del(obj any) {
	o.mu.Lock()
	delete(o.set, obj)
	o.mu.Unlock()
}

// holders describes the live objects for which holds returns true, by
// kind in a fixed order with their numbers: "2 QPs (QPN 0x11, 0x12), 1
// MR (lkey 0x1234)". It returns "" when there are none.
func (o *objects) holders(holds func(obj any) bool) string {
	o.mu.Lock()
	var held []any
	for obj := range o.set {
		if holds(obj) {
			held = append(held, obj)
		}
	}
	o.mu.Unlock()
	kinds := []struct {
		one, many, id string
		ids           []uint32
	}{
		{"QP", "QPs", "QPN", nil}, {"SRQ", "SRQs", "", nil}, {"WQ", "WQs", "WQ", nil},
		{"AH", "AHs", "", nil}, {"MR", "MRs", "lkey", nil}, {"MW", "MWs", "rkey", nil},
	}
	for _, obj := range held {
		switch v := obj.(type) {
		case *QP:
			kinds[0].ids = append(kinds[0].ids, v.QPN())
		case *SRQ:
			kinds[1].ids = append(kinds[1].ids, 0)
		case *WQ:
			kinds[2].ids = append(kinds[2].ids, v.Num())
		case *AH:
			kinds[3].ids = append(kinds[3].ids, 0)
		case *MR:
			kinds[4].ids = append(kinds[4].ids, v.LKey())
		case *MW:
			kinds[5].ids = append(kinds[5].ids, v.RKey())
		}
	}
	var parts []string
	for _, k := range kinds {
		if len(k.ids) == 0 {
			continue
		}
		name := k.many
		if len(k.ids) == 1 {
			name = k.one
		}
		s := fmt.Sprintf("%d %s", len(k.ids), name)
		if k.id != "" {
			slices.Sort(k.ids)
			ids := make([]string, len(k.ids))
			for i, id := range k.ids {
				ids[i] = fmt.Sprintf("%#x", id)
			}
			s += fmt.Sprintf(" (%s %s)", k.id, strings.Join(ids, ", "))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// busy rewrites err, EBUSY from destroying what, to name what holds it
// (the objects for which holds is true); other errors, and EBUSY when
// nothing found holds it (unacknowledged events), pass as they are.
func (d *Device) busy(err error, what string, holds func(obj any) bool) error {
	if !errors.Is(err, EBUSY) || !d.ok() {
		return err
	}
	h := d.objs.holders(holds)
	if h == "" {
		return err
	}
	return &busyError{msg: fmt.Sprintf("%v: %s in use by %s", EBUSY, what, h), err: err}
}

// busyError is an engine's EBUSY told anew by busy: errors.Is finds
// what err wraps.
type busyError struct {
	msg string
	err error
}

func (e *busyError) Error() string { return e.msg }
func (e *busyError) Unwrap() error { return e.err }
