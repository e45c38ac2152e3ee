// Package toolcmd is the skeleton of softnic's commands, as cmd/go's
// base.Command is the go command's: each tool declares a Command (its
// name, its line in "softnic help", and a run that parses its command
// line, opens what it needs and runs it), and cmd/softnic lists them in
// one table that it dispatches on and prints. What the commands share is
// here: the NIC options every NIC tool adds to its C counterpart's
// (--addr, --pcap, --timeout, ...), the getopt-style option lists and
// their usage lines, opening the NIC, the flag-package parsing of
// softnic's own commands, and the exit statuses.
package toolcmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/softnic/softnic/tools/toolnic"
)

// Exit statuses. The rdma-core and perftest look-alikes exit as the C
// tools do: 0 when the run succeeded, 1 for anything else, bad command
// lines included; softnic's own commands exit 2 for a bad command line.
// The librdmacm look-alikes have their own (package cmkit).
const (
	ExitOK    = 0
	ExitFail  = 1 // the command ran and found a problem
	ExitUsage = 2 // bad command line
)

// Command is one softnic command.
type Command struct {
	// Name is what follows "softnic" on the command line.
	Name string
	// Summary is its line in "softnic help".
	Summary string
	// Run parses args (the arguments after the name), runs the command
	// and returns its exit status. env holds the standard streams and
	// the link; Run sets the rest as its command line says. Given -h it
	// prints its usage to env.Out and returns ExitOK.
	Run func(env *toolnic.Env, args []string) int
}

// Context returns the context of a run: cancelled by SIGINT and SIGTERM,
// so that a tool interrupted at the terminal closes its NIC and its pcap
// file. A command calls it once its NIC is up.
func Context() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Fail prints a command's error, "softnic NAME: ERR", and returns
// ExitFail.
func Fail(env *toolnic.Env, name string, err error) int {
	fmt.Fprintf(env.Err, "softnic %s: %v\n", name, err)
	return ExitFail
}

// BadUsage prints the error of a look-alike's command line and where to
// find its usage, and returns ExitFail.
func BadUsage(env *toolnic.Env, name string, err error) int {
	fmt.Fprintf(env.Err, "softnic %s: %v\nRun 'softnic help %s' for usage.\n", name, err, name)
	return ExitFail
}
