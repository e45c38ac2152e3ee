// Package tooltest holds what the tools' tests share: verbs devices on the
// in-memory fabric, closed when the test ends. Only tests import it.
package tooltest

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/verbs"
)

// Devices opens one verbs device on f at each address, closing each when
// the test ends; any failure fails the test.
func Devices(t testing.TB, f *fabric.Fabric, addrs ...string) []*verbs.Device {
	t.Helper()
	devs := make([]*verbs.Device, len(addrs))
	for i, a := range addrs {
		ep, err := f.Attach(netip.MustParseAddr(a))
		if err != nil {
			t.Fatal(err)
		}
		d, err := verbs.Open(verbs.Config{Link: ep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs[i] = d
	}
	return devs
}
