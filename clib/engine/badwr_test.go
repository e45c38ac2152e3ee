package main

import "testing"

// TestBadWR: a post's error points at the refused work request of the
// chain, or at its first when the refusal names none in it (an empty
// chain, or an index past it), never past the chain's end.
func TestBadWR(t *testing.T) {
	a, b, first := 1, 2, 3
	ptrs := []*int{&a, &b}
	for _, c := range []struct {
		n    int
		want *int
	}{{0, &a}, {1, &b}, {2, &first}, {-1, &first}} {
		if got := badWR(ptrs, c.n, &first); got != c.want {
			t.Errorf("badWR(%d): %v, want %v", c.n, *got, *c.want)
		}
	}
	if got := badWR[int](nil, 0, &first); got != &first {
		t.Errorf("badWR of an empty chain: %v, want the first", *got)
	}
}
