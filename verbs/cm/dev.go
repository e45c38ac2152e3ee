package cm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm/internal/ibcm"
	"github.com/softnic/softnic/wire"
)

const (
	madRecvs  = 128 // receive WRs kept posted on QP1
	madSends  = 128 // send slots
	recvSlot  = verbs.GRHLen + wire.MADLen
	ackDelay  = 15  // rxe's local_ca_ack_delay
	maxAHs    = 256 // address handles cached for QP1's peers
	gsiPKeyIx = 0
)

// cmDev is one device's side of the CM: its GSI QP and the IB CM agent
// that speaks through it (cm.c's cm_device and cm_port).
type cmDev struct {
	c     *CM
	dev   *verbs.Device
	addr  netip.Addr
	agent *ibcm.Agent
	pd    *verbs.PD
	cq    *verbs.CQ
	qp    *verbs.QP
	rbuf  []byte
	rmr   *verbs.MR
	sbuf  []byte
	smr   *verbs.MR

	upd       *verbs.PD // the PD of IDs' QPs made without one (ucma_get_pd)
	stopErrs  func()    // ends the link's error reports (sendError)
	mu        sync.Mutex
	free      []int
	sent      sync.Cond // on mu: signalled when a send slot is freed
	ahs       map[netip.Addr]*verbs.AH
	listeners map[uint64]*devListen // the IB CM listener of each service ID on this device
}

// devListen is an ibcm listener shared by the IDs listening on one
// service ID through this device (cma.c: ib_cm_insert_listen).
type devListen struct {
	id   *ibcm.ID
	refs int
}

func newCMDev(c *CM, d *verbs.Device, hiTID uint32) (*cmDev, error) {
	cd := &cmDev{c: c, dev: d, addr: d.Addr(), ahs: map[netip.Addr]*verbs.AH{}, listeners: map[uint64]*devListen{}}
	cd.sent.L = &cd.mu
	var err error
	fail := func(e error) (*cmDev, error) {
		cd.close()
		return nil, fmt.Errorf("cm: device %s: %w", d.Name(), e)
	}
	if cd.pd, err = d.AllocPD(); err != nil {
		return fail(err)
	}
	if cd.cq, err = d.CreateCQ(madRecvs+madSends, nil); err != nil {
		return fail(err)
	}
	cd.rbuf = make([]byte, madRecvs*recvSlot)
	if cd.rmr, err = cd.pd.RegMR(cd.rbuf, ibv.AccessLocalWrite); err != nil {
		return fail(err)
	}
	cd.sbuf = make([]byte, madSends*wire.MADLen)
	if cd.smr, err = cd.pd.RegMR(cd.sbuf, ibv.AccessLocalWrite); err != nil {
		return fail(err)
	}
	cd.qp, err = cd.pd.CreateGSIQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cd.cq, RecvCQ: cd.cq,
		Cap: ibv.QPCap{MaxSendWR: madSends, MaxRecvWR: madRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return fail(err)
	}
	for _, m := range []struct {
		a    ibv.QPAttr
		mask ibv.AttrMask
	}{
		{ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: gsiPKeyIx, PortNum: 1, QKey: verbs.GSIQKey},
			ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrQKey},
		{ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState},
		{ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState | ibv.QPAttrSQPSN},
	} {
		if err := cd.qp.Modify(&m.a, m.mask); err != nil {
			return fail(err)
		}
	}
	for i := range madRecvs {
		if err := cd.postRecv(i); err != nil {
			return fail(err)
		}
	}
	for i := range madSends {
		cd.free = append(cd.free, i)
	}
	// The node GUID from the address, as rxe derives it from the MAC.
	a16 := cd.addr.As16()
	guid := uint64(0x0200_5eff_fe00_0000) | uint64(a16[13])<<16 | uint64(a16[14])<<8 | uint64(a16[15])
	cd.agent, err = ibcm.New(ibcm.Config{Port: cd, Clock: c.clk, GID: cd.addr, CAGUID: guid, AckDelay: ackDelay, HiTID: hiTID})
	if err != nil {
		return fail(err)
	}
	cd.stopErrs, _ = link.WatchSendErrors(d.Link(), cd.sendError)
	return cd, nil
}

// sendError hears what the network reported back about a datagram the
// device sent (link.WatchSendErrors): a port unreachable (ECONNREFUSED)
// says no RoCE NIC, and so no CM, listens at the destination, and the
// agent fails the messages waiting for an answer from it at once
// (ibcm.Agent.PortUnreachable): Connect ends with UNREACHABLE within a
// round trip instead of after the REQ's 16 tries. Softnic's own: rxe's
// UDP socket drops ICMP errors, and the kernel's CM retries until the
// timeout. Every datagram of the device goes to its peers' RoCE port, so
// the destination port is not compared. It runs on the link's reader and
// only queues, for the CM's work goroutine.
func (cd *cmDev) sendError(se link.SendError) {
	if se.Errno != syscall.ECONNREFUSED || !se.Dst.Addr().IsValid() {
		return
	}
	cd.c.queueWork(work{dev: cd, unreachable: se.Dst.Addr().Unmap()})
}

func (cd *cmDev) postRecv(slot int) error {
	_, err := cd.qp.PostRecv(ibv.RecvWR{WRID: uint64(slot), SGList: []ibv.SGE{cd.rmr.SGE(slot*recvSlot, recvSlot)}})
	return err
}

