package exec

import (
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The libraries scripts/clib builds, which a program's dynamic linker must
// find first.
const (
	LibIBVerbs = "libibverbs.so.1"
	LibEngine  = "libsoftnic.so"
)

// EnvLib names the directory of the libraries for softnic exec (--lib).
const EnvLib = "SOFTNIC_LIB"

// Environ returns env (os.Environ) with the variables that run a program
// over softnic: LD_LIBRARY_PATH led by libDir, then o's variables, which
// replace any of the same name in env.
func Environ(env []string, libDir string, o Options) []string {
	set := o.Environ()
	names := map[string]bool{"LD_LIBRARY_PATH": true}
	for _, kv := range set {
		names[kv[:strings.IndexByte(kv, '=')]] = true
	}
	var out []string
	ld := libDir
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if name == "LD_LIBRARY_PATH" && val != "" {
			ld += ":" + val
		}
		if !names[name] {
			out = append(out, kv)
		}
	}
	out = append(out, "LD_LIBRARY_PATH="+ld)
	return append(out, set...)
}

// FindLib returns the directory holding softnic's libibverbs.so.1 and
// libsoftnic.so: dir when it is not empty, else $SOFTNIC_LIB, else
// build/lib of the softnic checkout holding the working directory (where
// scripts/clib puts them), else lib beside the directory of the running
// executable (bin/softnic, lib/).
func FindLib(dir string) (string, error) {
	var tried []string
	try := func(d string) bool {
		if d == "" {
			return false
		}
		tried = append(tried, d)
		for _, f := range []string{LibIBVerbs, LibEngine} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				return false
			}
		}
		return true
	}
	if dir != "" {
		if try(dir) {
			return filepath.Abs(dir)
		}
		return "", fmt.Errorf("%s has no %s and %s (build them with scripts/clib -o %s)", dir, LibIBVerbs, LibEngine, dir)
	}
	if d := os.Getenv(EnvLib); try(d) {
		return filepath.Abs(d)
	}
	if root, err := moduleRoot(); err == nil && try(filepath.Join(root, "build", "lib")) {
		return filepath.Join(root, "build", "lib"), nil
	}
	if exe, err := os.Executable(); err == nil && try(filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib")) {
		return filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib"), nil
	}
	return "", fmt.Errorf("softnic's %s is not built (looked in %s): run scripts/clib, or name its directory with --lib or $%s",
		LibIBVerbs, strings.Join(tried, ", "), EnvLib)
}

// moduleRoot returns the directory of the softnic module holding the
// working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/softnic/softnic\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not in a softnic checkout")
		}
		dir = parent
	}
}

// Exec replaces the process with argv[0] run over softnic: the program
// found in PATH, its environment that of Environ.
func Exec(libDir string, o Options, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no program to run")
	}
	path, err := osexec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, argv, Environ(os.Environ(), libDir, o))
}
