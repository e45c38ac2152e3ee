package main

import "testing"

// A handle names its object until it is deleted, and never names the
// object that reuses its slot.
func TestTable(t *testing.T) {
	var tb table[string]
	a := tb.add("a")
	b := tb.add("b")
	if a == 0 || b == 0 || a == b {
		t.Fatalf("handles %#x, %#x", a, b)
	}
	if v, ok := tb.get(a); !ok || v != "a" {
		t.Errorf("get(a) = %q, %v", v, ok)
	}
	if !tb.del(a) || tb.del(a) {
		t.Errorf("del(a) twice: want true then false")
	}
	c := tb.add("c") // reuses a's slot
	if c&indexMask != a&indexMask || c == a {
		t.Errorf("c = %#x, a = %#x: want the same slot, another generation", c, a)
	}
	if _, ok := tb.get(a); ok {
		t.Errorf("get(a) after del finds an object")
	}
	if _, ok := tb.get(0); ok {
		t.Errorf("get(0) finds an object")
	}
	hs, vs := tb.all(func(s string) bool { return s != "b" })
	if len(hs) != 1 || hs[0] != c || vs[0] != "c" {
		t.Errorf("all = %v, %v", hs, vs)
	}
	// Handles past a page.
	for i := range 2 * pageSize {
		if tb.add("x") == 0 {
			t.Fatalf("add %d: table full", i)
		}
	}
}
