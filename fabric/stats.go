package fabric

import (
	"sync/atomic"
)

// Counter counts datagrams and their UDP payload bytes.
type Counter struct {
	Packets, Bytes uint64
}

// Stats are a Fabric's or an Endpoint's counters. Every datagram offered is
// counted in Sent and then ends up Delivered (placed in a receive queue) or
// in exactly one Drop counter, and each duplicate and each member's copy
// of a multicast datagram beyond the first once more, so that
// Sent+Duplicated+Replicated = Delivered+Dropped() once nothing is in
// flight.
// Datagrams still in flight or queued when the fabric or their endpoint
// closes are discarded uncounted.
type Stats struct {
	Sent      Counter // offered by WriteBatch
	Delivered Counter // placed in a receive queue, duplicates included

	DropNoRoute    Counter // no endpoint at the destination (or it closed while the datagram was delayed)
	DropQueueFull  Counter // the receiver's queue was full
	DropImpairment Counter // lost by a random Impairment
	DropFilter     Counter // dropped by a Filter
	DropOversize   Counter // longer than link.MaxDatagram or the sender's MTU (Endpoint.SetMTU)
	// DropLinkDown counts datagrams a down link lost (Endpoint.SetLinkState):
	// refused by a sender whose link is administratively down (each marked
	// ENETDOWN), sent by one without a carrier, or arriving at an endpoint
	// that is down or has no carrier.
	DropLinkDown Counter

	Duplicated Counter // extra copies made
	Replicated Counter // copies of a multicast datagram beyond the first, one a further group member
	Corrupted  Counter // datagrams with a bit flipped
	Reordered  Counter // datagrams held back for reordering
	Delayed    Counter // datagrams delivered through the delay queue
}

// Dropped returns the sum of the drop counters.
func (s Stats) Dropped() Counter {
	var c Counter
	for _, d := range []Counter{s.DropNoRoute, s.DropQueueFull, s.DropImpairment, s.DropFilter, s.DropOversize, s.DropLinkDown} {
		c.Packets += d.Packets
		c.Bytes += d.Bytes
	}
	return c
}

type counter uint8

const (
	cSent counter = iota
	cDelivered
	cNoRoute
	cQueueFull
	cImpairment
	cFilter
	cOversize
	cLinkDown
	cDuplicated
	cReplicated
	cCorrupted
	cReordered
	cDelayed
	numCounters
)

// counters are fixed atomics, one packet and one byte count per counter
// (STYLE.md 13).
type counters [numCounters]struct{ packets, bytes atomic.Uint64 }

func (c *counters) add(i counter, n int) {
	c[i].packets.Add(1)
	c[i].bytes.Add(uint64(n))
}

func (c *counters) get(i counter) Counter {
	return Counter{Packets: c[i].packets.Load(), Bytes: c[i].bytes.Load()}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Sent:           c.get(cSent),
		Delivered:      c.get(cDelivered),
		DropNoRoute:    c.get(cNoRoute),
		DropQueueFull:  c.get(cQueueFull),
		DropImpairment: c.get(cImpairment),
		DropFilter:     c.get(cFilter),
		DropOversize:   c.get(cOversize),
		DropLinkDown:   c.get(cLinkDown),
		Duplicated:     c.get(cDuplicated),
		Replicated:     c.get(cReplicated),
		Corrupted:      c.get(cCorrupted),
		Reordered:      c.get(cReordered),
		Delayed:        c.get(cDelayed),
	}
}
