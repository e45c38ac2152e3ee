package transport

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

var allQPTypes = []QPType{QPTypeRC, QPTypeUC, QPTypeUD, QPTypeRawPacket, QPTypeXRCSend, QPTypeXRCRecv}

var allStates = []QPState{QPStateReset, QPStateInit, QPStateRTR, QPStateRTS, QPStateSQD, QPStateSQE, QPStateErr}

// legalPairs lists the (cur, next) pairs of the kernel's qp_state_table
// (drivers/infiniband/core/verbs.c), written out independently of it.
var legalPairs = map[[2]QPState]bool{
	{QPStateReset, QPStateReset}: true,
	{QPStateReset, QPStateInit}:  true,
	{QPStateInit, QPStateReset}:  true,
	{QPStateInit, QPStateErr}:    true,
	{QPStateInit, QPStateInit}:   true,
	{QPStateInit, QPStateRTR}:    true,
	{QPStateRTR, QPStateReset}:   true,
	{QPStateRTR, QPStateErr}:     true,
	{QPStateRTR, QPStateRTS}:     true,
	{QPStateRTS, QPStateReset}:   true,
	{QPStateRTS, QPStateErr}:     true,
	{QPStateRTS, QPStateRTS}:     true,
	{QPStateRTS, QPStateSQD}:     true,
	{QPStateSQD, QPStateReset}:   true,
	{QPStateSQD, QPStateErr}:     true,
	{QPStateSQD, QPStateRTS}:     true,
	{QPStateSQD, QPStateSQD}:     true,
	{QPStateSQE, QPStateReset}:   true,
	{QPStateSQE, QPStateErr}:     true,
	{QPStateSQE, QPStateRTS}:     true,
	{QPStateErr, QPStateReset}:   true,
	{QPStateErr, QPStateErr}:     true,
}

// allAttrBits are the bits of enum ibv_qp_attr_mask.
func allAttrBits() []AttrMask {
	var b []AttrMask
	for i := 0; i <= 25; i++ {
		b = append(b, AttrMask(1)<<i)
	}
	return b
}

func eachBit(m AttrMask) []AttrMask {
	var b []AttrMask
	for _, bit := range allAttrBits() {
		if m&bit != 0 {
			b = append(b, bit)
		}
	}
	return b
}

// TestCheckModifyEveryTransition walks every (type, cur, next) triple:
// legal ones pass with exactly the required mask and with each optional
// attribute added, fail naming each required attribute removed and each
// disallowed attribute added; illegal ones always fail.
func TestCheckModifyEveryTransition(t *testing.T) {
	for _, typ := range allQPTypes {
		for _, cur := range allStates {
			for _, next := range allStates {
				name := fmt.Sprintf("%v/%v->%v", typ, cur, next)
				req, opt, ok := ModifyAttrs(typ, cur, next)
				if want := legalPairs[[2]QPState{cur, next}]; ok != want {
					t.Errorf("%s: ModifyAttrs legal = %v, want %v", name, ok, want)
					continue
				}
				if !ok {
					for _, mask := range []AttrMask{AttrState, AttrState | ^AttrMask(0)>>6} {
						err := CheckModify(typ, cur, next, mask)
						if !errors.Is(err, ErrInvalidTransition) || !errors.Is(err, ErrInvalidModify) {
							t.Errorf("%s mask %v: got %v, want ErrInvalidTransition", name, mask, err)
						}
					}
					continue
				}
				if req&opt != 0 {
					t.Errorf("%s: required %v and optional %v overlap", name, req, opt)
				}
				base := AttrState | req
				if err := CheckModify(typ, cur, next, base); err != nil {
					t.Errorf("%s: required mask %v: got %v, want nil", name, base, err)
				}
				if cur == next {
					// A modify without IBV_QP_STATE keeps the state and uses cur->cur.
					if err := CheckModify(typ, cur, next, req); err != nil {
						t.Errorf("%s: without IBV_QP_STATE: got %v, want nil", name, err)
					}
				}
				if err := CheckModify(typ, cur, next, base|opt); err != nil {
					t.Errorf("%s: required+all optional %v: got %v, want nil", name, base|opt, err)
				}
				for _, bit := range eachBit(opt) {
					if err := CheckModify(typ, cur, next, base|bit); err != nil {
						t.Errorf("%s: required+%v: got %v, want nil", name, bit, err)
					}
				}
				for _, bit := range eachBit(req) {
					err := CheckModify(typ, cur, next, base&^bit)
					if !errors.Is(err, ErrMissingAttr) {
						t.Errorf("%s: without %v: got %v, want ErrMissingAttr", name, bit, err)
						continue
					}
					var me *ModifyError
					if !errors.As(err, &me) || me.Attr != bit {
						t.Errorf("%s: without %v: error attr %v, want %v", name, bit, me.Attr, bit)
					}
					if !strings.Contains(err.Error(), "missing "+bit.String()) {
						t.Errorf("%s: without %v: message %q does not name it", name, bit, err)
					}
				}
				for _, bit := range eachBit(^(req | opt | AttrState)) {
					err := CheckModify(typ, cur, next, base|bit)
					if !errors.Is(err, ErrExtraAttr) {
						t.Errorf("%s: with %v: got %v, want ErrExtraAttr", name, bit, err)
						continue
					}
					if !strings.Contains(err.Error(), bit.String()+" not allowed") {
						t.Errorf("%s: with %v: message %q does not name it", name, bit, err)
					}
				}
			}
		}
	}
}

