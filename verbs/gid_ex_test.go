package verbs_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestQueryGIDEx: the GID table read whole and by entry
// (ibv_query_gid_ex, ibv_query_gid_table, ibv_query_gid_type): one RoCE v2
// entry at index 0 of port 1, the device's address, as QueryGID reports
// it; no network interface holds a fabric address; the P_Key table's one
// entry (ibv_query_pkey, ibv_get_pkey_index); the refusals are EINVAL.
// (Before, these calls did not exist.)
func TestQueryGIDEx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := apiOpen(t, f, apiAddrA)
		gid, err := dev.QueryGID(1, 0)
		must(t, err)
		want := verbs.GIDEntry{GID: gid, GIDIndex: 0, PortNum: 1, GIDType: ibv.GIDTypeRoCEv2}
		e, err := dev.QueryGIDEx(1, 0, 0)
		must(t, err)
		if e != want {
			t.Errorf("QueryGIDEx(1, 0) = %+v, want %+v", e, want)
		}
		tbl := make([]verbs.GIDEntry, 4)
		n, err := dev.QueryGIDTable(tbl, 0)
		must(t, err)
		if n != 1 || tbl[0] != want {
			t.Errorf("QueryGIDTable = %d, %+v; want 1, %+v", n, tbl[:n], want)
		}
		typ, err := dev.QueryGIDType(1, 0)
		must(t, err)
		if typ != ibv.GIDTypeRoCEv2 || typ.String() != "RoCE v2" {
			t.Errorf("QueryGIDType = %v, want RoCE v2", typ)
		}
		if pk, err := dev.QueryPKey(1, 0); err != nil || pk != 0xffff {
			t.Errorf("QueryPKey(1, 0) = %#x, %v; want 0xffff", pk, err)
		}
		if i, err := dev.GetPKeyIndex(1, 0xffff); err != nil || i != 0 {
			t.Errorf("GetPKeyIndex(0xffff) = %d, %v; want 0", i, err)
		}
		if _, err := dev.GetPKeyIndex(1, 0x8001); !errors.Is(err, verbs.ENOENT) {
			t.Errorf("GetPKeyIndex(0x8001): %v, want ENOENT", err)
		}
		for name, err := range map[string]error{
			"QueryPKey index 1":         func() error { _, err := dev.QueryPKey(1, 1); return err }(),
			"GetPKeyIndex port 2":       func() error { _, err := dev.GetPKeyIndex(2, 0xffff); return err }(),
			"QueryGIDEx index 1":        func() error { _, err := dev.QueryGIDEx(1, 1, 0); return err }(),
			"QueryGIDEx port 2":         func() error { _, err := dev.QueryGIDEx(2, 0, 0); return err }(),
			"QueryGIDEx flags":          func() error { _, err := dev.QueryGIDEx(1, 0, 1); return err }(),
			"QueryGIDTable no room":     func() error { _, err := dev.QueryGIDTable(nil, 0); return err }(),
			"QueryGIDTable flags":       func() error { _, err := dev.QueryGIDTable(tbl, 1); return err }(),
			"QueryGIDType index -1":     func() error { _, err := dev.QueryGIDType(1, -1); return err }(),
			"QueryGIDType beyond table": func() error { _, err := dev.QueryGIDType(1, 1); return err }(),
		} {
			if !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%s: %v, want EINVAL", name, err)
			}
		}
	})
}
