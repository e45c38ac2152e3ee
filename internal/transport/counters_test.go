package transport

import (
	"reflect"
	"sync/atomic"
	"testing"
)

// TestCounterValuesComplete: CounterValues has every field of Counters,
// in order, and Load copies each one.
func TestCounterValuesComplete(t *testing.T) {
	var c Counters
	live := reflect.ValueOf(&c).Elem()
	for i := range live.NumField() {
		live.Field(i).Addr().Interface().(*atomic.Uint64).Store(uint64(i + 1))
	}
	v := reflect.ValueOf(c.Load())
	if v.NumField() != live.NumField() {
		t.Fatalf("CounterValues has %d fields, Counters %d", v.NumField(), live.NumField())
	}
	for i := range live.NumField() {
		name := live.Type().Field(i).Name
		if got := v.Type().Field(i).Name; got != name {
			t.Errorf("CounterValues field %d is %s, want %s", i, got, name)
			continue
		}
		if got := v.Field(i).Uint(); got != uint64(i+1) {
			t.Errorf("Load: %s = %d, want %d", name, got, i+1)
		}
	}
}
