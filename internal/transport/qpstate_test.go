package transport

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/softnic/softnic/ibv"
)

var allQPTypes = []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD, ibv.QPTypeRawPacket, ibv.QPTypeXRCSend, ibv.QPTypeXRCRecv}

var allStates = []ibv.QPState{ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPStateSQD, ibv.QPStateSQE, ibv.QPStateErr}

// legalPairs lists the (cur, next) pairs of the kernel's qp_state_table
// (drivers/infiniband/core/verbs.c), written out independently of it.
var legalPairs = map[[2]ibv.QPState]bool{
	{ibv.QPStateReset, ibv.QPStateReset}: true,
	{ibv.QPStateReset, ibv.QPStateInit}:  true,
	{ibv.QPStateInit, ibv.QPStateReset}:  true,
	{ibv.QPStateInit, ibv.QPStateErr}:    true,
	{ibv.QPStateInit, ibv.QPStateInit}:   true,
	{ibv.QPStateInit, ibv.QPStateRTR}:    true,
	{ibv.QPStateRTR, ibv.QPStateReset}:   true,
	{ibv.QPStateRTR, ibv.QPStateErr}:     true,
	{ibv.QPStateRTR, ibv.QPStateRTS}:     true,
	{ibv.QPStateRTS, ibv.QPStateReset}:   true,
	{ibv.QPStateRTS, ibv.QPStateErr}:     true,
	{ibv.QPStateRTS, ibv.QPStateRTS}:     true,
	{ibv.QPStateRTS, ibv.QPStateSQD}:     true,
	{ibv.QPStateSQD, ibv.QPStateReset}:   true,
	{ibv.QPStateSQD, ibv.QPStateErr}:     true,
	{ibv.QPStateSQD, ibv.QPStateRTS}:     true,
	{ibv.QPStateSQD, ibv.QPStateSQD}:     true,
	{ibv.QPStateSQE, ibv.QPStateReset}:   true,
	{ibv.QPStateSQE, ibv.QPStateErr}:     true,
	{ibv.QPStateSQE, ibv.QPStateRTS}:     true,
	{ibv.QPStateErr, ibv.QPStateReset}:   true,
	{ibv.QPStateErr, ibv.QPStateErr}:     true,
}

// allAttrBits are the bits of enum ibv_qp_attr_mask.
func allAttrBits() []ibv.AttrMask {
	var b []ibv.AttrMask
	for i := 0; i <= 25; i++ {
		b = append(b, ibv.AttrMask(1)<<i)
	}
	return b
}

