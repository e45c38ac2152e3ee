package verbs

import "sync"

// registry maps engine objects to their verbs wrappers.
type registry[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

func newRegistry[K comparable, V any]() *registry[K, V] {
	return &registry[K, V]{m: make(map[K]V)}
}

func (r *registry[K, V]) put(k K, v V) {
	r.mu.Lock()
	r.m[k] = v
	r.mu.Unlock()
}

func (r *registry[K, V]) get(k K) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	return v, ok
}

func (r *registry[K, V]) del(k K) {
	r.mu.Lock()
	delete(r.m, k)
	r.mu.Unlock()
}
