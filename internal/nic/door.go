package nic

// What package verbs sees of the engine.
//
// verbs imports the engine through this package alone (test/layers:
// TestVerbsThroughOneDoor): the NIC, its QPs, SRQs, WQs, AHs and XRC
// domains are nic's own types; what verbs holds or calls of the packages
// below nic is named here, in one place, so that a reader sees the whole
// of the API's reach into the engine: the memory objects of package mem,
// the completion queues of package cq, the state table's attribute masks
// of package transport and the UD receive buffer's layout of package ud.
// The aliases are for verbs' own fields and calls: its public API wraps
// each engine object in a type of its own and re-exports none of them
// (STYLE.md 14, 25).
//
// Errors need no door: every engine error carries its errno where it is
// declared (package errno), and verbs returns it as it is.

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/internal/transport/ud"
)

// The memory table and its objects (package mem): NIC.Mem's table, the
// protection domains, memory regions and memory windows it holds.
type (
	MemTable = mem.Table
	PD       = mem.PD
	MR       = mem.MR
	MW       = mem.MW
)

// The completion queues (package cq): a CQ, and a completion channel CQs
// report their notifications on.
type (
	CQ          = cq.CQ
	CompChannel = cq.Channel
)

// NewCQ makes a CQ of at least cqe entries, at most maxCQE (cq.New).
func NewCQ(cqe, maxCQE int) (*CQ, error) { return cq.New(cqe, maxCQE) }

// NewCompChannel makes a completion channel (cq.NewChannel).
func NewCompChannel() *CompChannel { return cq.NewChannel() }

// ModifyAttrs returns the attributes the cur->next transition of a QP of
// type t requires and those it allows, and whether the transition exists
// (transport.ModifyAttrs: the kernel's qp_state_table).
func ModifyAttrs(t ibv.QPType, cur, next ibv.QPState) (req, opt ibv.AttrMask, ok bool) {
	return transport.ModifyAttrs(t, cur, next)
}

// RouteHopLimit is the IP TTL / hop limit of everything the NIC sends
// (transport.RouteHopLimit).
const RouteHopLimit = transport.RouteHopLimit

// GRHLen is the size of the network-header area at the start of every UD
// receive buffer (ud.GRHLen).
const GRHLen = ud.GRHLen

// Wrapf gives an engine error context, its errno's text kept first
// (errno.Wrapf): "invalid argument: alloc MR of 0 pages".
func Wrapf(err error, format string, args ...any) error { return errno.Wrapf(err, format, args...) }

// MaxCQModCount and MaxCQModPeriod are the largest CQ moderation
// (cq.MaxModCount, cq.MaxModPeriod).
const (
	MaxCQModCount  = cq.MaxModCount
	MaxCQModPeriod = cq.MaxModPeriod
)
