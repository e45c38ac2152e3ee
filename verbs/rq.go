package verbs

import "fmt"

// rqEngine is the engine's SRQ or WQ (nic.SRQ, nic.WQ): both are receive
// queues in a PD that QPs attach to and take their receive WQEs from.
// Only destroying goes through it: a slice posted through an interface
// would escape, one allocation per post.
type rqEngine interface {
	Destroy() error
}

// destroyRQ destroys obj, an SRQ or a WQ (ibv_destroy_srq,
// ibv_destroy_wq), whose engine queue is q. It is EBUSY while
// asynchronous events about obj are not acknowledged (libibverbs waits
// for them instead) and while QPs take their receives from it, the error
// then naming the QPs for which attached is true.
func (d *Device) destroyRQ(obj any, what string, q rqEngine, attached func(*QP) bool) error {
	if err := d.asyncBusy(obj); err != nil {
		return fmt.Errorf("destroy %s: %w", what, err)
	}
	if err := q.Destroy(); err != nil {
		return d.busy(err, what, func(o any) bool {
			qp, ok := o.(*QP)
			return ok && attached(qp)
		})
	}
	d.objs.del(obj)
	return nil
}
