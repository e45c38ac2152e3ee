package toolnic

import (
	"os"
	"strconv"
)

// CPUShare is the GOMAXPROCS for each of procs softnic processes that
// share a machine of cpus CPUs (scripts/bench's pair, softnic demo's):
// an equal share, at least one, as separate hosts would each have their
// own. With Go's default (every CPU) two processes on two vCPUs contend
// for the same CPUs: a goroutine hand-off in one wakes a thread that
// preempts the other's. In alternating pairs on a 2-vCPU machine one CPU
// each beat two each on every figure (docs/performance.md,
// "toolnic.CPUShare: half the CPUs each").
func CPUShare(cpus, procs int) int { return max(1, cpus/max(procs, 1)) }

// GOMAXPROCSEnv is this process's environment with GOMAXPROCS set to n,
// for a child process (exec.Cmd.Env); nil, the environment unchanged,
// when n is 0 or less.
func GOMAXPROCSEnv(n int) []string {
	if n <= 0 {
		return nil
	}
	return append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(n))
}
