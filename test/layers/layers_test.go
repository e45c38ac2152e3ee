package layers

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/softnic/softnic"

// rank orders every package of the module from the ground up: a package
// may import only packages of a lower rank. A new package gets a place
// here, deliberately, and a row in the README's layout table.
var rank = map[string]int{
	// The wire, time and the API's value types: no softnic imports.
	"wire":  0,
	"clock": 0,
	"ibv":   0,
	// Readers of the wire, and the links that carry it.
	"capture": 1,
	"link":    1,
	// The in-memory network: a link, with no engine behind it.
	"fabric": 2,
	// The engine (internal/): its errors, each with its errno (no softnic
	// imports), the plumbing the transports share, memory and completion
	// queues under the transports, the transports, then the NIC that
	// drives them.
	"internal/errno":        2,
	"internal/cc":           2,
	"internal/transport":    3,
	"internal/mem":          4,
	"internal/nic/cq":       4,
	"internal/tm":           4,
	"internal/transport/rc": 5,
	"internal/transport/ud": 5,
	"internal/nic":          6,
	// The transports' test kit: QPs driven on the fabric as the engine
	// drives them (imported by the transports' tests only).
	"internal/transport/transporttest": 4,
	// The public API and the counters' exporter; the IB connection
	// manager's state machine (over wire and clock only, below the RDMA
	// CM that alone uses it).
	"verbs":                  7,
	"metrics":                8,
	"verbs/cm/internal/ibcm": 8,
	"verbs/cm":               9,
	// The tools' logic (tools/): their kit (the out-of-band exchange, the
	// NIC and the environment every tool takes, the commands' skeleton,
	// the CM tools' skeleton), then the tools, then the commands. Test
	// kits are named for what they test.
	"tools/tooljson":     10,
	"tools/getopt":       10,
	"tools/oob":          10,
	"test/netnstest":     10,
	"tools/toolnic":      11,
	"tools/toolcmd":      12,
	"tools/tooltest":     12,
	"tools/decode":       13,
	"tools/cm/cmkit":     13,
	"tools/pingpong":     13,
	"tools/devinfo":      14,
	"tools/cm/rping":     14,
	"tools/cm/ucmatose":  14,
	"tools/cm/rdmasync":  14,
	"tools/cm/udaddy":    14,
	"tools/cm/mckey":     14,
	"tools/perftest":     14,
	"tools/tmpingpong":   14,
	"tools/xsrqpingpong": 14,
	"tools/demo":         15,
	"tools/bench":        15,
	// softnic as libibverbs: softnic exec's logic and the library's
	// configuration (the SOFTNIC_* environment), then the Go engine the
	// C library loads (a c-shared main package over verbs).
	"clib/exec":    10,
	"clib/engine":  12,
	"cmd/softnic":  16,
	"cmd/udpbench": 16,
	"cmd/bench":    16,
	// Test suites and this check import nothing of the module.
	"test/interop": 17,
	"test/twohost": 17,
	"test/layers":  17,
	"test/testsum": 17,
	// The congestion bed's switch port.
	"test/congestion/bottleneck": 17,
}

// graph returns every package of the module with the module packages it
// imports (not its tests'), by go list.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := rel(f[0])
		g[pkg] = nil
		for _, imp := range f[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				g[pkg] = append(g[pkg], rel(imp))
			}
		}
	}
	return g
}

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// TestLayers: every import goes down the ranks, every package has a rank.
func TestLayers(t *testing.T) {
	g := graph(t)
	if len(g) < 20 {
		t.Fatalf("go list found %d packages: %v", len(g), g)
	}
	for pkg, imps := range g {
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("package %s has no rank: place it in layers_test.go and in the README's layout table", pkg)
			continue
		}
		for _, imp := range imps {
			if ri, ok := rank[imp]; ok && ri >= r {
				t.Errorf("%s (rank %d) imports %s (rank %d): an import must go down", pkg, r, imp, ri)
			}
		}
	}
	for pkg := range rank {
		if _, ok := g[pkg]; !ok {
			t.Errorf("rank lists %s, which go list does not find", pkg)
		}
	}
}

