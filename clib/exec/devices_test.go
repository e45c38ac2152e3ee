package exec

import (
	"fmt"
	"strings"
	"testing"
)

// ibv_devices lists the one device without starting the engine; its GUID
// is made from the address, as the engine makes the node GUID.
func TestIbvDevices(t *testing.T) {
	needLibs(t)
	needTools(t, "ibverbs-utils", "ibv_devices")
	out := run(t, Options{Addr: testAddr(0)}, "ibv_devices")
	if want := fmt.Sprintf("    softnic0        \t0200ffff7f0000%02x\n", addrBase); !strings.Contains(out, want) {
		t.Errorf("ibv_devices:\n%s\nwant the line %q", out, want)
	}
	out = run(t, Options{Addr: testAddr(0), Dev: "rxe7"}, "ibv_devices")
	if !strings.Contains(out, "    rxe7            \t") {
		t.Errorf("ibv_devices with SOFTNIC_DEV=rxe7:\n%s", out)
	}
}

// ibv_devinfo -v shows the device as rxe's shows: the node GUID, the port
// on Ethernet, and a GID table of 1024 whose first two entries are a
// link-local GID and the address, both RoCE v2.
func TestIbvDevinfo(t *testing.T) {
	needLibs(t)
	needTools(t, "ibverbs-utils", "ibv_devinfo")
	out := run(t, Options{Addr: testAddr(0)}, "ibv_devinfo", "-v")
	for _, want := range []string{
		"hca_id:\tsoftnic0\n",
		"\ttransport:\t\t\tInfiniBand (0)\n",
		fmt.Sprintf("\tnode_guid:\t\t\t0200:ffff:7f00:%04x\n", addrBase),
		"\tvendor_id:\t\t\t0xffffff\n",
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
		"\t\t\tlink_layer:\t\tEthernet\n",
		"\t\t\tgid_tbl_len:\t\t1024\n",
		fmt.Sprintf("\t\t\tGID[  0]:\t\tfe80::200:ffff:7f00:%x, RoCE v2\n", addrBase),
		"\t\t\tGID[  1]:\t\t::ffff:" + testAddr(0).String() + ", RoCE v2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ibv_devinfo -v lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GID[  2]") {
		t.Errorf("ibv_devinfo -v shows a third GID:\n%s", out)
	}
	// The MTU follows SOFTNIC_MTU.
	out = run(t, Options{Addr: testAddr(0), MTU: 1024}, "ibv_devinfo")
	if !strings.Contains(out, "\t\t\tactive_mtu:\t\t1024 (3)\n") {
		t.Errorf("ibv_devinfo with SOFTNIC_MTU=1024:\n%s", out)
	}
}
