package link

import (
	"slices"
	"sync"
)

// Watchers is a set of callbacks that may be added and removed while
// they are called: what a link keeps for its capabilities' watchers (a
// link's state, its errors) and the fabric's Endpoint for the same.
type Watchers[F any] struct {
	mu   sync.Mutex
	next int
	fns  map[int]F // guarded by mu
}

// Add adds fn and returns the function that removes it.
func (w *Watchers[F]) Add(fn F) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]F{}
	}
	k := w.next
	w.next++
	w.fns[k] = fn
	return func() {
		w.mu.Lock()
		delete(w.fns, k)
		w.mu.Unlock()
	}
}

// Any reports whether a callback is set.
func (w *Watchers[F]) Any() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fns) > 0
}

// Each calls call with every callback, in the order they were added,
// outside the lock.
func (w *Watchers[F]) Each(call func(F)) {
	w.mu.Lock()
	if len(w.fns) == 0 {
		w.mu.Unlock()
		return
	}
	keys := make([]int, 0, len(w.fns))
	for k := range w.fns {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fns := make([]F, 0, len(keys))
	for _, k := range keys {
		fns = append(fns, w.fns[k])
	}
	w.mu.Unlock()
	for _, fn := range fns {
		call(fn)
	}
}
