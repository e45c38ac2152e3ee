package transport

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// ClassMatches on every opcode of the table: an XRC_SEND QP takes XRC
// responses only, an XRC_RECV QP XRC requests only, and neither takes
// another class, nor does RC, UC or UD take XRC (the rest is DropNoQP).
func TestClassMatchesXRC(t *testing.T) {
	for op := range 256 {
		o := wire.Opcode(op)
		if !o.Valid() {
			continue
		}
		xrc := o.Class() == wire.ClassXRC
		for _, c := range []struct {
			typ  ibv.QPType
			want bool
		}{
			{ibv.QPTypeXRCSend, xrc && o.Is(wire.MaskResponse)},
			{ibv.QPTypeXRCRecv, xrc && o.Is(wire.MaskRequest)},
			{ibv.QPTypeRC, o.Class() == wire.ClassRC},
			{ibv.QPTypeUC, o.Class() == wire.ClassUC},
			{ibv.QPTypeUD, o.Class() == wire.ClassUD},
		} {
			if got := ClassMatches(o, c.typ); got != c.want {
				t.Errorf("ClassMatches(%v, %v) = %v, want %v", o, c.typ, got, c.want)
			}
		}
	}
	if !ClassMatches(wire.ClassXRC|wire.RCSendMiddle.Op(), ibv.QPTypeXRCRecv) ||
		ClassMatches(wire.ClassXRC|wire.RCSendMiddle.Op(), ibv.QPTypeXRCSend) ||
		!ClassMatches(wire.ClassXRC|wire.RCAck.Op(), ibv.QPTypeXRCSend) {
		t.Error("XRC SEND_MIDDLE or ACK routed wrongly")
	}
}
