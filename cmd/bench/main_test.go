package main

import "testing"

// The guest mode finds the guests' 9p shares where the bed keeps them:
// --bed-state, else the bed's own INTEROP_STATE, else lib.sh's default.
func TestStateDir(t *testing.T) {
	t.Setenv("INTEROP_STATE", "")
	if got := stateDir(""); got != "/run/softnic-interop" {
		t.Errorf("default: got %q", got)
	}
	t.Setenv("INTEROP_STATE", "/tmp/bed-state")
	if got := stateDir(""); got != "/tmp/bed-state" {
		t.Errorf("from INTEROP_STATE: got %q", got)
	}
	if got := stateDir("/srv/state"); got != "/srv/state" {
		t.Errorf("from --bed-state: got %q", got)
	}
}
