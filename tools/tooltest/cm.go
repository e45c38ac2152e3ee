package tooltest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
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
