package toolnic

import (
	"slices"
	"testing"
)

// Each of two softnic processes gets half the machine's CPUs, and never
// none.
func TestCPUShare(t *testing.T) {
	for cpus, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 16: 8} {
		if got := CPUShare(cpus, 2); got != want {
			t.Errorf("CPUShare(%d, 2) = %d, want %d", cpus, got, want)
		}
	}
	if got := CPUShare(4, 0); got != 4 {
		t.Errorf("CPUShare(4, 0) = %d, want 4", got)
	}
}

// The child's environment is this one's with GOMAXPROCS added last (so
// that it wins over one inherited); none asked, nil: inherit.
func TestGOMAXPROCSEnv(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7")
	env := GOMAXPROCSEnv(3)
	if len(env) == 0 || env[len(env)-1] != "GOMAXPROCS=3" || !slices.Contains(env, "GOMAXPROCS=7") {
		t.Errorf("GOMAXPROCSEnv(3) = %q", env)
	}
	if env := GOMAXPROCSEnv(0); env != nil {
		t.Errorf("GOMAXPROCSEnv(0) = %q, want nil", env)
	}
}