// TestCheckModifyKernelMasks checks the transitions with required
// attributes against a second transcription of the kernel's table.
func TestCheckModifyKernelMasks(t *testing.T) {
	const (
		pkey = AttrPKeyIndex
		port = AttrPort
		acc  = AttrAccessFlags
		qkey = AttrQKey
	)
	tests := []struct {
		typ      QPType
		cur, nxt QPState
		req, opt AttrMask
	}{
		{QPTypeRC, QPStateReset, QPStateInit, pkey | port | acc, 0},
		{QPTypeUC, QPStateReset, QPStateInit, pkey | port | acc, 0},
		{QPTypeUD, QPStateReset, QPStateInit, pkey | port | qkey, 0},
		{QPTypeRawPacket, QPStateReset, QPStateInit, port, 0},
		{QPTypeXRCSend, QPStateReset, QPStateInit, pkey | port | acc, 0},
		{QPTypeXRCRecv, QPStateReset, QPStateInit, pkey | port | acc, 0},
		{QPTypeRC, QPStateInit, QPStateInit, 0, pkey | port | acc},
		{QPTypeUD, QPStateInit, QPStateInit, 0, pkey | port | qkey},
		{QPTypeRawPacket, QPStateInit, QPStateInit, 0, 0},
		{QPTypeRC, QPStateInit, QPStateRTR,
			AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
			AttrAltPath | acc | pkey},
		{QPTypeUC, QPStateInit, QPStateRTR, AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN, AttrAltPath | acc | pkey},
		{QPTypeUD, QPStateInit, QPStateRTR, 0, pkey | qkey},
		{QPTypeXRCSend, QPStateInit, QPStateRTR, AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN, AttrAltPath | acc | pkey},
		{QPTypeXRCRecv, QPStateInit, QPStateRTR,
			AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
			AttrAltPath | acc | pkey},
		{QPTypeRC, QPStateRTR, QPStateRTS,
			AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic,
			AttrCurState | AttrAltPath | acc | AttrMinRNRTimer | AttrPathMigState},
		{QPTypeUC, QPStateRTR, QPStateRTS, AttrSQPSN, AttrCurState | AttrAltPath | acc | AttrPathMigState},
		{QPTypeUD, QPStateRTR, QPStateRTS, AttrSQPSN, AttrCurState | qkey},
		{QPTypeRawPacket, QPStateRTR, QPStateRTS, 0, AttrRateLimit},
		{QPTypeXRCRecv, QPStateRTR, QPStateRTS, AttrTimeout | AttrSQPSN,
			AttrCurState | AttrAltPath | acc | AttrMinRNRTimer | AttrPathMigState},
		{QPTypeRC, QPStateRTS, QPStateRTS, 0, AttrCurState | acc | AttrAltPath | AttrPathMigState | AttrMinRNRTimer},
		{QPTypeRawPacket, QPStateRTS, QPStateRTS, 0, AttrRateLimit},
		{QPTypeRC, QPStateRTS, QPStateSQD, 0, AttrEnSQDAsyncNotify},
		{QPTypeRawPacket, QPStateRTS, QPStateSQD, 0, 0},
		{QPTypeUD, QPStateSQD, QPStateSQD, 0, pkey | qkey},
		{QPTypeRC, QPStateSQD, QPStateSQD, 0,
			port | AttrAV | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic |
				AttrAltPath | acc | pkey | AttrMinRNRTimer | AttrPathMigState},
		{QPTypeUD, QPStateSQE, QPStateRTS, 0, AttrCurState | qkey},
		{QPTypeUC, QPStateSQE, QPStateRTS, 0, AttrCurState | acc},
		{QPTypeRC, QPStateSQE, QPStateRTS, 0, 0},
		{QPTypeRC, QPStateRTS, QPStateErr, 0, 0},
		{QPTypeRC, QPStateErr, QPStateReset, 0, 0},
	}
	for _, tt := range tests {
		req, opt, ok := ModifyAttrs(tt.typ, tt.cur, tt.nxt)
		if !ok || req != tt.req || opt != tt.opt {
			t.Errorf("%v %v->%v: got req %v opt %v ok %v, want req %v opt %v",
				tt.typ, tt.cur, tt.nxt, req, opt, ok, tt.req, tt.opt)
		}
	}
}

