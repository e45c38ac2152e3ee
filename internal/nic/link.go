package nic

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/link"
)

// linkUsers maps the links of open NICs, unwrapped (link.PcapLink), to the
// name of the NIC using them. A link carries one NIC's traffic: two NICs
// on one would share every datagram and hand out the same QPNs. Close
// removes the entry, so a closed NIC is not kept alive by it.
var linkUsers struct {
	mu sync.Mutex
	m  map[any]string // guarded by mu
}

// innerLink returns l without the wrappers that say what they wrap
// (Unwrap() Link).
func innerLink(l link.Link) link.Link {
	for {
		u, ok := l.(interface{ Unwrap() link.Link })
		if !ok {
			return l
		}
		l = u.Unwrap()
	}
}

// claimLink records that NIC name uses l, or fails with errno.Busy naming the
// NIC that already does, or ErrClosed when l was closed (NIC.Close closes
// its link). It returns the function that releases l.
func claimLink(l link.Link, name string) (release func(), err error) {
	in := innerLink(l)
	if c, ok := in.(link.LinkCloser); ok && c.Closed() {
		return nil, fmt.Errorf("%w: link %v is closed (closing a device closes its link; attach a new one)", ErrClosed, l.LocalAddr())
	}
	if !reflect.ValueOf(in).Comparable() {
		return func() {}, nil // cannot be a map key: not tracked
	}
	linkUsers.mu.Lock()
	defer linkUsers.mu.Unlock()
	if user, ok := linkUsers.m[in]; ok {
		return nil, fmt.Errorf("%w: link %v is already in use by device %s", errno.Busy, l.LocalAddr(), user)
	}
	if linkUsers.m == nil {
		linkUsers.m = make(map[any]string)
	}
	linkUsers.m[in] = name
	return func() {
		linkUsers.mu.Lock()
		delete(linkUsers.m, in)
		linkUsers.mu.Unlock()
	}, nil
}
