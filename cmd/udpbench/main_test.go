//go:build linux

package main

import (
	"testing"
	"time"
)

// The cpu_s/GB column: CPU seconds per 10^9 bytes delivered.
func TestCPUPerGB(t *testing.T) {
	for _, tt := range []struct {
		cpu   time.Duration
		bytes int64
		want  string
	}{
		{1500 * time.Millisecond, 5e9, "0.300"},
		{2 * time.Second, 1e9, "2.000"},
		{time.Second, 0, "-"},
	} {
		if got := cpuPerGB(tt.cpu, tt.bytes); got != tt.want {
			t.Errorf("cpuPerGB(%v, %d) = %q, want %q", tt.cpu, tt.bytes, got, tt.want)
		}
	}
	if a, b := cpuTime(), cpuTime(); a < 0 || b < a {
		t.Errorf("cpuTime: %v then %v, want neither negative nor going back", a, b)
	}
}
