package fabric

import (
	"errors"
	"sync"
	"testing"

	"github.com/softnic/softnic/link"
)

// TestReorderConcurrentSenders has two goroutines send on one path while
// datagrams are held back for reordering: the one that holds a datagram
// must not touch it once the other may have released it to the receiver
// (run with -race; before the fix forward read the frame after handing it
// over, and a reader recycling it made that read race or crash).
func TestReorderConcurrentSenders(t *testing.T) {
	f := New(Config{Seed: 7})
	defer f.Close()
	a, _ := f.Attach(addrA)
	b, _ := f.Attach(addrB)
	f.SetImpairment(Impairment{Reorder: 0.5})
	const perSender = 2000
	var readers sync.WaitGroup
	readers.Go(func() {
		msgs := make([]link.Datagram, 8)
		for i := range msgs {
			msgs[i].Buf = make([]byte, 0, link.MaxDatagram)
		}
		for {
			if _, err := b.ReadBatch(msgs); err != nil {
				if !errors.Is(err, link.ErrLinkClosed) {
					t.Errorf("ReadBatch: %v", err)
				}
				return
			}
		}
	})
	var senders sync.WaitGroup
	for range 2 {
		senders.Go(func() { sendSeq(t, a, addrB, perSender) })
	}
	senders.Wait()
	f.Close()
	readers.Wait()
	if st := f.Stats(); st.Sent.Packets != 2*perSender || st.Reordered.Packets == 0 {
		t.Errorf("sent %d, reordered %d; want %d sent and some reordered", st.Sent.Packets, st.Reordered.Packets, 2*perSender)
	}
}