// public is softnic's public surface: the API (verbs and its value types,
// ibv), the in-memory network and the links, the wire format and its
// readers, the clock the engine takes, and the metrics exporter. Every
// other package is the engine (internal/), a tool's logic (tools/), a
// command (cmd/), the C library's Go side (clib/) or a test suite or kit
// (test/).
var public = []string{"wire", "clock", "ibv", "capture", "link", "fabric", "verbs", "verbs/cm", "metrics"}

// TestEngineInternal: the engine (transports, memory, the NIC and its
// plumbing) is not public API.
func TestEngineInternal(t *testing.T) {
	g := graph(t)
	for pkg := range g {
		switch {
		case slices.Contains(public, pkg),
			strings.HasPrefix(pkg, "internal/"),
			strings.Contains(pkg, "/internal/"),
			strings.HasPrefix(pkg, "tools/"),
			strings.HasPrefix(pkg, "cmd/"),
			strings.HasPrefix(pkg, "clib/"),
			strings.HasPrefix(pkg, "test/"):
		default:
			t.Errorf("package %s is public but not in the public surface %v: move it under internal/ or add it deliberately", pkg, public)
		}
	}
	for _, p := range public {
		if _, ok := g[p]; !ok {
			t.Errorf("public package %s does not exist", p)
		}
	}
	if imps := g["ibv"]; len(imps) != 0 {
		t.Errorf("ibv imports %v: the value types stand on nothing of softnic's", imps)
	}
	if imps := g["wire"]; len(imps) != 0 {
		t.Errorf("wire imports %v: it stands on nothing of softnic's", imps)
	}
	// The fabric and the links carry datagrams: no engine package, no
	// transport type behind them (wireguard-go's conn/ beside device/).
	for _, carrier := range []string{"fabric", "link", "capture"} {
		for _, imp := range g[carrier] {
			if !slices.Contains([]string{"wire", "clock", "link"}, imp) {
				t.Errorf("%s imports %s: it may import only wire, clock and link", carrier, imp)
			}
		}
	}
}

// TestEngineBehindVerbs: the engine is reached only through the API. No
// package outside internal/ imports an engine package but verbs (and the
// RDMA CM's own state machine, which imports none), so go list -deps of
// any tool or command reaches the engine only through verbs; and
// internal/ holds the engine alone: every package there is imported by
// the engine or by verbs, but the engine's test kits (named ...test),
// which only the engine's tests import.
func TestEngineBehindVerbs(t *testing.T) {
	g := graph(t)
	for pkg, imps := range g {
		for _, imp := range imps {
			if strings.HasPrefix(imp, "internal/") && strings.HasSuffix(imp, "test") {
				t.Errorf("%s imports the test kit %s: only tests may", pkg, imp)
			}
		}
		if strings.HasPrefix(pkg, "internal/") || pkg == "verbs" {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, "internal/") {
				t.Errorf("%s imports the engine package %s: only verbs may", pkg, imp)
			}
		}
	}
	for pkg := range g {
		if !strings.HasPrefix(pkg, "internal/") || strings.HasSuffix(pkg, "test") {
			continue
		}
		used := false
		for user, imps := range g {
			if (user == "verbs" || strings.HasPrefix(user, "internal/")) && slices.Contains(imps, pkg) {
				used = true
			}
		}
		if !used {
			t.Errorf("%s is under internal/ but neither the engine nor verbs imports it: internal/ holds the engine alone", pkg)
		}
	}
}

// TestVerbsThroughOneDoor: verbs reaches the engine through internal/nic
// alone. What the API needs of the packages below nic (memory objects,
// CQs, the state table) nic names in one file (internal/nic/door.go), so
// that the API's reach into the engine is read in one place.
func TestVerbsThroughOneDoor(t *testing.T) {
	g := graph(t)
	var engine []string
	for _, imp := range g["verbs"] {
		if strings.HasPrefix(imp, "internal/") {
			engine = append(engine, imp)
		}
	}
	if len(engine) != 1 || engine[0] != "internal/nic" {
		t.Errorf("verbs imports the engine packages %v, want internal/nic alone", engine)
	}
}
