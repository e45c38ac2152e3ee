package devinfo

import (
	"bytes"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/verbs"
)

func device(t *testing.T, addr string) *verbs.Device {
	t.Helper()
	f := fabric.New(fabric.Config{})
	t.Cleanup(func() { f.Close() })
	ep, err := f.Attach(netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	d, err := verbs.Open(verbs.Config{Link: ep, Name: "rxe0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// label returns the attribute name of a devinfo line, or "" for the
// lines that list flags.
func label(l string) string {
	t := strings.TrimLeft(l, "\t")
	if strings.HasPrefix(l, "\t\t\t\t\t") {
		return ""
	}
	if i := strings.Index(t, ":"); i >= 0 {
		t = t[:i]
	}
	if strings.HasPrefix(t, "GID[") {
		return "GID"
	}
	return strings.Repeat(">", len(l)-len(strings.TrimLeft(l, "\t"))) + t
}

// TestLayoutMatchesRxe checks softnic info's lines against the
// "ibv_devinfo -v" of an rxe device (rdma-core 44; rxe-peer capture):
// the same attributes, in the same order, at the same indentation.
func TestLayoutMatchesRxe(t *testing.T) {
	want, err := os.ReadFile("testdata/rxe_devinfo_v.txt")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := Write(&got, device(t, "10.77.0.2"), Options{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	labels := func(s string) []string {
		var z []string
		for _, l := range strings.Split(s, "\n") {
			if lb := label(l); lb != "" && (len(z) == 0 || z[len(z)-1] != lb) {
				z = append(z, lb)
			}
		}
		return z
	}
	g, w := labels(got.String()), labels(string(want))
	// Where rxe prints "tag matching not supported", softnic prints its
	// tm_caps (devinfo.c print_tm_caps).
	for i, lb := range w {
		if lb == ">tag matching not supported" {
			tm := []string{">max_rndv_hdr_size", ">max_num_tags", ">max_ops", ">max_sge", ">flags"}
			w = append(w[:i], append(tm, w[i+1:]...)...)
			break
		}
	}
	// Where rxe's max_tso is 0, softnic's is not, and supported_qp
	// follows (devinfo.c print_tso_caps).
	for i, lb := range w {
		if lb == ">>max_tso" {
			w = append(w[:i+1], append([]string{">>supported_qp"}, w[i+1:]...)...)
			break
		}
	}
	// Where rxe has no completion clock, softnic has one; after its
	// tm_caps it prints its CQ moderation caps (devinfo.c
	// print_cq_moderation_caps), and after num_comp_vectors the calls it
	// does not offer (not in ibv_devinfo).
	for i, lb := range w {
		switch lb {
		case ">completion_timestamp_mask not supported":
			w[i] = ">completion timestamp_mask"
		case ">core clock not supported":
			w[i] = ">hca_core_clock"
		}
	}
	for i, lb := range w {
		if lb == ">num_comp_vectors" {
			w = append(w[:i], append([]string{">cq moderation caps", ">>max_cq_count", ">>max_cq_period", ">num_comp_vectors",
				">not supported (EOPNOTSUPP)"}, w[i+1:]...)...)
			break
		}
	}
	if strings.Join(g, "|") != strings.Join(w, "|") {
		t.Errorf("attribute lines differ\ngot:  %q\nwant: %q", g, w)
	}
	// Each call softnic does not offer is named, with why.
	for _, u := range verbs.Unsupported {
		if l := "\t\t\t\t\t" + u.Call + ": " + u.Reason + "\n"; !strings.Contains(got.String(), l) {
			t.Errorf("softnic info lacks %q", l)
		}
	}
	// Lines whose value softnic shares with rxe, verbatim.
	for _, l := range []string{
		"hca_id:\trxe0\n", "\ttransport:\t\t\tInfiniBand (0)\n", "\tvendor_id:\t\t\t0xffffff\n",
		"\tmax_mr_size:\t\t\t0xffffffffffffffff\n", "\tpage_size_cap:\t\t\t0xfffff000\n", "\tmax_sge:\t\t\t32\n",
		"\tmax_qp_rd_atom:\t\t\t128\n", "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n", "\tlocal_ca_ack_delay:\t\t15\n",
		"\t\tport:\t1\n", "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n", "\t\t\tmax_mtu:\t\t4096 (5)\n",
		"\t\t\tlink_layer:\t\tEthernet\n", "\t\t\tport_cap_flags:\t\t0x00010000\n", "\t\t\tactive_width:\t\t1X (1)\n",
		"\t\t\tactive_speed:\t\t2.5 Gbps (1)\n", "\t\t\tphys_state:\t\tLINK_UP (5)\n",
		"\t\t\tGID[  1]:\t\t::ffff:10.77.0.2, RoCE v2\n",
	} {
		l2 := strings.Replace(l, "GID[  1]", "GID[  0]", 1)
		if !strings.Contains(string(want), l) {
			t.Errorf("the rxe capture lacks %q", l)
		}
		if !strings.Contains(got.String(), l2) {
			t.Errorf("softnic info lacks %q", l2)
		}
	}
}

func TestShortAndIPv6(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, device(t, "fd00::7"), Options{}); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if strings.Contains(s, "max_qp:") || !strings.Contains(s, "\t\t\tlink_layer:\t\tEthernet\n") || strings.Contains(s, "GID[") {
		t.Errorf("short output:\n%s", s)
	}
	b.Reset()
	Write(&b, device(t, "fd00::8"), Options{Verbose: true, Port: 1})
	if !strings.Contains(b.String(), "\t\t\tGID[  0]:\t\tfd00::8, RoCE v2\n") {
		t.Errorf("IPv6 GID:\n%s", b.String())
	}
	b.Reset()
	List(&b, []string{"softnic0"})
	if b.String() != "1 HCA found:\n\tsoftnic0\n" {
		t.Errorf("List: got %q", b.String())
	}
	if guid(0x505400fffe4d7702) != "5054:00ff:fe4d:7702" {
		t.Error("guid")
	}
}

// TestCCParams: a device with congestion control lists its parameters
// under mlx5's names; one without prints none.
func TestCCParams(t *testing.T) {
	f := fabric.New(fabric.Config{})
	t.Cleanup(func() { f.Close() })
	ep, err := f.Attach(netip.MustParseAddr("10.0.0.5"))
	if err != nil {
		t.Fatal(err)
	}
	p := ibv.DefaultCCParams()
	p.RPAIRate = 10
	d, err := verbs.Open(verbs.Config{Link: ep, CC: &p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var b bytes.Buffer
	if err := Write(&b, d, Options{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\tcongestion_control:\t\tdcqcn\n", "\t\trp_ai_rate:                     10 Mbps\n",
		"\t\tnp_min_time_between_cnps:       4 usec\n", "\t\trp_gd:                          11\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	// --json: the same parameters, in congestion_control.params, with
	// their units apart.
	b.Reset()
	if err := WriteJSON(&b, d, Options{}); err != nil {
		t.Fatal(err)
	}
	var js Device
	if err := tooljson.Decode(b.Bytes(), &js); err != nil {
		t.Fatalf("not one Device: %v\n%s", err, b.String())
	}
	cc := js.CongestionControl
	if cc == nil || cc.Algorithm != "dcqcn" || len(cc.Params) != len(p.List()) {
		t.Fatalf("congestion_control %+v, want dcqcn with the %d parameters", cc, len(p.List()))
	}
	for name, want := range map[string]float64{"rp_ai_rate": 10, "np_min_time_between_cnps": 4, "rp_gd": 11} {
		if got, ok := cc.Params[name]; !ok || got != want {
			t.Errorf("params[%s] = %v (%v), want %v", name, got, ok, want)
		}
	}
	if cc.Units["rp_ai_rate"] != "Mbps" || cc.Units["np_min_time_between_cnps"] != "usec" {
		t.Errorf("units %v", cc.Units)
	}
	if _, ok := cc.Units["rp_gd"]; ok {
		t.Errorf("rp_gd, a plain number, has a unit: %v", cc.Units)
	}

	for _, json := range []bool{false, true} {
		b.Reset()
		if json {
			WriteJSON(&b, device(t, "10.0.0.6"), Options{})
		} else {
			Write(&b, device(t, "10.0.0.6"), Options{Verbose: true})
		}
		if strings.Contains(b.String(), "congestion_control") {
			t.Errorf("a device without congestion control lists it (json %v)", json)
		}
	}
}
