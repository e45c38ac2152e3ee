package main

import (
	"sync"
	"sync/atomic"
)

// A handle names an object of the engine to the C library: the index of
// its slot in a table (low 20 bits) and the slot's generation (high 12
// bits), so a handle kept after its object was destroyed names nothing
// rather than the object that reused the slot. 0 is no object.
type handle = uint32

const (
	indexBits = 20
	indexMask = 1<<indexBits - 1
	pageBits  = 10
	pageSize  = 1 << pageBits
	maxPages  = 1 << (indexBits - pageBits)
)

// table holds one kind of object by handle. Lookups are lock-free (two
// atomic loads), as the post and poll paths look up their QP or CQ on
// every call; adding and removing take the table's lock.
type table[T any] struct {
	mu    sync.Mutex
	pages [maxPages]atomic.Pointer[[pageSize]atomic.Pointer[slot[T]]]
	gens  []uint32 // generation of each index; guarded by mu
	free  []uint32 // free indexes; guarded by mu
}

type slot[T any] struct {
	h handle
	v T
}

// add stores v and returns its handle; 0 when the table is full.
func (t *table[T]) add(v T) handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	var idx uint32
	if n := len(t.free); n > 0 {
		idx, t.free = t.free[n-1], t.free[:n-1]
	} else {
		idx = uint32(len(t.gens))
		if idx == 0 {
			idx, t.gens = 1, append(t.gens, 0) // index 0 is never used: handle 0 is none
		}
		if idx > indexMask {
			return 0
		}
		t.gens = append(t.gens, 0)
	}
	t.gens[idx] = (t.gens[idx] + 1) & (1<<(32-indexBits) - 1)
	h := t.gens[idx]<<indexBits | idx
	p := t.pages[idx>>pageBits].Load()
	if p == nil {
		p = new([pageSize]atomic.Pointer[slot[T]])
		t.pages[idx>>pageBits].Store(p)
	}
	p[idx&(pageSize-1)].Store(&slot[T]{h: h, v: v})
	return h
}

// get returns the object of h.
func (t *table[T]) get(h handle) (T, bool) {
	var zero T
	idx := h & indexMask
	p := t.pages[idx>>pageBits].Load()
	if p == nil {
		return zero, false
	}
	s := p[idx&(pageSize-1)].Load()
	if s == nil || s.h != h {
		return zero, false
	}
	return s.v, true
}

// del removes h's object and reports whether it was there.
func (t *table[T]) del(h handle) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	idx := h & indexMask
	p := t.pages[idx>>pageBits].Load()
	if p == nil {
		return false
	}
	s := p[idx&(pageSize-1)].Load()
	if s == nil || s.h != h {
		return false
	}
	p[idx&(pageSize-1)].Store(nil)
	t.free = append(t.free, idx)
	return true
}

// all returns the table's objects for which keep returns true, with their
// handles.
func (t *table[T]) all(keep func(T) bool) (hs []handle, vs []T) {
	t.mu.Lock()
	n := len(t.gens)
	t.mu.Unlock()
	for idx := 1; idx < n; idx++ {
		p := t.pages[idx>>pageBits].Load()
		if p == nil {
			continue
		}
		if s := p[idx&(pageSize-1)].Load(); s != nil && keep(s.v) {
			hs, vs = append(hs, s.h), append(vs, s.v)
		}
	}
	return hs, vs
}
