// Package netnstest gives tests real network interfaces: private network
// namespaces made with iproute2's ip, joined by veth pairs whose MTU a
// test can change. It needs root and ip; Require skips the test, with
// the reason, otherwise. Every namespace is deleted at the test's
// cleanup, which takes its interfaces with it.
package netnstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Require skips t unless it can make namespaces: Linux, root, and ip.
func Require(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("network namespaces need Linux")
	}
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace and a veth pair needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (Debian package iproute2)")
	}
}

// NS is a network namespace of the test.
type NS struct {
	Name string
}

// New makes the namespace name with its loopback up and deletes it at
// cleanup. Names are global: make them unique (the test's PID helps).
func New(t testing.TB, name string) *NS {
	t.Helper()
	Require(t)
	exec.Command("ip", "netns", "del", name).Run() // a leftover of a killed run
	ns := &NS{Name: name}
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ns.IP(t, "link", "set", "lo", "up")
	return ns
}

// IP runs ip -n NS args..., failing the test on error.
func (ns *NS) IP(t testing.TB, args ...string) {
	t.Helper()
	run(t, "ip", append([]string{"-n", ns.Name}, args...)...)
}

// SetMTU sets the MTU of dev in the namespace.
func (ns *NS) SetMTU(t testing.TB, dev string, mtu int) {
	t.Helper()
	ns.IP(t, "link", "set", dev, "mtu", fmt.Sprint(mtu))
}

// Command is exec.CommandContext of name args... run inside the namespace
// (ip netns exec).
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Veth joins a and b with a veth pair, devA in a with address addrA (a
// prefix such as "10.7.0.1/24") and devB in b with addrB, both up with
// MTU mtu. IPv6 addresses are added without duplicate address detection,
// usable at once.
func Veth(t testing.TB, a *NS, devA, addrA string, b *NS, devB, addrB string, mtu int) {
	t.Helper()
	a.IP(t, "link", "add", devA, "type", "veth", "peer", "name", devB, "netns", b.Name)
	for _, s := range []struct {
		ns        *NS
		dev, addr string
	}{{a, devA, addrA}, {b, devB, addrB}} {
		args := []string{"addr", "add", s.addr, "dev", s.dev}
		if strings.Contains(s.addr, ":") {
			args = append(args, "nodad")
		}
		s.ns.IP(t, args...)
		s.ns.IP(t, "link", "set", s.dev, "mtu", fmt.Sprint(mtu), "up")
	}
}

// AddAddr adds addr (a prefix) to dev in the namespace.
func (ns *NS) AddAddr(t testing.TB, dev, addr string) {
	t.Helper()
	args := []string{"addr", "add", addr, "dev", dev}
	if strings.Contains(addr, ":") {
		args = append(args, "nodad")
	}
	ns.IP(t, args...)
}

// Do runs f on an OS thread switched into the namespace: sockets f opens
// belong to it and keep working after the thread switches back.
func (ns *NS) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + ns.Name)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", ns.Name, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is in the wrong namespace: let it die with the
		// goroutine (a locked thread that is not unlocked exits).
		runtime.LockOSThread()
		return fmt.Errorf("cannot return to the test's namespace: %w", err)
	}
	return ferr
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