func eachBit(m ibv.AttrMask) []ibv.AttrMask {
	var b []ibv.AttrMask
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
				if want := legalPairs[[2]ibv.QPState{cur, next}]; ok != want {
					t.Errorf("%s: ModifyAttrs legal = %v, want %v", name, ok, want)
					continue
				}
				if !ok {
					for _, mask := range []ibv.AttrMask{ibv.QPAttrState, ibv.QPAttrState | ^ibv.AttrMask(0)>>6} {
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
				base := ibv.QPAttrState | req
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
				for _, bit := range eachBit(^(req | opt | ibv.QPAttrState)) {
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
		pkey = ibv.QPAttrPKeyIndex
		port = ibv.QPAttrPort
		acc  = ibv.QPAttrAccessFlags
		qkey = ibv.QPAttrQKey
	)
	tests := []struct {
		typ      ibv.QPType
		cur, nxt ibv.QPState
		req, opt ibv.AttrMask
	}{
		{ibv.QPTypeRC, ibv.QPStateReset, ibv.QPStateInit, pkey | port | acc, 0},
		{ibv.QPTypeUC, ibv.QPStateReset, ibv.QPStateInit, pkey | port | acc, 0},
		{ibv.QPTypeUD, ibv.QPStateReset, ibv.QPStateInit, pkey | port | qkey, 0},
		{ibv.QPTypeRawPacket, ibv.QPStateReset, ibv.QPStateInit, port, 0},
		{ibv.QPTypeXRCSend, ibv.QPStateReset, ibv.QPStateInit, pkey | port | acc, 0},
		{ibv.QPTypeXRCRecv, ibv.QPStateReset, ibv.QPStateInit, pkey | port | acc, 0},
		{ibv.QPTypeRC, ibv.QPStateInit, ibv.QPStateInit, 0, pkey | port | acc},
		{ibv.QPTypeUD, ibv.QPStateInit, ibv.QPStateInit, 0, pkey | port | qkey},
		{ibv.QPTypeRawPacket, ibv.QPStateInit, ibv.QPStateInit, 0, 0},
		{ibv.QPTypeRC, ibv.QPStateInit, ibv.QPStateRTR,
			ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN | ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer,
			ibv.QPAttrAltPath | acc | pkey},
		{ibv.QPTypeUC, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN, ibv.QPAttrAltPath | acc | pkey},
		{ibv.QPTypeUD, ibv.QPStateInit, ibv.QPStateRTR, 0, pkey | qkey},
		{ibv.QPTypeXRCSend, ibv.QPStateInit, ibv.QPStateRTR, ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN, ibv.QPAttrAltPath | acc | pkey},
		{ibv.QPTypeXRCRecv, ibv.QPStateInit, ibv.QPStateRTR,
			ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN | ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer,
			ibv.QPAttrAltPath | acc | pkey},
		{ibv.QPTypeRC, ibv.QPStateRTR, ibv.QPStateRTS,
			ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrSQPSN | ibv.QPAttrMaxQPRdAtomic,
			ibv.QPAttrCurState | ibv.QPAttrAltPath | acc | ibv.QPAttrMinRNRTimer | ibv.QPAttrPathMigState},
		{ibv.QPTypeUC, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPAttrSQPSN, ibv.QPAttrCurState | ibv.QPAttrAltPath | acc | ibv.QPAttrPathMigState},
		{ibv.QPTypeUD, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPAttrSQPSN, ibv.QPAttrCurState | qkey},
		{ibv.QPTypeRawPacket, ibv.QPStateRTR, ibv.QPStateRTS, 0, ibv.QPAttrRateLimit},
		{ibv.QPTypeXRCRecv, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPAttrTimeout | ibv.QPAttrSQPSN,
			ibv.QPAttrCurState | ibv.QPAttrAltPath | acc | ibv.QPAttrMinRNRTimer | ibv.QPAttrPathMigState},
		{ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateRTS, 0, ibv.QPAttrCurState | acc | ibv.QPAttrAltPath | ibv.QPAttrPathMigState | ibv.QPAttrMinRNRTimer},
		{ibv.QPTypeRawPacket, ibv.QPStateRTS, ibv.QPStateRTS, 0, ibv.QPAttrRateLimit},
		{ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateSQD, 0, ibv.QPAttrEnSQDAsyncNotify},
		{ibv.QPTypeRawPacket, ibv.QPStateRTS, ibv.QPStateSQD, 0, 0},
		{ibv.QPTypeUD, ibv.QPStateSQD, ibv.QPStateSQD, 0, pkey | qkey},
		{ibv.QPTypeRC, ibv.QPStateSQD, ibv.QPStateSQD, 0,
			port | ibv.QPAttrAV | ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic | ibv.QPAttrMaxDestRdAtomic |
				ibv.QPAttrAltPath | acc | pkey | ibv.QPAttrMinRNRTimer | ibv.QPAttrPathMigState},
		{ibv.QPTypeUD, ibv.QPStateSQE, ibv.QPStateRTS, 0, ibv.QPAttrCurState | qkey},
		{ibv.QPTypeUC, ibv.QPStateSQE, ibv.QPStateRTS, 0, ibv.QPAttrCurState | acc},
		{ibv.QPTypeRC, ibv.QPStateSQE, ibv.QPStateRTS, 0, 0},
		{ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateErr, 0, 0},
		{ibv.QPTypeRC, ibv.QPStateErr, ibv.QPStateReset, 0, 0},
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
	rcRTR := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN | ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	tests := []struct {
		name     string
		typ      ibv.QPType
		cur, nxt ibv.QPState
		mask     ibv.AttrMask
		kind     error
	}{
		{"RESET->RTS", ibv.QPTypeRC, ibv.QPStateReset, ibv.QPStateRTS, ibv.QPAttrState, ErrInvalidTransition},
		{"INIT->RTS", ibv.QPTypeRC, ibv.QPStateInit, ibv.QPStateRTS, ibv.QPAttrState | ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrSQPSN | ibv.QPAttrMaxQPRdAtomic, ErrInvalidTransition},
		{"RTR->INIT", ibv.QPTypeRC, ibv.QPStateRTR, ibv.QPStateInit, ibv.QPAttrState, ErrInvalidTransition},
		{"SQE->RTR", ibv.QPTypeUD, ibv.QPStateSQE, ibv.QPStateRTR, ibv.QPAttrState, ErrInvalidTransition},
		{"ERR->RTS", ibv.QPTypeRC, ibv.QPStateErr, ibv.QPStateRTS, ibv.QPAttrState, ErrInvalidTransition},
		{"ERR->INIT", ibv.QPTypeUD, ibv.QPStateErr, ibv.QPStateInit, ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrQKey, ErrInvalidTransition},
		{"RESET->ERR (not in the kernel table)", ibv.QPTypeRC, ibv.QPStateReset, ibv.QPStateErr, ibv.QPAttrState, ErrInvalidTransition},
		{"RTS->SQE (only the QP enters SQE)", ibv.QPTypeUD, ibv.QPStateRTS, ibv.QPStateSQE, ibv.QPAttrState, ErrInvalidTransition},
		{"RTR->RTR without IBV_QP_STATE", ibv.QPTypeRC, ibv.QPStateRTR, ibv.QPStateRTR, ibv.QPAttrMinRNRTimer, ErrInvalidTransition},
		{"SQE->SQE", ibv.QPTypeUD, ibv.QPStateSQE, ibv.QPStateSQE, 0, ErrInvalidTransition},
		{"state change without IBV_QP_STATE", ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateErr, 0, ErrInvalidTransition},
		{"unknown type", ibv.QPType(5), ibv.QPStateReset, ibv.QPStateReset, ibv.QPAttrState, ErrInvalidTransition},
		{"cur out of range", ibv.QPTypeRC, ibv.QPStateUnknown, ibv.QPStateReset, ibv.QPAttrState, ErrInvalidTransition},
		{"next out of range", ibv.QPTypeRC, ibv.QPStateReset, ibv.QPState(9), ibv.QPAttrState, ErrInvalidTransition},
		{"CUR_STATE from INIT", ibv.QPTypeRC, ibv.QPStateInit, ibv.QPStateRTR, rcRTR | ibv.QPAttrCurState, ErrExtraAttr},
		{"CUR_STATE to ERR", ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateErr, ibv.QPAttrState | ibv.QPAttrCurState, ErrExtraAttr},
		{"IBV_QP_CAP never allowed", ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateRTS, ibv.QPAttrCap, ErrExtraAttr},
		{"RATE_LIMIT on RC", ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateRTS, ibv.QPAttrState | ibv.QPAttrRateLimit, ErrExtraAttr},
		{"QKEY on RC", ibv.QPTypeRC, ibv.QPStateReset, ibv.QPStateInit, ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrAccessFlags | ibv.QPAttrQKey, ErrExtraAttr},
		{"ACCESS on UD", ibv.QPTypeUD, ibv.QPStateReset, ibv.QPStateInit, ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrQKey | ibv.QPAttrAccessFlags, ErrExtraAttr},
		{"RC INIT->RTR without RQ_PSN", ibv.QPTypeRC, ibv.QPStateInit, ibv.QPStateRTR, rcRTR &^ ibv.QPAttrRQPSN, ErrMissingAttr},
		{"UD RTR->RTS without SQ_PSN", ibv.QPTypeUD, ibv.QPStateRTR, ibv.QPStateRTS, ibv.QPAttrState, ErrMissingAttr},
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
		typ      ibv.QPType
		cur, nxt ibv.QPState
		mask     ibv.AttrMask
		want     string
	}{
		{ibv.QPTypeRC, ibv.QPStateInit, ibv.QPStateRTR,
			ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer,
			"invalid argument: invalid QP modify: INIT->RTR for RC requires IBV_QP_AV|IBV_QP_PATH_MTU|IBV_QP_RQ_PSN|" +
				"IBV_QP_MIN_RNR_TIMER|IBV_QP_MAX_DEST_RD_ATOMIC|IBV_QP_DEST_QPN, missing IBV_QP_RQ_PSN"},
		{ibv.QPTypeUD, ibv.QPStateRTS, ibv.QPStateRTS, ibv.QPAttrPathMTU,
			"invalid argument: invalid QP modify: RTS->RTS for UD allows only IBV_QP_STATE|IBV_QP_CUR_STATE|IBV_QP_QKEY, " +
				"IBV_QP_PATH_MTU not allowed"},
		{ibv.QPTypeRC, ibv.QPStateRTS, ibv.QPStateErr, ibv.QPAttrState | ibv.QPAttrQKey,
			"invalid argument: invalid QP modify: RTS->ERR for RC allows only IBV_QP_STATE, IBV_QP_QKEY not allowed"},
		{ibv.QPTypeRC, ibv.QPStateReset, ibv.QPStateRTS, ibv.QPAttrState,
			"invalid argument: invalid QP modify: RESET->RTS for RC is not a legal transition"},
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
		m    ibv.AttrMask
		want string
	}{
		{0, "0"},
		{ibv.QPAttrState, "IBV_QP_STATE"},
		{ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrAccessFlags, "IBV_QP_STATE|IBV_QP_ACCESS_FLAGS|IBV_QP_PKEY_INDEX|IBV_QP_PORT"},
		{ibv.QPAttrDestQPN | ibv.QPAttrRateLimit, "IBV_QP_DEST_QPN|IBV_QP_RATE_LIMIT"},
		{1 << 22, "IBV_QP_RESERVED2"},
		{ibv.QPAttrCap | 1<<30, "IBV_QP_CAP|0x40000000"},
		{1 << 31, "0x80000000"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("AttrMask(%#x).String() = %q, want %q", uint32(tt.m), got, tt.want)
		}
	}
}

var testLimits = Limits{
	MaxQPRdAtom: 16, MaxQPInitRdAtom: 8, MaxMTU: ibv.MTU4096, PortCount: 1, PKeyTableLen: 1,
	MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSGE: 32, MaxInline: 512, GIDTableLen: 4,
}

func goodAttr() ibv.QPAttr {
	return ibv.QPAttr{
		State: ibv.QPStateRTR, CurState: ibv.QPStateInit, PathMTU: ibv.MTU1024, QKey: 0x11111111,
		RQPSN: 0xffffff, SQPSN: 0xabcdef, DestQPN: 0xffffff, PKeyIndex: 0, MaxRdAtomic: 8,
		MaxDestRdAtomic: 16, MinRNRTimer: 31, PortNum: 1, Timeout: 31, RetryCnt: 7, RNRRetry: 7,
		PathMigState: 2,
		Cap:          ibv.QPCap{MaxSendWR: 1 << 14, MaxRecvWR: 1 << 14, MaxSendSGE: 32, MaxRecvSGE: 32, MaxInlineData: 512},
		AHAttr: ibv.AHAttr{
			IsGlobal: true, PortNum: 1,
			GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr("::ffff:192.0.2.1"), SGIDIndex: 3, HopLimit: 64},
		},
	}
}

const allValueAttrs = ibv.QPAttrState | ibv.QPAttrCurState | ibv.QPAttrPathMTU | ibv.QPAttrQKey | ibv.QPAttrRQPSN | ibv.QPAttrSQPSN |
	ibv.QPAttrDestQPN | ibv.QPAttrPKeyIndex | ibv.QPAttrMaxQPRdAtomic | ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer | ibv.QPAttrPort |
	ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrPathMigState | ibv.QPAttrCap | ibv.QPAttrAV | ibv.QPAttrAccessFlags |
	ibv.QPAttrEnSQDAsyncNotify | ibv.QPAttrRateLimit

func TestCheckAttrValues(t *testing.T) {
	a := goodAttr()
	if err := CheckAttrValues(ibv.QPTypeRC, ibv.QPStateInit, &a, allValueAttrs, testLimits); err != nil {
		t.Fatalf("good attributes: %v", err)
	}
	tests := []struct {
		name string
		typ  ibv.QPType
		mask ibv.AttrMask
		mod  func(a *ibv.QPAttr, l *Limits)
		bad  ibv.AttrMask // 0: accepted
	}{
		{"state out of range", ibv.QPTypeRC, ibv.QPAttrState, func(a *ibv.QPAttr, _ *Limits) { a.State = ibv.QPStateUnknown }, ibv.QPAttrState},
		{"cur_state differs", ibv.QPTypeRC, ibv.QPAttrCurState, func(a *ibv.QPAttr, _ *Limits) { a.CurState = ibv.QPStateRTS }, ibv.QPAttrCurState},
		{"cur_state out of range", ibv.QPTypeRC, ibv.QPAttrCurState, func(a *ibv.QPAttr, _ *Limits) { a.CurState = 8 }, ibv.QPAttrCurState},
		{"path_mtu 0", ibv.QPTypeRC, ibv.QPAttrPathMTU, func(a *ibv.QPAttr, _ *Limits) { a.PathMTU = 0 }, ibv.QPAttrPathMTU},
		{"path_mtu 6", ibv.QPTypeRC, ibv.QPAttrPathMTU, func(a *ibv.QPAttr, _ *Limits) { a.PathMTU = 6 }, ibv.QPAttrPathMTU},
		{"path_mtu above port max", ibv.QPTypeRC, ibv.QPAttrPathMTU, func(a *ibv.QPAttr, l *Limits) { a.PathMTU, l.MaxMTU = ibv.MTU4096, ibv.MTU2048 }, ibv.QPAttrPathMTU},
		{"path_mtu at port max", ibv.QPTypeRC, ibv.QPAttrPathMTU, func(a *ibv.QPAttr, l *Limits) { a.PathMTU, l.MaxMTU = ibv.MTU2048, ibv.MTU2048 }, 0},
		{"timeout 32", ibv.QPTypeRC, ibv.QPAttrTimeout, func(a *ibv.QPAttr, _ *Limits) { a.Timeout = 32 }, ibv.QPAttrTimeout},
		{"retry_cnt 8", ibv.QPTypeRC, ibv.QPAttrRetryCnt, func(a *ibv.QPAttr, _ *Limits) { a.RetryCnt = 8 }, ibv.QPAttrRetryCnt},
		{"rnr_retry 8", ibv.QPTypeRC, ibv.QPAttrRNRRetry, func(a *ibv.QPAttr, _ *Limits) { a.RNRRetry = 8 }, ibv.QPAttrRNRRetry},
		{"min_rnr_timer 32", ibv.QPTypeRC, ibv.QPAttrMinRNRTimer, func(a *ibv.QPAttr, _ *Limits) { a.MinRNRTimer = 32 }, ibv.QPAttrMinRNRTimer},
		{"max_rd_atomic above init limit", ibv.QPTypeRC, ibv.QPAttrMaxQPRdAtomic, func(a *ibv.QPAttr, _ *Limits) { a.MaxRdAtomic = 9 }, ibv.QPAttrMaxQPRdAtomic},
		{"max_rd_atomic 0", ibv.QPTypeRC, ibv.QPAttrMaxQPRdAtomic, func(a *ibv.QPAttr, _ *Limits) { a.MaxRdAtomic = 0 }, 0},
		{"max_dest_rd_atomic above limit", ibv.QPTypeRC, ibv.QPAttrMaxDestRdAtomic, func(a *ibv.QPAttr, _ *Limits) { a.MaxDestRdAtomic = 17 }, ibv.QPAttrMaxDestRdAtomic},
		{"dest_qpn 2^24", ibv.QPTypeRC, ibv.QPAttrDestQPN, func(a *ibv.QPAttr, _ *Limits) { a.DestQPN = 1 << 24 }, ibv.QPAttrDestQPN},
		{"rq_psn 2^24", ibv.QPTypeRC, ibv.QPAttrRQPSN, func(a *ibv.QPAttr, _ *Limits) { a.RQPSN = 1 << 24 }, ibv.QPAttrRQPSN},
		{"sq_psn 2^24", ibv.QPTypeRC, ibv.QPAttrSQPSN, func(a *ibv.QPAttr, _ *Limits) { a.SQPSN = 1 << 24 }, ibv.QPAttrSQPSN},
		{"port 0", ibv.QPTypeRC, ibv.QPAttrPort, func(a *ibv.QPAttr, _ *Limits) { a.PortNum = 0 }, ibv.QPAttrPort},
		{"port 2 of 1", ibv.QPTypeRC, ibv.QPAttrPort, func(a *ibv.QPAttr, _ *Limits) { a.PortNum = 2 }, ibv.QPAttrPort},
		{"pkey_index 1 of 1", ibv.QPTypeRC, ibv.QPAttrPKeyIndex, func(a *ibv.QPAttr, _ *Limits) { a.PKeyIndex = 1 }, ibv.QPAttrPKeyIndex},
		{"controlled qkey", ibv.QPTypeUD, ibv.QPAttrQKey, func(a *ibv.QPAttr, _ *Limits) { a.QKey = 0x80010000 }, ibv.QPAttrQKey},
		{"controlled qkey, privileged", ibv.QPTypeUD, ibv.QPAttrQKey, func(a *ibv.QPAttr, l *Limits) { a.QKey, l.PrivilegedQKey = 0x80010000, true }, 0},
		{"AV not global", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.IsGlobal = false }, ibv.QPAttrAV},
		{"AV no dgid", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.Addr{} }, ibv.QPAttrAV},
		{"AV unspecified dgid", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.IPv6Unspecified() }, ibv.QPAttrAV},
		{"AV multicast dgid on RC", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.MustParseAddr("ff0e::1") }, ibv.QPAttrAV},
		{"AV IPv6 dgid", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.GRH.DGID = netip.MustParseAddr("2001:db8::1") }, 0},
		{"AV sgid_index beyond table", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.GRH.SGIDIndex = 4 }, ibv.QPAttrAV},
		{"AV sgid_index unchecked without table length", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, l *Limits) { a.AHAttr.GRH.SGIDIndex, l.GIDTableLen = 200, 0 }, 0},
		{"AV port 0", ibv.QPTypeRC, ibv.QPAttrAV, func(a *ibv.QPAttr, _ *Limits) { a.AHAttr.PortNum = 0 }, ibv.QPAttrAV},
		{"AV port differs from port_num", ibv.QPTypeRC, ibv.QPAttrAV | ibv.QPAttrPort, func(a *ibv.QPAttr, l *Limits) { l.PortCount = 2; a.AHAttr.PortNum = 2 }, ibv.QPAttrAV},
		{"alt path", ibv.QPTypeRC, ibv.QPAttrAltPath, func(a *ibv.QPAttr, _ *Limits) {}, ibv.QPAttrAltPath},
		{"path_mig_state 3", ibv.QPTypeRC, ibv.QPAttrPathMigState, func(a *ibv.QPAttr, _ *Limits) { a.PathMigState = 3 }, ibv.QPAttrPathMigState},
		{"cap send wr", ibv.QPTypeRC, ibv.QPAttrCap, func(a *ibv.QPAttr, _ *Limits) { a.Cap.MaxSendWR++ }, ibv.QPAttrCap},
		{"cap recv wr", ibv.QPTypeRC, ibv.QPAttrCap, func(a *ibv.QPAttr, _ *Limits) { a.Cap.MaxRecvWR++ }, ibv.QPAttrCap},
		{"cap send sge", ibv.QPTypeRC, ibv.QPAttrCap, func(a *ibv.QPAttr, _ *Limits) { a.Cap.MaxSendSGE++ }, ibv.QPAttrCap},
		{"cap recv sge", ibv.QPTypeRC, ibv.QPAttrCap, func(a *ibv.QPAttr, _ *Limits) { a.Cap.MaxRecvSGE++ }, ibv.QPAttrCap},
		{"cap inline", ibv.QPTypeRC, ibv.QPAttrCap, func(a *ibv.QPAttr, _ *Limits) { a.Cap.MaxInlineData++ }, ibv.QPAttrCap},
		{"unselected field ignored", ibv.QPTypeRC, ibv.QPAttrTimeout, func(a *ibv.QPAttr, _ *Limits) { a.RetryCnt = 200 }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, l := goodAttr(), testLimits
			tt.mod(&a, &l)
			err := CheckAttrValues(tt.typ, ibv.QPStateInit, &a, tt.mask, l)
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
	if err := CheckAttrValues(ibv.QPTypeRC, ibv.QPStateInit, nil, ibv.QPAttrTimeout, testLimits); !errors.Is(err, ErrAttrValue) {
		t.Errorf("nil attr: got %v, want ErrAttrValue", err)
	}
	if err := CheckAttrValues(ibv.QPTypeRC, ibv.QPStateInit, nil, 0, testLimits); err != nil {
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
