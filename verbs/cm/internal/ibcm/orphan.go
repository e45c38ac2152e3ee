package ibcm

import "github.com/softnic/softnic/wire"

// OrphanDREQ returns the DREQ the ID would send to end its connection now
// (cm_send_dreq_locked's message, with a TID of its own), without sending
// it or changing the ID's state, and false unless the ID is established.
// It is what the kernel's CM sends for a process that dies connected
// (ucma_close destroys its IDs, cm_destroy_id sends the DREQ), kept for
// someone else to send when this process cannot.
func (id *ID) OrphanDREQ() (wire.MAD, bool) {
	a := id.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || id.destroyed || id.state != StateEstablished {
		return nil, false
	}
	m := wire.CMDreq(newMAD(wire.CMAttrDREQ, id.formTID()))
	m.SetLocalCommID(id.localID)
	m.SetRemoteCommID(id.remoteID)
	m.SetRemoteQPN(id.remoteQPN)
	return wire.MAD(m), true
}
