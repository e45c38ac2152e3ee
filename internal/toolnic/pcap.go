package toolnic

import (
	"sync"
	"time"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/nic"
)

// pcapLink is a nic.Link that writes every datagram it carries, both
// ways, to a capture.Writer. The first write error is kept and reported
// when the NIC closes; the datapath never waits on it beyond the write.
type pcapLink struct {
	nic.Link
	w *capture.Writer

	mu       sync.Mutex
	firstErr error // guarded by mu
}

var _ nic.Link = (*pcapLink)(nil)

func (l *pcapLink) ReadBatch(msgs []nic.Datagram) (int, error) {
	n, err := l.Link.ReadBatch(msgs)
	now := time.Now()
	for i := range msgs[:n] {
		l.record(now, &msgs[i])
	}
	return n, err
}

func (l *pcapLink) WriteBatch(msgs []nic.Datagram) (int, error) {
	now := time.Now()
	for i := range msgs {
		l.record(now, &msgs[i])
	}
	return l.Link.WriteBatch(msgs)
}

func (l *pcapLink) record(ts time.Time, d *nic.Datagram) {
	e := d.Encap
	if !e.Src.IsValid() {
		e.Src = l.LocalAddr()
	}
	if err := l.w.WriteDatagram(ts, &e, d.Buf); err != nil {
		l.mu.Lock()
		if l.firstErr == nil {
			l.firstErr = err
		}
		l.mu.Unlock()
	}
}

func (l *pcapLink) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstErr
}
