package mem

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/softnic/softnic/internal/errno"
)

// Key layout and index ranges (rxe_mr_init, rxe_param.h): a key is
// index<<8 | keyByte; MR indices are 1..2^19 and MW indices 2^19+1..2^20,
// so the index alone tells an MR key from an MW key (rkey_is_mw).
const (
	KeyByteMask = 0xff

	MinMRIndex = 1
	MaxMRIndex = 1 << 19
	MinMWIndex = 1<<19 + 1
	MaxMWIndex = 1 << 20

	// DefaultMaxPD, DefaultMaxMR, DefaultMaxMW and DefaultMaxFastRegPages
	// are rxe's newest limits (rxe_param.h; facts §1): max_pd 1<<20,
	// max_mr and max_mw 2^19-1, max_fast_reg_page_list_len 512.
	DefaultMaxPD           = 1 << 20
	DefaultMaxMR           = MaxMRIndex - MinMRIndex
	DefaultMaxMW           = MaxMWIndex - MinMWIndex
	DefaultMaxFastRegPages = 512
)

// IsMWKey reports whether key's index is in the memory-window range
// (rxe_verbs.h rkey_is_mw).
func IsMWKey(key uint32) bool {
	i := key >> 8
	return i >= MinMWIndex && i <= MaxMWIndex
}

// Limits sizes a Table. Zero fields take rxe's defaults; larger values are
// clamped to what the key space holds.
type Limits struct {
	MaxPD, MaxMR, MaxMW int
	// MaxFastRegPages bounds AllocMR's maxPages (max_fast_reg_page_list_len).
	MaxFastRegPages int
	// KeySeed seeds the table's key-byte generator, so tests can reproduce
	// keys; 0 picks a random seed. rxe draws key bytes with
	// get_random_bytes (rxe_get_next_key).
	KeySeed uint64
	// PersistentMemory lets MRs be registered with FLUSH_PERSISTENT. rxe
	// refuses that flag unless every page is pmem (rxe_mr_fill_pages_from_sgt
	// "Page can't be persistent"); ordinary Go memory is not, so the
	// default refuses it too.
	PersistentMemory bool
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 || *v > d {
			*v = d
		}
	}
	def(&l.MaxPD, DefaultMaxPD)
	def(&l.MaxMR, DefaultMaxMR)
	def(&l.MaxMW, DefaultMaxMW)
	if l.MaxFastRegPages <= 0 {
		l.MaxFastRegPages = DefaultMaxFastRegPages
	}
	return l
}

// Table is one NIC's protection domains, memory regions and memory
// windows, with their key tables and access checks.
//
// Lookups (Local, Remote, their V variants, Flush) take no lock and
// allocate nothing: keys index a two-level array of atomic pointers, and
// every MR and MW publishes its state as an immutable snapshot behind an
// atomic pointer, replaced whole by registration, binding and
// invalidation. Those control operations serialize on one mutex.
// A Table is safe for concurrent use.
type Table struct {
	lim Limits

	mu     sync.Mutex
	rng    *rand.Rand     // guarded by mu
	pds    map[uint32]*PD // guarded by mu
	pdNext uint32         // guarded by mu; cyclic handle cursor
	nMR    int            // guarded by mu
	nMW    int            // guarded by mu
	mrNext uint32         // guarded by mu; cyclic index cursor
	mwNext uint32         // guarded by mu; cyclic index cursor
	mrs    slots[MR]      // written under mu, read lock-free
	mws    slots[MW]      // written under mu, read lock-free

	// atomicMu serializes CompareSwap, FetchAdd and AtomicWrite, like
	// rxe's atomic_ops_lock (rxe_mr.c).
	atomicMu sync.Mutex
}

// NewTable returns an empty table sized by lim.
func NewTable(lim Limits) *Table {
	lim = lim.withDefaults()
	seed := lim.KeySeed
	if seed == 0 {
		seed = rand.Uint64() | 1
	}
	return &Table{
		lim:    lim,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		pds:    make(map[uint32]*PD),
		pdNext: 1,
		mrNext: MinMRIndex,
		mwNext: MinMWIndex,
	}
}