func TestCheckModifyRefusals(t *testing.T) {
	rcRTR := AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	tests := []struct {
		name     string
		typ      QPType
		cur, nxt QPState
		mask     AttrMask
		kind     error
	}{
		{"RESET->RTS", QPTypeRC, QPStateReset, QPStateRTS, AttrState, ErrInvalidTransition},
		{"INIT->RTS", QPTypeRC, QPStateInit, QPStateRTS, AttrState | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic, ErrInvalidTransition},
		{"RTR->INIT", QPTypeRC, QPStateRTR, QPStateInit, AttrState, ErrInvalidTransition},
		{"SQE->RTR", QPTypeUD, QPStateSQE, QPStateRTR, AttrState, ErrInvalidTransition},
		{"ERR->RTS", QPTypeRC, QPStateErr, QPStateRTS, AttrState, ErrInvalidTransition},
		{"ERR->INIT", QPTypeUD, QPStateErr, QPStateInit, AttrState | AttrPKeyIndex | AttrPort | AttrQKey, ErrInvalidTransition},
		{"RESET->ERR (not in the kernel table)", QPTypeRC, QPStateReset, QPStateErr, AttrState, ErrInvalidTransition},
		{"RTS->SQE (only the QP enters SQE)", QPTypeUD, QPStateRTS, QPStateSQE, AttrState, ErrInvalidTransition},
		{"RTR->RTR without IBV_QP_STATE", QPTypeRC, QPStateRTR, QPStateRTR, AttrMinRNRTimer, ErrInvalidTransition},
		{"SQE->SQE", QPTypeUD, QPStateSQE, QPStateSQE, 0, ErrInvalidTransition},
		{"state change without IBV_QP_STATE", QPTypeRC, QPStateRTS, QPStateErr, 0, ErrInvalidTransition},
		{"unknown type", QPType(5), QPStateReset, QPStateReset, AttrState, ErrInvalidTransition},
		{"cur out of range", QPTypeRC, QPStateUnknown, QPStateReset, AttrState, ErrInvalidTransition},
		{"next out of range", QPTypeRC, QPStateReset, QPState(9), AttrState, ErrInvalidTransition},
		{"CUR_STATE from INIT", QPTypeRC, QPStateInit, QPStateRTR, rcRTR | AttrCurState, ErrExtraAttr},
		{"CUR_STATE to ERR", QPTypeRC, QPStateRTS, QPStateErr, AttrState | AttrCurState, ErrExtraAttr},
		{"IBV_QP_CAP never allowed", QPTypeRC, QPStateRTS, QPStateRTS, AttrCap, ErrExtraAttr},
		{"RATE_LIMIT on RC", QPTypeRC, QPStateRTS, QPStateRTS, AttrState | AttrRateLimit, ErrExtraAttr},
		{"QKEY on RC", QPTypeRC, QPStateReset, QPStateInit, AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags | AttrQKey, ErrExtraAttr},
		{"ACCESS on UD", QPTypeUD, QPStateReset, QPStateInit, AttrState | AttrPKeyIndex | AttrPort | AttrQKey | AttrAccessFlags, ErrExtraAttr},
		{"RC INIT->RTR without RQ_PSN", QPTypeRC, QPStateInit, QPStateRTR, rcRTR &^ AttrRQPSN, ErrMissingAttr},
		{"UD RTR->RTS without SQ_PSN", QPTypeUD, QPStateRTR, QPStateRTS, AttrState, ErrMissingAttr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckModify(tt.typ, tt.cur, tt.nxt, tt.mask)
			if !errors.Is(err, tt.kind) || !errors.Is(err, ErrInvalidModify) {
				t.Fatalf("got %v, want %v", err, tt.kind)
			}
		})
	}
}

