package main

// #include "softnic_engine.h"
import "C"

import (
	"net/netip"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/softnic/softnic/wire"
)

// The orphan table (softnic_engine.h struct sn_orphans): for each
// established connection, the DREQ the kernel's rdma_cm would send for
// the process if it died, as a complete RoCEv2 UDP payload, which the C
// library's watcher sends once the process is gone. softnic's CM dies
// with its process; without this a peer waiting for a message would wait
// for ever for a process killed by SIGKILL, where rxe's peer gets the
// DREQ the kernel sends for it.
var (
	orphans    *C.struct_sn_orphans // guarded by cmMu
	orphanFree []int                // free slots; guarded by cmMu
)

//export sne_cm_orphans
func sne_cm_orphans(t *C.struct_sn_orphans) C.int {
	cmMu.Lock()
	defer cmMu.Unlock()
	if theCM == nil {
		return C.int(syscall.ENODEV)
	}
	if t != nil && t.magic != C.SN_ORPHAN_MAGIC {
		return einval
	}
	orphans, orphanFree = t, nil
	if t == nil {
		return 0
	}
	for i := C.SN_ORPHAN_SLOTS - 1; i >= 0; i-- {
		orphanFree = append(orphanFree, i)
	}
	putAddr(&t.src, netip.AddrPortFrom(theCM.d.dev.Addr(), nicPort()))
	return 0
}

// nicPort is the UDP port the NIC sends from and to.
func nicPort() uint16 {
	if o, _ := options(); o.Port != 0 {
		return o.Port
	}
	return wire.UDPPort
}

// keepOrphan writes e's orphan DREQ into a slot of its own, when e is
// established and the table is there. cmMu held.
func keepOrphan(e *cmID) {
	if orphans == nil || e.orphan != 0 || len(orphanFree) == 0 {
		return
	}
	from, to, mad, ok := e.id.OrphanDREQ()
	if !ok {
		return
	}
	port := nicPort()
	enc := wire.Encap{Src: from, Dst: to, SrcPort: port, DstPort: port, HopLimit: 64}
	if enc.IsIPv4() {
		enc.FragOff = wire.IPv4DF
	}
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnly, PKey: 0xffff, DestQP: 1},
		DETH: wire.DETHFields{QKey: wire.GSIQKey, SrcQP: 1}}
	var pkt [C.SN_ORPHAN_PKT]byte
	n, err := wire.Build(pkt[:], &enc, &h, mad)
	if err != nil {
		debugf("orphan DREQ: %v", err)
		return
	}
	i := orphanFree[len(orphanFree)-1]
	orphanFree = orphanFree[:len(orphanFree)-1]
	s := &orphans.slot[i]
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&s.pkt[0])), len(pkt)), pkt[:n])
	s.len = C.uint16_t(n)
	putAddr(&s.dst, netip.AddrPortFrom(to, port))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&s.state)), C.SN_ORPHAN_READY)
	e.orphan = i + 1
}

// dropOrphan frees e's slot: its connection ended, or its ID is gone.
// cmMu held.
func dropOrphan(e *cmID) {
	if e.orphan == 0 {
		return
	}
	i := e.orphan - 1
	e.orphan = 0
	if orphans == nil {
		return
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&orphans.slot[i].state)), C.SN_ORPHAN_FREE)
	orphanFree = append(orphanFree, i)
}
