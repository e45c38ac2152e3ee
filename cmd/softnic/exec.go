package main

import (
	softexec "github.com/softnic/softnic/clib/exec"
	"github.com/softnic/softnic/tools/toolnic"
)

// runExec implements "softnic exec": an unmodified libibverbs program run
// over softnic's libibverbs (clib/exec).
func runExec(env *toolnic.Env, args []string) int { return softexec.Command(args, env.Err) }
