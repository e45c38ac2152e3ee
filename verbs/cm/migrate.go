package cm

import "github.com/softnic/softnic/verbs"

// Migrate moves the ID to channel ch (rdma_migrate_id): its events not
// yet got move with it, in order, after those ch holds (ucma.c
// ucma_migrate_id moves the context's events to the new file). A
// synchronous ID's private channel goes away: the ID is asynchronous on
// ch from then on. The events of connection requests a listening ID
// reported move with it; the IDs of those requests stay where they are.
func (id *ID) Migrate(ch *EventChannel) error {
	if err := id.lock(); err != nil {
		return err
	}
	c := id.cm
	defer c.mu.Unlock()
	if ch == nil || ch.c != c || ch.closed || ch.sync {
		return errf(verbs.EINVAL, "migrate to a channel of another CM, closed or private")
	}
	old := id.ch
	if old == ch {
		return nil
	}
	q := old.q[:0]
	for _, ev := range old.q {
		if ev.owner == id {
			ch.q = append(ch.q, ev)
		} else {
			q = append(q, ev)
		}
	}
	old.q = q
	old.users--
	if id.sync {
		old.closed = true
		delete(c.chans, old)
		id.sync = false
	}
	ch.users++
	id.ch = ch
	old.changed()
	ch.changed()
	for _, x := range []*EventChannel{old, ch} {
		select {
		case x.notify <- struct{}{}:
		default:
		}
	}
	return nil
}