// Limits returns the table's effective limits (defaults filled in).
func (t *Table) Limits() Limits { return t.lim }

// keyByteLocked returns a random key byte different from last; last < 0
// means any byte will do (rxe_get_next_key).
func (t *Table) keyByteLocked(last int) uint32 {
	for {
		k := uint32(t.rng.UintN(256))
		if int(k) != last {
			return k
		}
	}
}

// slots is a lock-free index → object map for indices 0..2^20: a fixed
// directory of lazily allocated chunks of atomic pointers. A load is two
// atomic loads; stores happen under Table.mu.
type slots[T any] struct {
	dir [MaxMWIndex>>slotBits + 1]atomic.Pointer[[1 << slotBits]atomic.Pointer[T]]
}

const slotBits = 12

func (s *slots[T]) load(i uint32) *T {
	c := s.dir[i>>slotBits].Load()
	if c == nil {
		return nil
	}
	return c[i&(1<<slotBits-1)].Load()
}

func (s *slots[T]) storeLocked(i uint32, v *T) {
	c := s.dir[i>>slotBits].Load()
	if c == nil {
		if v == nil {
			return
		}
		c = new([1 << slotBits]atomic.Pointer[T])
		s.dir[i>>slotBits].Store(c)
	}
	c[i&(1<<slotBits-1)].Store(v)
}

// allocIndexLocked finds a free index in [lo, hi], starting at *next and
// wrapping, like rxe_pool's xa_alloc_cyclic: a freed index is reused as
// late as possible, so a stale key rarely meets a new object. The caller
// has checked that the table is not full.
func allocIndexLocked[T any](s *slots[T], lo, hi uint32, next *uint32) uint32 {
	i := *next
	for range hi - lo + 1 {
		if i < lo || i > hi {
			i = lo
		}
		if s.load(i) == nil {
			*next = i + 1
			return i
		}
		i++
	}
	return 0
}

// PD is a protection domain (ibv_alloc_pd). QPs, SRQs and AHs hold it with
// Ref; MRs and MWs hold it implicitly.
type PD struct {
	t      *Table
	handle uint32
	refs   atomic.Int64
	dead   bool // guarded by t.mu
}

// Handle returns the PD's number (unique among the table's live PDs).
func (pd *PD) Handle() uint32 { return pd.handle }

// Ref records one more user of the PD (a QP, SRQ or AH); DeallocPD fails
// with errno.Busy until each Ref is matched by Unref. Taking a Ref on a PD
// that DeallocPD has already freed is a caller bug that goes undetected.
func (pd *PD) Ref() { pd.refs.Add(1) }

// Unref drops a reference taken with Ref. It panics if the count would go
// negative.
func (pd *PD) Unref() {
	if pd.refs.Add(-1) < 0 {
		panic("mem: PD.Unref without Ref")
	}
}

// AllocPD allocates a protection domain (rxe_alloc_pd). It fails with
// errno.NoMemory when MaxPD PDs exist.
func (t *Table) AllocPD() (*PD, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pds) >= t.lim.MaxPD {
		return nil, errno.NoMemory
	}
	h := t.pdNext
	for {
		if h == 0 || h > uint32(t.lim.MaxPD) {
			h = 1
		}
		if t.pds[h] == nil {
			break
		}
		h++
	}
	t.pdNext = h + 1
	pd := &PD{t: t, handle: h}
	t.pds[h] = pd
	return pd, nil
}

// DeallocPD frees pd. It fails with errno.Busy while MRs or MWs of pd exist
// or Ref holders remain (ib_dealloc_pd requires usecnt == 0; uverbs
// returns EBUSY), and with errno.Invalid for a PD already freed or of another
// table.
func (t *Table) DeallocPD(pd *PD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkPDLocked(pd); err != nil {
		return err
	}
	if pd.refs.Load() != 0 {
		return errno.Busy
	}
	pd.dead = true
	delete(t.pds, pd.handle)
	return nil
}

func (t *Table) checkPDLocked(pd *PD) error {
	if pd == nil || pd.t != t {
		return errNilPD
	}
	if pd.dead {
		return errDeadPD
	}
	return nil
}
