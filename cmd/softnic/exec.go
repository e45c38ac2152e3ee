package main

import (
	"io"

	softexec "github.com/softnic/softnic/clib/exec"
)

// runExec implements "softnic exec": an unmodified libibverbs program run
// over softnic's libibverbs (clib/exec).
func runExec(args []string, _, stderr io.Writer) int { return softexec.Command(args, stderr) }
