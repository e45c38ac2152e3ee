package verbs_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestUnsupported: every call softnic deliberately lacks exists, returns
// an error wrapping EOPNOTSUPP that names the libibverbs call and says
// why, and is listed in verbs.Unsupported; AllocMR refuses the signature
// (INTEGRITY) and SG_GAPS types so, and an unknown type with EINVAL.
// (Before, these calls did not exist, and AllocMR's refusal was EINVAL.)
func TestUnsupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := mpair(t, f, mopts{})
		wq, err := a.dev.CreateWQ(verbs.WQInitAttr{MaxWR: 1, MaxSGE: 1, PD: a.pd, CQ: a.cq})
		must(t, err)
		second := func(_ any, err error) error { return err }
		calls := map[string]error{
			"ibv_create_rwq_ind_table":           second(a.dev.CreateRWQIndTable(0, []*verbs.WQ{wq})),
			"ibv_alloc_mr(IB_MR_TYPE_INTEGRITY)": second(a.pd.AllocMR(verbs.MRTypeIntegrity, 1)),
			"ibv_alloc_null_mr":                  second(a.pd.AllocNullMR()),
			"ibv_alloc_dm":                       second(a.dev.AllocDM(4096)),
			"ibv_create_flow":                    second(a.qp.CreateFlow()),
			"ibv_create_counters":                second(a.dev.CreateCounters()),
			"ibv_set_ece":                        a.qp.SetECE(0, 0, 0),
			"ibv_modify_qp_rate_limit":           a.qp.ModifyRateLimit(1000, 0, 0),
			"ibv_reg_dmabuf_mr":                  second(a.pd.RegDmabufMR(0, 4096, 0, 3, 0)),
			"ibv_import_device":                  second(verbs.ImportDevice(3)),
		}
		for _, u := range verbs.Unsupported {
			err, ok := calls[u.Call]
			if !ok {
				t.Errorf("%s (%s) is listed but not tried here", u.Call, u.Go)
				continue
			}
			delete(calls, u.Call)
			if u.Reason == "" {
				t.Errorf("%s: no reason given", u.Call)
			}
			if u.Call == "ibv_alloc_mr(IB_MR_TYPE_INTEGRITY)" {
				apiWantErr(t, u.Go, err, "INTEGRITY", verbs.EOPNOTSUPP)
				continue
			}
			apiWantErr(t, u.Go, err, u.Call+": "+u.Reason, verbs.EOPNOTSUPP)
		}
		for call := range calls {
			t.Errorf("%s is not listed in verbs.Unsupported", call)
		}
		if _, _, _, err := a.qp.QueryECE(); !errors.Is(err, verbs.EOPNOTSUPP) {
			t.Errorf("QueryECE: %v, want EOPNOTSUPP", err)
		}
		if got := a.qp.QueryDataInOrder(ibv.WRRDMAWrite, 0); got != 0 {
			t.Errorf("QueryDataInOrder = %d, want 0 (no ordering promised)", got)
		}
		if _, err := a.pd.AllocMR(verbs.MRTypeSGGaps, 1); !errors.Is(err, verbs.EOPNOTSUPP) || !strings.Contains(err.Error(), "SG_GAPS") {
			t.Errorf("AllocMR(SG_GAPS): %v, want EOPNOTSUPP", err)
		}
		if _, err := a.pd.AllocMR(verbs.MRType(9), 1); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("AllocMR(9): %v, want EINVAL", err)
		}
	})
}
