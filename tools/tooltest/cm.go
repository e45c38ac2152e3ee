package tooltest

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// CMs starts an in-memory fabric (seed 1) with one verbs device at each
// address and a connection manager on each device, all stopped when the
// test ends; it returns the CMs and the devices, in the addresses' order.
// Any failure fails the test.
func CMs(t testing.TB, addrs ...string) ([]*cm.CM, []*verbs.Device) {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	return CMsOn(t, f, addrs...)
}

// CMsOn is CMs on the fabric f, for tests that filter or tap it.
func CMsOn(t testing.TB, f *fabric.Fabric, addrs ...string) ([]*cm.CM, []*verbs.Device) {
	t.Helper()
	var cms []*cm.CM
	devs := Devices(t, f, addrs...)
	for _, d := range devs {
		c, err := cm.New(cm.Config{Devices: []*verbs.Device{d}})
		if err != nil {
			t.Fatalf("cm.New: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		cms = append(cms, c)
	}
	return cms, devs
}

// SyncBuffer is a bytes.Buffer that may be read while a run writes it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CMPair runs a server on 10.0.0.1 and its client on 10.0.0.2, each
// with its own CM on an in-memory fabric and an Env of it with stall,
// and returns what each printed and its error. When the client failed
// only because the server was not listening yet (its output names an
// RDMA CM event, the C tools' "event: RDMA_CM_EVENT_..."), the pair runs
// again, server and client, on a new fabric, the client started a little
// later each time: a client of several connections may have had some of
// them refused and others taken by a server that then listened, and
// destroying those on its way out fails that server's run (its REQ_RCVD
// IDs are rejected, its accept finds the IB CM ID idle). Only the last
// pair's outputs and errors are returned.
func CMPair(t testing.TB, stall time.Duration, server, client func(ctx context.Context, env toolnic.Env) error) (sout, cout string, serr, cerr error) {
	t.Helper()
	for i := 0; ; i++ {
		cms, _ := CMs(t, "10.0.0.1", "10.0.0.2")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var so, co bytes.Buffer
		var refused bool
		Pair(func() {
			serr = server(ctx, toolnic.Env{CM: cms[0], Out: &so, Stall: stall})
		}, func() bool {
			time.Sleep(time.Duration(i) * 20 * time.Millisecond)
			cerr = client(ctx, toolnic.Env{CM: cms[1], Out: &co, Stall: stall})
			refused = cerr != nil && strings.Contains(co.String(), "RDMA_CM_EVENT_")
			if refused && i < 50 {
				cancel() // the server's run ends: the pair goes again
			}
			return false
		})
		cancel()
		if !refused || i >= 50 {
			return so.String(), co.String(), serr, cerr
		}
		t.Logf("the client came before the server listened (%d): the pair again", i+1)
	}
}

// Pair runs server and client at once and waits for both. The client
// runs again, 20 ms later and at most 50 times more, while it answers
// again: its run failed only because the server was not listening yet.
func Pair(server func(), client func() (again bool)) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		server()
	}()
	go func() {
		defer wg.Done()
		for i := 0; client() && i < 50; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}()
	wg.Wait()
}
