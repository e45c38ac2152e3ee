package devinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/softnic/softnic/tools/tooljson"
)

// TestJSONMatchesText prints a device both ways and expects every JSON
// key that names an ibv_devinfo line to carry that line's value, the JSON
// to read back strictly into Device, and the GIDs to be address strings.
func TestJSONMatchesText(t *testing.T) {
	for _, addr := range []string{"10.77.0.2", "fd00::7"} {
		dev := device(t, addr)
		var text, js bytes.Buffer
		if err := Write(&text, dev, Options{Verbose: true}); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&js, dev, Options{}); err != nil {
			t.Fatal(err)
		}
		var d Device
		if err := tooljson.Decode(js.Bytes(), &d); err != nil {
			t.Fatalf("%s: not one Device: %v\n%s", addr, err, js.String())
		}
		var top map[string]any
		if err := json.Unmarshal(js.Bytes(), &top); err != nil {
			t.Fatal(err)
		}
		port := top["ports"].([]any)[0].(map[string]any)
		line := regexp.MustCompile(`^\t*([a-z_]+):\t+(\S+)`)
		seen := 0
		// The tm_caps lines, max_rndv_hdr_size to flags, are tm_caps' keys.
		tm, inTM := top["tm_caps"].(map[string]any), false
		for _, l := range strings.Split(text.String(), "\n") {
			switch {
			case strings.HasPrefix(l, "\tmax_rndv_hdr_size:"):
				inTM = true
			case strings.HasPrefix(l, "\tflags:"):
				inTM = false
			}
			m := line.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			scope := top
			if inTM {
				scope = tm
			}
			v, ok := scope[m[1]]
			if !ok && !inTM {
				v, ok = port[m[1]]
			}
			if !ok {
				continue
			}
			seen++
			if got := firstToken(v); !sameValue(got, m[2]) {
				t.Errorf("%s: %s: JSON %q, text %q", addr, m[1], got, m[2])
			}
		}
		if seen < 40 {
			t.Errorf("%s: only %d attributes in both forms", addr, seen)
		}
		if len(d.Ports) != 1 || len(d.Ports[0].GIDs) != 1 {
			t.Fatalf("%s: ports %+v", addr, d.Ports)
		}
		g, ok := port["gids"].([]any)[0].(map[string]any)["gid"].(string)
		a, err := netip.ParseAddr(g)
		if !ok || err != nil || a.Unmap() != netip.MustParseAddr(addr) || d.Ports[0].GIDs[0].GID.Addr() != a.Unmap() {
			t.Errorf("%s: gid %q, want the address as a string", addr, g)
		}
		if d.TMCaps.MaxNumTags == 0 || len(d.TMCaps.Flags) != 1 || d.TMCaps.Flags[0] != "IBV_TM_CAP_RC" {
			t.Errorf("%s: tm_caps %+v", addr, d.TMCaps)
		}
		if tc := d.TSOCaps; tc.MaxTSO != 256<<10 || len(tc.SupportedQP) != 1 || tc.SupportedQP[0] != "SUPPORT_UD" ||
			!strings.Contains(text.String(), "\ttso_caps:\n\t\tmax_tso:\t\t\t262144\n\t\tsupported_qp:\n\t\t\t\t\tSUPPORT_UD\n") {
			t.Errorf("%s: tso_caps %+v, or not printed as devinfo.c does", addr, tc)
		}
		if d.NodeGUID == 0 || d.Ports[0].ActiveMTU != 4096 || d.Ports[0].State != "PORT_ACTIVE" {
			t.Errorf("%s: got %+v", addr, d)
		}
	}
}

// firstToken is a JSON value as text, up to its first space.
func firstToken(v any) string {
	s := fmt.Sprint(v)
	if f, ok := v.(float64); ok {
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	s, _, _ = strings.Cut(s, " ")
	return s
}

// sameValue compares a JSON value with ibv_devinfo's text: numbers by
// value (the text writes some in hex), the rest verbatim.
func sameValue(js, text string) bool {
	a, err1 := strconv.ParseUint(js, 0, 64)
	b, err2 := strconv.ParseUint(text, 0, 64)
	if err1 == nil && err2 == nil {
		return a == b
	}
	return js == text
}

func TestJSONPortAndGUID(t *testing.T) {
	d, err := Query(device(t, "10.77.0.9"), Options{Port: 2})
	if err != nil || len(d.Ports) != 0 {
		t.Errorf("port 2: got %+v, %v; want no ports", d.Ports, err)
	}
	var g GUID
	if err := g.UnmarshalText([]byte("5054:00ff:fe4d:7702")); err != nil || g != 0x505400fffe4d7702 {
		t.Errorf("GUID: got %#x, %v", uint64(g), err)
	}
	for _, bad := range []string{"5054:00ff:fe4d", "5054:00ff:fe4d:77021", "x054:00ff:fe4d:7702", ""} {
		if err := g.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("GUID %q: got no error", bad)
		}
	}
}
