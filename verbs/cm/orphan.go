package cm

import "net/netip"

// OrphanDREQ returns the DREQ MAD that ends the ID's connection, and the
// addresses of its QP1s (from, to), without sending it: what the
// kernel's rdma_cm sends for a process that dies connected (closing its
// rdma_cm file destroys its IDs). A process that may die without calling
// Close (SIGKILL) leaves it to another to send. False unless the ID's
// connection is established.
func (id *ID) OrphanDREQ() (from, to netip.Addr, mad []byte, ok bool) {
	if !id.ok() {
		return
	}
	c := id.cm
	c.mu.Lock()
	ib, dev := id.ib, id.dev
	c.mu.Unlock()
	if ib == nil || dev == nil {
		return
	}
	m, ok := ib.OrphanDREQ()
	if !ok {
		return
	}
	return dev.addr, ib.Peer(), m, true
}
