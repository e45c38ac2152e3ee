package mem

import (
	"fmt"
	"sort"
	"sync/atomic"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// Access-flag sets (rxe_verbs.h RXE_ACCESS_*).
const (
	// RemoteAccess is rxe's RXE_ACCESS_REMOTE.
	RemoteAccess = ibv.AccessRemoteRead | ibv.AccessRemoteWrite | ibv.AccessRemoteAtomic
	// FlushAccess is the two FLUSH placement rights (IBA A19).
	FlushAccess = ibv.AccessFlushGlobal | ibv.AccessFlushPersistent

	// SupportedMRAccess is what RegMR and RegFast accept: rxe's
	// RXE_ACCESS_SUPPORTED_MR plus ZERO_BASED (which RegMR honours by
	// starting addresses at 0) and libibverbs' HUGETLB and RELAXED_ORDERING
	// hints, which change nothing here.
	SupportedMRAccess = RemoteAccess | ibv.AccessLocalWrite | ibv.AccessMWBind |
		ibv.AccessZeroBased | ibv.AccessOnDemand | ibv.AccessHugeTLB |
		FlushAccess | ibv.AccessRelaxedOrdering
	// SupportedMWAccess is what BindMW accepts (RXE_ACCESS_SUPPORTED_MW:
	// the MR set plus ZERO_BASED).
	SupportedMWAccess = SupportedMRAccess
)

type mrState uint8

const (
	// mrInvalid: deregistered (RXE_MR_STATE_INVALID).
	mrInvalid mrState = iota
	// mrFree: a fast-registration MR not registered, or invalidated
	// (RXE_MR_STATE_FREE).
	mrFree
	// mrValid: usable (RXE_MR_STATE_VALID).
	mrValid
)

// chunk is one contiguous piece of an MR's memory at byte offset off from
// the MR's first byte.
type chunk struct {
	off uint64
	b   []byte
}

// mrView is an immutable snapshot of an MR's mutable state; lookups load
// it with one atomic load and never see a half-made change.
type mrView struct {
	pd     *PD // the MR's PD, which ReregMR may change
	key    uint32
	state  mrState
	access ibv.Access
	iova   uint64
	length uint64
	chunks []chunk // one for RegMR; one per mapped element for fast reg
}

// contains reports whether [iova, iova+n) lies inside the view
// (mr_check_range), without overflowing.
func (v *mrView) contains(iova, n uint64) bool {
	return iova >= v.iova && n <= v.length && iova-v.iova <= v.length-n
}

// slice returns the n bytes at iova, which contains has accepted; n > 0.
func (v *mrView) slice(iova, n uint64) ([]byte, error) {
	off := iova - v.iova
	c := &v.chunks[0]
	if len(v.chunks) > 1 {
		c = &v.chunks[v.chunkAt(off)]
		off -= c.off
		if n > uint64(len(c.b))-off {
			return nil, ErrDiscontiguous
		}
	}
	return c.b[off : off+n : off+n], nil
}

// chunkAt returns the index of the chunk holding byte offset off.
func (v *mrView) chunkAt(off uint64) int {
	// Largest i with chunks[i].off <= off; chunks[0].off == 0.
	return sort.Search(len(v.chunks), func(i int) bool { return v.chunks[i].off > off }) - 1
}

// appendSlices appends the pieces of [iova, iova+n) to dst.
func (v *mrView) appendSlices(dst [][]byte, iova, n uint64) [][]byte {
	off := iova - v.iova
	i := 0
	if len(v.chunks) > 1 {
		i = v.chunkAt(off)
	}
	for n > 0 {
		c := &v.chunks[i]
		o := off - c.off
		m := min(n, uint64(len(c.b))-o)
		dst = append(dst, c.b[o:o+m:o+m])
		n -= m
		off += m
		i++
	}
	return dst
}

// MR is a memory region: memory registered with RegMR, or a
// fast-registration MR from AllocMR whose memory RegFast sets.
type MR struct {
	t     *Table
	pd    *PD
	index uint32
	fast  bool
	buf   []byte // RegMR's buffer; nil for fast reg
	v     atomic.Pointer[mrView]

	nMW       int     // guarded by t.mu; windows bound to this MR (rxe mr->num_mw)
	maxPages  int     // fast reg: AllocMR's max_num_sg
	mapped    []chunk // guarded by t.mu; fast reg: MapMRSG's result
	mappedVA  uint64  // guarded by t.mu; address of the first mapped byte
	mappedLen uint64  // guarded by t.mu
	pageSize  int     // guarded by t.mu
}

// LKey returns the MR's local key. It equals RKey: rxe gives both the same
// value (rxe_mr_init).
func (mr *MR) LKey() uint32 { return mr.v.Load().key }

// RKey returns the MR's remote key (the same value as LKey).
func (mr *MR) RKey() uint32 { return mr.v.Load().key }

// PD returns the MR's protection domain.
func (mr *MR) PD() *PD { return mr.pd }

// Addr returns the IOVA of the MR's first byte: 0 for a zero-based MR; for
// a fast-reg MR, the iova of its last RegFast.
func (mr *MR) Addr() uint64 { return mr.v.Load().iova }

// Len returns the MR's length in bytes.
func (mr *MR) Len() uint64 { return mr.v.Load().length }

// Access returns the MR's access flags.
func (mr *MR) Access() ibv.Access { return mr.v.Load().access }

// Valid reports whether the MR is registered and usable (not deregistered,
// and for a fast-reg MR, registered and not invalidated).
func (mr *MR) Valid() bool { return mr.v.Load().state == mrValid }

// Fast reports whether mr came from AllocMR.
func (mr *MR) Fast() bool { return mr.fast }

// Bytes returns the registered memory of an MR from RegMR. For a fast-reg
// MR it returns the memory only when RegFast mapped it as one chunk, and
// nil otherwise; see Chunks.
func (mr *MR) Bytes() []byte {
	if !mr.fast {
		return mr.buf
	}
	v := mr.v.Load()
	if len(v.chunks) == 1 {
		return v.chunks[0].b
	}
	return nil
}

// Chunks returns the MR's memory as it lies in the IOVA space: the pieces,
// in order, whose concatenation is [Addr, Addr+Len).
func (mr *MR) Chunks() [][]byte {
	v := mr.v.Load()
	out := make([][]byte, len(v.chunks))
	for i, c := range v.chunks {
		out[i] = c.b
	}
	return out
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// checkMRAccess applies the registration access rules (ib_check_mr_access,
// ibv_reg_mr(3)): only supported flags; REMOTE_WRITE or REMOTE_ATOMIC need
// LOCAL_WRITE. FLUSH_GLOBAL and FLUSH_PERSISTENT do not need LOCAL_WRITE
// (ib_check_mr_access requires it only for remote write and atomic).
// FLUSH_PERSISTENT needs persistent memory (rxe_mr_fill_pages_from_sgt).
func (t *Table) checkMRAccess(access ibv.Access) error {
	if access&^SupportedMRAccess != 0 {
		return errAccessFlags
	}
	if access&(ibv.AccessRemoteWrite|ibv.AccessRemoteAtomic) != 0 &&
		access&ibv.AccessLocalWrite == 0 {
		return errRegAccess
	}
	if access&ibv.AccessFlushPersistent != 0 && !t.lim.PersistentMemory {
		return errPersistent
	}
	return nil
}

// newMRLocked allocates an index and a key for a new MR of pd.
func (t *Table) newMRLocked(pd *PD) (*MR, error) {
	if err := t.checkPDLocked(pd); err != nil {
		return nil, err
	}
	if t.nMR >= t.lim.MaxMR {
		return nil, errno.NoMemory
	}
	idx := allocIndexLocked(&t.mrs, MinMRIndex, MaxMRIndex, &t.mrNext)
	if idx == 0 {
		return nil, errno.NoMemory
	}
	t.nMR++
	pd.refs.Add(1)
	return &MR{t: t, pd: pd, index: idx}, nil
}

// RegMR registers buf in pd (ibv_reg_mr / ibv_reg_mr_iova, rxe_reg_user_mr)
// and returns it VALID with lkey == rkey == index<<8 | random key byte
// (rxe_mr_init).
//
// iova is the address keys see for buf[0]; when useIOVA is false it is
// buf's own address, as ibv_reg_mr passes (uintptr_t)addr. With
// AccessZeroBased the iova is 0 whatever the other arguments say.
//
// Refusals: zero-length buf (errno.Invalid; ib_umem_get refuses an empty
// page-aligned range, and a Go slice of length 0 has no address);
// unsupported flags, REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE,
// FLUSH_PERSISTENT without Limits.PersistentMemory (errno.Invalid); iova+len
// overflowing (errno.Invalid; ib_umem_get); a freed or foreign PD (errno.Invalid);
// a full table (errno.NoMemory).
//
// Unlike ib_uverbs_reg_mr, RegMR does not require iova and buf's address to
// share their offset within a 4 KiB page: softnic maps no pages, so any
// iova simply names buf[0].
func (t *Table) RegMR(pd *PD, buf []byte, iova uint64, useIOVA bool, access ibv.Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, errZeroLen
	}
	if err := t.checkMRAccess(access); err != nil {
		return nil, err
	}
	switch {
	case access&ibv.AccessZeroBased != 0:
		iova = 0
	case !useIOVA:
		iova = addrOf(buf)
	}
	if iova+uint64(len(buf)) < iova {
		return nil, errIOVAOverflow
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	mr, err := t.newMRLocked(pd)
	if err != nil {
		return nil, err
	}
	mr.buf = buf
	mr.v.Store(&mrView{
		pd:     pd,
		key:    mr.index<<8 | t.keyByteLocked(-1),
		state:  mrValid,
		access: access,
		iova:   iova,
		length: uint64(len(buf)),
		chunks: []chunk{{b: buf}},
	})
	t.mrs.storeLocked(mr.index, mr)
	return mr, nil
}

// DeregMR deregisters mr (ibv_dereg_mr, rxe_dereg_mr): its key stops
// working at once. It fails with errno.Busy while memory windows are bound to
// it ("Attempt to deregister an MR while bound to MWs"), and with
// errno.Invalid for an MR already deregistered or of another table.
func (t *Table) DeregMR(mr *MR) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkMRLocked(mr); err != nil {
		return err
	}
	if mr.nMW > 0 {
		return errno.Busy
	}
	v := *mr.v.Load()
	v.state = mrInvalid
	mr.v.Store(&v)
	t.mrs.storeLocked(mr.index, nil)
	t.nMR--
	mr.pd.refs.Add(-1)
	mr.mapped = nil
	return nil
}

// The flags of ReregMR (enum ibv_rereg_mr_flags).
const (
	ReregTranslation = 1 << 0 // IBV_REREG_MR_CHANGE_TRANSLATION: buf and iova
	ReregPD          = 1 << 1 // IBV_REREG_MR_CHANGE_PD: pd
	ReregAccess      = 1 << 2 // IBV_REREG_MR_CHANGE_ACCESS: access
	ReregFlags       = ReregTranslation | ReregPD | ReregAccess
)

// ReregMR re-registers mr (ibv_rereg_mr): with ReregTranslation its
// memory becomes buf at iova (buf's own address unless useIOVA, 0 with
// ZERO_BASED access), with ReregPD its PD becomes pd, with ReregAccess its
// access becomes access (RegMR's rules); its keys stay (rxe_rereg_user_mr
// keeps them). Nothing changes on a refusal: errno.Invalid for a
// fast-registration MR, unknown or no flags, access without
// ReregAccess, an empty buf, a dead PD or MR; errno.Busy while memory
// windows are bound to it (a window's range and PD were checked against
// the MR as it was). The new view replaces the old at once: an access
// already resolved finishes on the old memory, every later one sees the
// new.
func (t *Table) ReregMR(mr *MR, flags int, pd *PD, buf []byte, iova uint64, useIOVA bool, access ibv.Access) error {
	switch {
	case flags == 0 || flags&^ReregFlags != 0:
		return fmt.Errorf("%w: rereg flags %#x", errno.Invalid, flags)
	case access != 0 && flags&ReregAccess == 0:
		return fmt.Errorf("%w: access flags without IBV_REREG_MR_CHANGE_ACCESS", errno.Invalid)
	case flags&ReregTranslation != 0 && len(buf) == 0:
		return errZeroLen
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkMRLocked(mr); err != nil {
		return err
	}
	if mr.fast {
		return fmt.Errorf("%w: ibv_rereg_mr of a fast-registration MR", errno.Invalid)
	}
	if mr.nMW > 0 {
		return errno.Busy
	}
	old := mr.v.Load()
	v := *old
	if flags&ReregAccess != 0 {
		if err := t.checkMRAccess(access); err != nil {
			return err
		}
		v.access = access
	}
	if flags&ReregPD != 0 {
		if err := t.checkPDLocked(pd); err != nil {
			return err
		}
		v.pd = pd
	}
	if flags&(ReregTranslation|ReregAccess) != 0 {
		b := mr.buf
		switch {
		case flags&ReregTranslation != 0:
			b = buf
		case old.access&ibv.AccessZeroBased != 0:
			useIOVA = false // leaving ZERO_BASED: the buffer's address
		default:
			iova, useIOVA = old.iova, true
		}
		switch {
		case v.access&ibv.AccessZeroBased != 0:
			iova = 0
		case !useIOVA:
			iova = addrOf(b)
		}
		if iova+uint64(len(b)) < iova {
			return errIOVAOverflow
		}
		mr.buf = b
		v.iova, v.length, v.chunks = iova, uint64(len(b)), []chunk{{b: b}}
	}
	if v.pd != mr.pd {
		v.pd.refs.Add(1)
		mr.pd.refs.Add(-1)
		mr.pd = v.pd
	}
	mr.v.Store(&v)
	return nil
}

func (t *Table) checkMRLocked(mr *MR) error {
	if mr == nil || mr.t != t {
		return errForeignMR
	}
	if t.mrs.load(mr.index) != mr {
		return errDeadMR
	}
	return nil
}

// MRByKey returns the live MR whose current key is key, in any state but
// deregistered: the requester resolves a REG_MR or BIND_MW work request's
// MR key with it.
func (t *Table) MRByKey(key uint32) (*MR, error) {
	i := key >> 8
	if i < MinMRIndex || i > MaxMRIndex {
		return nil, errNoIndex
	}
	mr := t.mrs.load(i)
	if mr == nil {
		return nil, errNoIndex
	}
	if mr.v.Load().key != key {
		return nil, errKeyByte
	}
	return mr, nil
}

// AllocMR allocates a fast-registration MR of pd able to map maxPages
// pages (ib_alloc_mr(IB_MR_TYPE_MEM_REG), rxe_mr_init_fast). It starts
// FREE: its key works for nothing until MapMRSG and RegFast. maxPages must
// be 1..Limits.MaxFastRegPages (errno.Invalid).
func (t *Table) AllocMR(pd *PD, maxPages int) (*MR, error) {
	if maxPages <= 0 || maxPages > t.lim.MaxFastRegPages {
		return nil, errno.Invalid
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	mr, err := t.newMRLocked(pd)
	if err != nil {
		return nil, err
	}
	mr.fast = true
	mr.maxPages = maxPages
	mr.v.Store(&mrView{
		pd:     pd,
		key:    mr.index<<8 | t.keyByteLocked(-1),
		state:  mrFree,
		access: RemoteAccess, // rxe_mr_init_fast: "always allow remote access for FMRs"
	})
	t.mrs.storeLocked(mr.index, mr)
	return mr, nil
}

// MinPageSize and MaxPageSize bound MapMRSG's page size (rxe's
// page_size_cap 0xfffff000: 4 KiB .. 2 GiB powers of two).
const (
	MinPageSize = 1 << 12
	MaxPageSize = 1 << 31
)

// MapMRSG maps memory into the fast-reg MR mr, the way ib_map_mr_sg /
// ib_sg_to_pages build a page list, treating each element's Go address as
// its DMA address:
//
//   - the first element may start anywhere inside a page;
//   - every later element must start on a page boundary, and the element
//     before it must end on one — unless the later element starts exactly
//     where the earlier ended in memory, in which case it continues it;
//   - the last element may end anywhere.
//
// MapMRSG maps the longest prefix of sg that obeys these rules and fits in
// the MR's maxPages pages, and returns how many elements it mapped (the
// kernel's return value; fewer than len(sg) means the element at n broke a
// rule or did not fit). It never maps part of an element: MapMRSGAt does.
// A zero-length element stops the mapping. The mapped IOVA becomes the
// first element's address and the mapped length the sum of the mapped
// elements; RegFast may name another iova. Each element stays its own
// chunk: in the IOVA space the elements follow each other without gaps.
//
// Errors: not a fast-reg MR, a page size not a power of two in
// [MinPageSize, MaxPageSize], or a zero-length first element (errno.Invalid);
// the MR VALID (errno.Busy: invalidate it first); the first element alone
// needs more than maxPages pages (errno.NoMemory). An empty sg maps nothing
// and returns 0, nil.
func (t *Table) MapMRSG(mr *MR, sg [][]byte, pageSize int) (int, error) {
	n, _, err := t.mapMRSG(mr, sg, 0, pageSize, false)
	return n, err
}

// MapMRSGAt is MapMRSG with ib_map_mr_sg's sg_offset: the mapping starts
// off bytes into the first element, and an element that does not fit the
// MR's pages is mapped in part, as ib_sg_to_pages maps it: up to the start
// of the last page it set (the kernel's prev_addr), never before where the
// element's mapping began. It returns the number of whole elements mapped
// and where the mapping stopped: 0 when every mapped element was whole,
// else the byte offset into element n at which the next call should
// start. Errors are MapMRSG's, plus errno.Invalid for an off beyond the
// first element; errno.NoMemory only when not one byte fits.
func (t *Table) MapMRSGAt(mr *MR, sg [][]byte, off uint64, pageSize int) (n int, stop uint64, err error) {
	return t.mapMRSG(mr, sg, off, pageSize, true)
}

func (t *Table) mapMRSG(mr *MR, sg [][]byte, off uint64, pageSize int, partial bool) (int, uint64, error) {
	if pageSize < MinPageSize || pageSize > MaxPageSize || pageSize&(pageSize-1) != 0 {
		return 0, 0, errno.Invalid
	}
	if len(sg) > 0 && off > uint64(len(sg[0])) {
		return 0, 0, fmt.Errorf("%w: sg_offset %d beyond the first element's %d bytes", errno.Invalid, off, len(sg[0]))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkMRLocked(mr); err != nil {
		return 0, 0, err
	}
	if !mr.fast {
		return 0, 0, errNotFast
	}
	if mr.v.Load().state == mrValid {
		return 0, 0, errno.Busy
	}
	if len(sg) > 0 && uint64(len(sg[0])) == off {
		return 0, 0, errZeroLen
	}
	ps := uint64(pageSize)
	mask := ^(ps - 1)
	var (
		chunks  []chunk
		total   uint64
		pages   int
		lastEnd uint64
		lastOff uint64
		n       int
		stop    uint64
	)
	for i, b := range sg {
		if i > 0 {
			off = 0
		}
		b = b[off:]
		if len(b) == 0 {
			break
		}
		start := addrOf(b)
		end := start + uint64(len(b))
		pageAddr := start & mask
		if i > 0 && (lastOff != 0 || pageAddr != start) {
			if lastEnd != start {
				break // a gap: stop mapping
			}
			pageAddr += ps // continues the last page
		}
		need := 0
		if pageAddr < end {
			need = int((end - pageAddr + ps - 1) / ps)
		}
		if pages+need > mr.maxPages {
			// ib_sg_to_pages: the pages that fit are set; the element's
			// mapping ends at the start of the last one set (prev_addr),
			// or where it began when none was.
			fit := mr.maxPages - pages
			prev := start
			if fit > 0 {
				prev = max(start, pageAddr+uint64(fit-1)*ps)
			}
			if !partial || prev == start {
				if i == 0 {
					return 0, 0, errno.NoMemory
				}
				break
			}
			part := prev - start
			chunks = append(chunks, chunk{off: total, b: b[:part]})
			total += part
			stop = off + part
			break
		}
		pages += need
		chunks = append(chunks, chunk{off: total, b: b})
		total += uint64(len(b))
		lastEnd = end
		lastOff = end &^ mask
		n++
	}
	mr.mapped = chunks
	mr.mappedLen = total
	mr.pageSize = pageSize
	mr.mappedVA = 0
	if len(chunks) > 0 {
		mr.mappedVA = addrOf(chunks[0].b)
	}
	return n, stop, nil
}

// Mapped returns what the last MapMRSG mapped: the IOVA of the first byte
// (the first element's address) and the length.
func (mr *MR) Mapped() (iova, length uint64) {
	mr.t.mu.Lock()
	defer mr.t.mu.Unlock()
	return mr.mappedVA, mr.mappedLen
}

// RegFast executes a REG_MR work request posted on a QP of pd
// (rxe_reg_fast_mr): the fast-reg MR mr, FREE, becomes VALID with key
// newKey, access and the first length bytes of its mapped memory at iova.
//
// Refusals: mr not fast-reg, deregistered or foreign (errno.Invalid); mr not
// FREE (errno.Busy; "not free"); pd not mr's PD (ErrWrongPD; "qp->pd and
// mr->pd don't match"); newKey changing more than the low 8 bits
// (errno.Invalid; "has wrong index"); access failing RegMR's rules, or
// ZERO_BASED (errno.Invalid); nothing mapped or length 0 (errno.Invalid); length
// beyond the mapped length (ErrRange); iova+length overflowing
// (errno.Invalid). rxe applies no access rule to REG_MR; softnic applies
// ibv_reg_mr's, since IBA's rule for writable regions is the same.
func (t *Table) RegFast(pd *PD, mr *MR, newKey uint32, iova uint64, length uint64, access ibv.Access) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkMRLocked(mr); err != nil {
		return err
	}
	if !mr.fast {
		return errNotFast
	}
	old := mr.v.Load()
	if old.state != mrFree {
		return errno.Busy
	}
	if pd != mr.pd {
		return errPD
	}
	if newKey>>8 != mr.index {
		return errno.Invalid
	}
	if err := t.checkMRAccess(access); err != nil {
		return err
	}
	if access&ibv.AccessZeroBased != 0 {
		return errAccessFlags
	}
	if length == 0 || mr.mappedLen == 0 {
		return errZeroLen
	}
	if length > mr.mappedLen {
		return errOutOfRegion
	}
	if iova+length < iova {
		return errIOVAOverflow
	}
	var chunks []chunk
	for _, c := range mr.mapped {
		if c.off >= length {
			break
		}
		if end := c.off + uint64(len(c.b)); end > length {
			c.b = c.b[:length-c.off]
		}
		chunks = append(chunks, c)
	}
	mr.v.Store(&mrView{
		pd:     mr.pd,
		key:    newKey,
		state:  mrValid,
		access: access,
		iova:   iova,
		length: length,
		chunks: chunks,
	})
	return nil
}

// Owns reports whether mr was made by t (ib_reg_wr naming another
// device's MR is a caller's mistake the verbs layer refuses at post).
func (t *Table) Owns(mr *MR) bool { return mr != nil && mr.t == t }
