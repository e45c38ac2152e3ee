package verbs_test

import (
	"fmt"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// Fast registration: b maps a page into a region allocated with AllocMR,
// registers it with a REG_MR work request under a new key, lets a write
// into it, then invalidates the key with LOCAL_INV, after which the key
// grants nothing.
func ExamplePD_AllocMR() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := connectRC(a, b)

	page := b.buf[4096:8192] // registered memory of b's PD
	mr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
	check(err)
	_, err = mr.MapSG([][]byte{page}, 4096) // ib_map_mr_sg
	check(err)
	oldKey := mr.RKey()
	check(mr.UpdateFastRegKey(verbs.IncKey(oldKey))) // ib_update_fast_reg_key
	_, err = qb.PostSend(mr.RegWR(1, ibv.SendSignaled, ibv.AccessLocalWrite|ibv.AccessRemoteWrite))
	check(err)
	fmt.Printf("%v: %d bytes, rkey is IncKey(old): %v\n", b.next().Opcode, mr.Len(), mr.RKey() == verbs.IncKey(oldKey))

	n := copy(a.buf, "fast")
	write := ibv.SendWR{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, n)}, RemoteAddr: mr.Addr(), RKey: mr.RKey()}
	_, err = qa.PostSend(write)
	check(err)
	fmt.Printf("WRITE: %v, page holds %q\n", a.next().Status, page[:n])

	_, err = qb.PostSend(ibv.SendWR{Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: mr.RKey()})
	check(err)
	fmt.Println(b.next().Opcode)
	_, err = qa.PostSend(write)
	check(err)
	fmt.Println("WRITE after invalidation:", a.next().Status)
	// Output:
	// REG_MR: 4096 bytes, rkey is IncKey(old): true
	// WRITE: success, page holds "fast"
	// LOCAL_INV
	// WRITE after invalidation: remote access error
}