// userPD returns the device's PD for the IDs' QPs. c.mu held.
func (cd *cmDev) userPD() (*verbs.PD, error) {
	if cd.upd == nil {
		pd, err := cd.dev.AllocPD()
		if err != nil {
			return nil, err
		}
		cd.upd = pd
	}
	return cd.upd, nil
}

// close releases the device's CM resources (the device stays open).
func (cd *cmDev) close() {
	if cd.stopErrs != nil {
		cd.stopErrs()
	}
	if cd.upd != nil {
		cd.upd.Dealloc() // EBUSY while the application still has objects on it
	}
	cd.mu.Lock()
	for _, ah := range cd.ahs {
		ah.Destroy()
	}
	cd.ahs = map[netip.Addr]*verbs.AH{}
	cd.mu.Unlock()
	if cd.qp != nil {
		cd.qp.Destroy()
	}
	if cd.cq != nil {
		cd.cq.Destroy()
	}
	if cd.rmr != nil {
		cd.rmr.Dereg()
	}
	if cd.smr != nil {
		cd.smr.Dereg()
	}
	if cd.pd != nil {
		cd.pd.Dealloc()
	}
}

// SendMAD sends a MAD to dst's QP1 as a UD SEND (ibcm.Port). It runs with
// the agent's lock held and takes only the device's.
func (cd *cmDev) SendMAD(dst netip.Addr, mad []byte) error {
	cd.mu.Lock()
	defer cd.mu.Unlock()
	cd.reap()
	if len(cd.free) == 0 {
		return fmt.Errorf("cm: no MAD send slot: %w", verbs.ENOMEM)
	}
	ah := cd.ahs[dst]
	if ah == nil && len(cd.ahs) >= maxAHs {
		// Many peers (or a flood from many addresses): start the cache
		// afresh rather than grow it (a posted WR keeps its own copy).
		for a, h := range cd.ahs {
			h.Destroy()
			delete(cd.ahs, a)
		}
	}
	if ah == nil {
		var err error
		ah, err = cd.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: dst, HopLimit: 64}})
		if err != nil {
			return err
		}
		cd.ahs[dst] = ah
	}
	slot := cd.free[len(cd.free)-1]
	copy(cd.sbuf[slot*wire.MADLen:], mad[:wire.MADLen])
	_, err := cd.qp.PostSend(ibv.SendWR{WRID: sendWRID | uint64(slot), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{cd.smr.SGE(slot*wire.MADLen, wire.MADLen)}, AH: ah, RemoteQPN: 1, RemoteQKey: verbs.GSIQKey})
	if err != nil {
		return err
	}
	cd.free = cd.free[:len(cd.free)-1]
	return nil
}

const sendWRID = 1 << 32

// drainSends waits until every MAD posted on QP1 has completed, that is,
// has been handed to the link, for at most d of wall time. The kernel's
// MAD layer outlives the process that asked for a DREP, a REJ or a DREQ
// (an exiting rdma_cm application's last DREP still leaves), so Close
// lets the MADs already posted leave before it destroys QP1: without
// this a tool that answered its peer's last DREQ and exited at once lost
// that DREP (cmatose against rxe: rxe retried its DREQ until timeout).
func (cd *cmDev) drainSends(d time.Duration) {
	expired := false
	t := time.AfterFunc(d, func() {
		cd.mu.Lock()
		expired = true
		cd.sent.Broadcast()
		cd.mu.Unlock()
	})
	defer t.Stop()
	cd.mu.Lock()
	for len(cd.free) < madSends && !expired {
		cd.sent.Wait()
	}
	cd.mu.Unlock()
}

// recoverSQE takes QP1 back to RTS after a send error moved it to SQE (a
// MAD to an address the link cannot reach: no route, the interface down),
// as the kernel's MAD layer does (mad.c mad_error_handler: "Send errors
// will transition the QP to SQE - move QP to RTS"); the IB CM resends
// what it still waits an answer for on its own timers.
func (cd *cmDev) recoverSQE() {
	if cd.qp.State() == ibv.QPStateSQE {
		cd.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState)
	}
}

// reap polls send completions that the receive loop has not seen. cd.mu held.
func (cd *cmDev) reap() {}

// recvLoop reads QP1's completions: received MADs go to the agent, send
// completions free their slots.
func (cd *cmDev) recvLoop(ctx context.Context) {
	wcs := make([]ibv.WorkCompletion, 32)
	for {
		n, err := cd.cq.Wait(ctx, wcs)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, verbs.ENODEV) {
				return
			}
			continue
		}
		for _, wc := range wcs[:n] {
			if wc.WRID&sendWRID != 0 {
				cd.mu.Lock()
				cd.free = append(cd.free, int(wc.WRID&^sendWRID))
				cd.sent.Broadcast()
				cd.mu.Unlock()
				if wc.Status != ibv.WCSuccess && wc.Status != ibv.WCWRFlushErr {
					cd.recoverSQE()
				}
				continue
			}
			slot := int(wc.WRID)
			if slot < 0 || slot >= madRecvs {
				continue
			}
			if wc.Status == ibv.WCSuccess {
				b := cd.rbuf[slot*recvSlot : (slot+1)*recvSlot]
				if g, err := verbs.ParseGRH(b[:verbs.GRHLen]); err == nil && int(wc.ByteLen) >= recvSlot {
					cd.agent.Receive(b[verbs.GRHLen:], g.Src)
				}
			} else if wc.Status == ibv.WCWRFlushErr {
				return
			}
			cd.postRecv(slot)
		}
	}
}
