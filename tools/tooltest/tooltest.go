// Package tooltest holds what the tools' tests share: verbs devices on the
// in-memory fabric, closed when the test ends, and a server and its client
// run at once over the out-of-band exchange. Only tests import it.
package tooltest

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// Devices opens one verbs device on f at each address, closing each when
// the test ends; any failure fails the test.
func Devices(t testing.TB, f *fabric.Fabric, addrs ...string) []*verbs.Device {
	t.Helper()
	devs := make([]*verbs.Device, len(addrs))
	for i, a := range addrs {
		devs[i], _ = DeviceMTU(t, f, a, 0)
	}
	return devs
}

// DeviceMTU opens a verbs device on a new endpoint of f at addr whose
// interface MTU is mtu (0: the fabric's), closed when the test ends; any
// failure fails the test.
func DeviceMTU(t testing.TB, f *fabric.Fabric, addr string, mtu int) (*verbs.Device, *fabric.Endpoint) {
	t.Helper()
	ep, err := f.Attach(netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	if mtu > 0 {
		if err := ep.SetMTU(mtu); err != nil {
			t.Fatal(err)
		}
	}
	d, err := verbs.Open(verbs.Config{Link: ep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, ep
}

// ClientServer runs a server on sdev and its client on cdev at once,
// their out-of-band exchange on 127.0.0.1 and an ephemeral port, and
// waits for both. Each gets an Env with its device and stall, the server
// the listener too and the client the port to dial, and a context that
// ends after a minute.
func ClientServer(t testing.TB, sdev, cdev *verbs.Device, stall time.Duration,
	server func(ctx context.Context, env toolnic.Env), client func(ctx context.Context, env toolnic.Env, port int)) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		server(ctx, toolnic.Env{Dev: sdev, Listener: ln, Stall: stall})
	}()
	go func() {
		defer wg.Done()
		client(ctx, toolnic.Env{Dev: cdev, Stall: stall}, ln.Addr().(*net.TCPAddr).Port)
	}()
	wg.Wait()
}
