package verbs_test

import (
	"fmt"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// Memory windows: b lets a read 16 bytes of its buffer through a type-1
// window (bound with QP.BindMW) and write 16 other bytes through a type-2
// window (bound with a BIND_MW work request); each window's rkey grants
// its range and rights only.
func ExamplePD_AllocMW() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := connectRC(a, b)
	copy(b.buf[256:], "readable through")

	// Type 1: ibv_bind_mw returns the new rkey at once.
	mw1, err := b.pd.AllocMW(verbs.MWType1)
	check(err)
	readKey, err := qb.BindMW(mw1, verbs.MWBind{WRID: 1, SendFlags: ibv.SendSignaled,
		BindInfo: verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr() + 256, Length: 16, Access: ibv.AccessRemoteRead}})
	check(err)
	fmt.Println("type 1 bound:", b.next().Opcode)

	// Type 2: the binder chooses the key byte of the new rkey.
	mw2, err := b.pd.AllocMW(verbs.MWType2)
	check(err)
	writeKey := verbs.IncKey(mw2.RKey())
	_, err = qb.PostSend(verbs.BindMWWR(2, ibv.SendSignaled, mw2, writeKey,
		verbs.MWBindInfo{MR: b.mr, Addr: b.mr.Addr() + 512, Length: 16, Access: ibv.AccessRemoteWrite}))
	check(err)
	fmt.Println("type 2 bound:", b.next().Opcode)

	// a reads through the first window and writes through the second.
	_, err = qa.PostSend(ibv.SendWR{Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, 16)}, RemoteAddr: b.mr.Addr() + 256, RKey: readKey})
	check(err)
	fmt.Printf("READ via type 1: %v %q\n", a.next().Status, a.buf[:16])
	n := copy(a.buf[64:], "written through")
	_, err = qa.PostSend(ibv.SendWR{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(64, n)}, RemoteAddr: b.mr.Addr() + 512, RKey: writeKey})
	check(err)
	fmt.Printf("WRITE via type 2: %v %q\n", a.next().Status, b.buf[512:512+n])

	// The read window does not grant writes: the responder NAKs, the QP fails.
	_, err = qa.PostSend(ibv.SendWR{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(64, n)}, RemoteAddr: b.mr.Addr() + 256, RKey: readKey})
	check(err)
	fmt.Println("WRITE via type 1:", a.next().Status)
	// Output:
	// type 1 bound: BIND_MW
	// type 2 bound: BIND_MW
	// READ via type 1: success "readable through"
	// WRITE via type 2: success "written through"
	// WRITE via type 1: remote access error
}