func TestCheckModifyMessages(t *testing.T) {
	tests := []struct {
		typ      QPType
		cur, nxt QPState
		mask     AttrMask
		want     string
	}{
		{QPTypeRC, QPStateInit, QPStateRTR,
			AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
			"invalid QP modify: INIT->RTR for RC requires IBV_QP_AV|IBV_QP_PATH_MTU|IBV_QP_RQ_PSN|" +
				"IBV_QP_MIN_RNR_TIMER|IBV_QP_MAX_DEST_RD_ATOMIC|IBV_QP_DEST_QPN, missing IBV_QP_RQ_PSN"},
		{QPTypeUD, QPStateRTS, QPStateRTS, AttrPathMTU,
			"invalid QP modify: RTS->RTS for UD allows only IBV_QP_STATE|IBV_QP_CUR_STATE|IBV_QP_QKEY, " +
				"IBV_QP_PATH_MTU not allowed"},
		{QPTypeRC, QPStateRTS, QPStateErr, AttrState | AttrQKey,
			"invalid QP modify: RTS->ERR for RC allows only IBV_QP_STATE, IBV_QP_QKEY not allowed"},
		{QPTypeRC, QPStateReset, QPStateRTS, AttrState,
			"invalid QP modify: RESET->RTS for RC is not a legal transition"},
	}
	for _, tt := range tests {
		err := CheckModify(tt.typ, tt.cur, tt.nxt, tt.mask)
		if err == nil || err.Error() != tt.want {
			t.Errorf("got %q\nwant %q", err, tt.want)
		}
	}
}

func TestAttrMaskString(t *testing.T) {
	tests := []struct {
		m    AttrMask
		want string
	}{
		{0, "0"},
		{AttrState, "IBV_QP_STATE"},
		{AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags, "IBV_QP_STATE|IBV_QP_ACCESS_FLAGS|IBV_QP_PKEY_INDEX|IBV_QP_PORT"},
		{AttrDestQPN | AttrRateLimit, "IBV_QP_DEST_QPN|IBV_QP_RATE_LIMIT"},
		{1 << 22, "IBV_QP_RESERVED2"},
		{AttrCap | 1<<30, "IBV_QP_CAP|0x40000000"},
		{1 << 31, "0x80000000"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("AttrMask(%#x).String() = %q, want %q", uint32(tt.m), got, tt.want)
		}
	}
}

var testLimits = Limits{
	MaxQPRdAtom: 16, MaxQPInitRdAtom: 8, MaxMTU: MTU4096, PortCount: 1, PKeyTableLen: 1,
	MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSGE: 32, MaxInline: 512, GIDTableLen: 4,
}

func goodAttr() QPAttr {
	return QPAttr{
		State: QPStateRTR, CurState: QPStateInit, PathMTU: MTU1024, QKey: 0x11111111,
		RQPSN: 0xffffff, SQPSN: 0xabcdef, DestQPN: 0xffffff, PKeyIndex: 0, MaxRdAtomic: 8,
		MaxDestRdAtomic: 16, MinRNRTimer: 31, PortNum: 1, Timeout: 31, RetryCnt: 7, RNRRetry: 7,
		PathMigState: 2,
		Cap:          QPCap{MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSendSGE: 32, MaxRecvSGE: 32, MaxInlineData: 512},
		AHAttr: AHAttr{
			IsGlobal: true, PortNum: 1,
			GRH: GRH{DGID: netip.MustParseAddr("::ffff:192.0.2.1"), SGIDIndex: 3, HopLimit: 64},
		},
	}
}

const allValueAttrs = AttrState | AttrCurState | AttrPathMTU | AttrQKey | AttrRQPSN | AttrSQPSN |
	AttrDestQPN | AttrPKeyIndex | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic | AttrMinRNRTimer | AttrPort |
	AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrPathMigState | AttrCap | AttrAV | AttrAccessFlags |
	AttrEnSQDAsyncNotify | AttrRateLimit

func TestCheckAttrValues(t *testing.T) {
	a := goodAttr()
	if err := CheckAttrValues(QPTypeRC, QPStateInit, &a, allValueAttrs, testLimits); err != nil {
		t.Fatalf("good attributes: %v", err)
	}
	tests := []struct {
		name string
		typ  QPType
		mask AttrMask
		mod  func(a *QPAttr, l *Limits)
		bad  AttrMask // 0: accepted
	}{
		{"state out of range", QPTypeRC, AttrState, func(a *QPAttr, _ *Limits) { a.State = QPStateUnknown }, AttrState},
		{"cur_state differs", QPTypeRC, AttrCurState, func(a *QPAttr, _ *Limits) { a.CurState = QPStateRTS }, AttrCurState},
		{"cur_state out of range", QPTypeRC, AttrCurState, func(a *QPAttr, _ *Limits) { a.CurState = 8 }, AttrCurState},
		{"path_mtu 0", QPTypeRC, AttrPathMTU, func(a *QPAttr, _ *Limits) { a.PathMTU = 0 }, AttrPathMTU},
		{"path_mtu 6", QPTypeRC, AttrPathMTU, func(a *QPAttr, _ *Limits) { a.PathMTU = 6 }, AttrPathMTU},
		{"path_mtu above port max", QPTypeRC, AttrPathMTU, func(a *QPAttr, l *Limits) { a.PathMTU, l.MaxMTU = MTU4096, MTU2048 }, AttrPathMTU},
		{"path_mtu at port max", QPTypeRC, AttrPathMTU, func(a *QPAttr, l *Limits) { a.PathMTU, l.MaxMTU = MTU2048, MTU2048 }, 0},
		{"timeout 32", QPTypeRC, AttrTimeout, func(a *QPAttr, _ *Limits) { a.Timeout = 32 }, AttrTimeout},
		{"retry_cnt 8", QPTypeRC, AttrRetryCnt, func(a *QPAttr, _ *Limits) { a.RetryCnt = 8 }, AttrRetryCnt},
		{"rnr_retry 8", QPTypeRC, AttrRNRRetry, func(a *QPAttr, _ *Limits) { a.RNRRetry = 8 }, AttrRNRRetry},
		{"min_rnr_timer 32", QPTypeRC, AttrMinRNRTimer, func(a *QPAttr, _ *Limits) { a.MinRNRTimer = 32 }, AttrMinRNRTimer},
		{"max_rd_atomic above init limit", QPTypeRC, AttrMaxQPRdAtomic, func(a *QPAttr, _ *Limits) { a.MaxRdAtomic = 9 }, AttrMaxQPRdAtomic},
		{"max_rd_atomic 0", QPTypeRC, AttrMaxQPRdAtomic, func(a *QPAttr, _ *Limits) { a.MaxRdAtomic = 0 }, 0},
		{"max_dest_rd_atomic above limit", QPTypeRC, AttrMaxDestRdAtomic, func(a *QPAttr, _ *Limits) { a.MaxDestRdAtomic = 17 }, AttrMaxDestRdAtomic},
		{"dest_qpn 2^24", QPTypeRC, AttrDestQPN, func(a *QPAttr, _ *Limits) { a.DestQPN = 1 << 24 }, AttrDestQPN},
		{"rq_psn 2^24", QPTypeRC, AttrRQPSN, func(a *QPAttr, _ *Limits) { a.RQPSN = 1 << 24 }, AttrRQPSN},
		{"sq_psn 2^24", QPTypeRC, AttrSQPSN, func(a *QPAttr, _ *Limits) { a.SQPSN = 1 << 24 }, AttrSQPSN},
		{"port 0", QPTypeRC, AttrPort, func(a *QPAttr, _ *Limits) { a.PortNum = 0 }, AttrPort},
		{"port 2 of 1", QPTypeRC, AttrPort, func(a *QPAttr, _ *Limits) { a.PortNum = 2 }, AttrPort},
		{"pkey_index 1 of 1", QPTypeRC, AttrPKeyIndex, func(a *QPAttr, _ *Limits) { a.PKeyIndex = 1 }, AttrPKeyIndex},
		{"controlled qkey", QPTypeUD, AttrQKey, func(a *QPAttr, _ *Limits) { a.QKey = 0x80010000 }, AttrQKey},
		{"controlled qkey, privileged", QPTypeUD, AttrQKey, func(a *QPAttr, l *Limits) { a.QKey, l.PrivilegedQKey = 0x80010000, true }, 0},
		{"AV not global", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.IsGlobal = false }, AttrAV},
		{"AV no dgid", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.Addr{} }, AttrAV},
		{"AV unspecified dgid", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.IPv6Unspecified() }, AttrAV},
		{"AV multicast dgid on RC", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.MustParseAddr("ff0e::1") }, AttrAV},
		{"AV IPv6 dgid", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.MustParseAddr("2001:db8::1") }, 0},
		{"AV sgid_index beyond table", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.GRH.SGIDIndex = 4 }, AttrAV},
		{"AV sgid_index unchecked without table length", QPTypeRC, AttrAV, func(a *QPAttr, l *Limits) { a.AHAttr.GRH.SGIDIndex, l.GIDTableLen = 200, 0 }, 0},
		{"AV port 0", QPTypeRC, AttrAV, func(a *QPAttr, _ *Limits) { a.AHAttr.PortNum = 0 }, AttrAV},
		{"AV port differs from port_num", QPTypeRC, AttrAV | AttrPort, func(a *QPAttr, l *Limits) { l.PortCount = 2; a.AHAttr.PortNum = 2 }, AttrAV},
		{"alt path", QPTypeRC, AttrAltPath, func(a *QPAttr, _ *Limits) {}, AttrAltPath},
		{"path_mig_state 3", QPTypeRC, AttrPathMigState, func(a *QPAttr, _ *Limits) { a.PathMigState = 3 }, AttrPathMigState},
		{"cap send wr", QPTypeRC, AttrCap, func(a *QPAttr, _ *Limits) { a.Cap.MaxSendWR++ }, AttrCap},
		{"cap recv wr", QPTypeRC, AttrCap, func(a *QPAttr, _ *Limits) { a.Cap.MaxRecvWR++ }, AttrCap},
		{"cap send sge", QPTypeRC, AttrCap, func(a *QPAttr, _ *Limits) { a.Cap.MaxSendSGE++ }, AttrCap},
		{"cap recv sge", QPTypeRC, AttrCap, func(a *QPAttr, _ *Limits) { a.Cap.MaxRecvSGE++ }, AttrCap},
		{"cap inline", QPTypeRC, AttrCap, func(a *QPAttr, _ *Limits) { a.Cap.MaxInlineData++ }, AttrCap},
		{"unselected field ignored", QPTypeRC, AttrTimeout, func(a *QPAttr, _ *Limits) { a.RetryCnt = 200 }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, l := goodAttr(), testLimits
			tt.mod(&a, &l)
			err := CheckAttrValues(tt.typ, QPStateInit, &a, tt.mask, l)
			if tt.bad == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var me *ModifyError
			if !errors.Is(err, ErrAttrValue) || !errors.Is(err, ErrInvalidModify) || !errors.As(err, &me) {
				t.Fatalf("got %v, want ErrAttrValue", err)
			}
			if me.Attr != tt.bad || !strings.Contains(err.Error(), tt.bad.String()) {
				t.Fatalf("got %v (attr %v), want attr %v named", err, me.Attr, tt.bad)
			}
		})
	}
	if err := CheckAttrValues(QPTypeRC, QPStateInit, nil, AttrTimeout, testLimits); !errors.Is(err, ErrAttrValue) {
		t.Errorf("nil attr: got %v, want ErrAttrValue", err)
	}
	if err := CheckAttrValues(QPTypeRC, QPStateInit, nil, 0, testLimits); err != nil {
		t.Errorf("nil attr, empty mask: got %v, want nil", err)
	}
}

func TestRoundUpPow2(t *testing.T) {
	for _, tt := range []struct{ in, want uint32 }{
		{0, 0}, {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {16, 16}, {17, 32}, {100, 128}, {128, 128}, {129, 256}, {255, 256},
	} {
		if got := RoundUpPow2(tt.in); got != tt.want {
			t.Errorf("RoundUpPow2(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
