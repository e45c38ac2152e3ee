package metrics

import (
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
)

type fakeDevice struct {
	name string
	c    transport.Counters
}

func (d *fakeDevice) Name() string           { return d.name }
func (d *fakeDevice) Counters() ibv.Counters { return d.c.Load() }

// TestEveryCounterExported fails when transport.Counters gains a field
// the collector does not export: each field of a snapshot gets its own
// value, and every value must be read by exactly one metric.
func TestEveryCounterExported(t *testing.T) {
	var c ibv.Counters
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	mapped := map[uint64]bool{}
	for _, m := range deviceCounters {
		f := m.get(&c)
		if mapped[f] {
			t.Errorf("%s{%s} maps a field already mapped", m.name, m.value)
		}
		mapped[f] = true
	}
	for i := range v.NumField() {
		if !mapped[uint64(i+1)] {
			t.Errorf("transport.Counters.%s is not exported as a metric", v.Type().Field(i).Name)
		}
	}
}

func TestCollectorFollowsCounters(t *testing.T) {
	d := &fakeDevice{name: "softnic0"}
	reg := prometheus.NewRegistry()
	if err := Register(reg, d); err != nil {
		t.Fatal(err)
	}
	d.c.RcvdPkts.Store(5)
	d.c.DuplicateRequest.Add(2)
	d.c.DropNoQP.Add(3)
	d.c.DropPKey.Add(1)
	want := `
# HELP softnic_rcvd_pkts_total Packets received (rxe rcvd_pkts).
# TYPE softnic_rcvd_pkts_total counter
softnic_rcvd_pkts_total{device="softnic0"} 5
# HELP softnic_duplicate_request_total Duplicate requests received (rxe duplicate_request).
# TYPE softnic_duplicate_request_total counter
softnic_duplicate_request_total{device="softnic0"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "softnic_rcvd_pkts_total", "softnic_duplicate_request_total"); err != nil {
		t.Fatal(err)
	}
	d.c.RcvdPkts.Add(10)
	if got := testutil.ToFloat64(prometheusOnly(t, reg, "softnic_rcvd_pkts_total")); got != 15 {
		t.Fatalf("after 10 more packets: %v, want 15", got)
	}
	drops := `
# HELP softnic_rcvd_dropped_pkts_total Received packets dropped, by reason (bad_pkey is rxe's bad_pkey_cntr, qkey_violation its qkey_viol_cntr).
# TYPE softnic_rcvd_dropped_pkts_total counter
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="address"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="bad_pkey"} 1
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="length"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="malformed"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="no_qp"} 3
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="no_recv_wqe"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="qkey_violation"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="qp_state"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="queue_full"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="response"} 0
softnic_rcvd_dropped_pkts_total{device="softnic0",reason="uc_message"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(drops), "softnic_rcvd_dropped_pkts_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(NewCollector(d)); n != len(deviceCounters) {
		t.Fatalf("collected %d metrics, want %d", n, len(deviceCounters))
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
}

// prometheusOnly returns a collector yielding only metric name of reg.
func prometheusOnly(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
				}
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

func TestRegisterTwoDevices(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := &fakeDevice{name: "a"}, &fakeDevice{name: "b"}
	if err := Register(reg, a); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg, b); err != nil {
		t.Fatalf("second device: %v", err)
	}
	if err := Register(reg, &fakeDevice{name: "a"}); err == nil {
		t.Fatal("two devices named a registered")
	}
	a.c.SentPkts.Store(1)
	b.c.SentPkts.Store(2)
	want := `
# HELP softnic_sent_pkts_total Packets sent (rxe sent_pkts).
# TYPE softnic_sent_pkts_total counter
softnic_sent_pkts_total{device="a"} 1
softnic_sent_pkts_total{device="b"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "softnic_sent_pkts_total"); err != nil {
		t.Fatal(err)
	}
}

type fakeLink struct{ s link.UDPStats }

func (l *fakeLink) Stats() link.UDPStats { return l.s }

func TestLinkCollector(t *testing.T) {
	l := &fakeLink{s: link.UDPStats{TxPackets: 7, TxBadEncap: 1, RxKernelDrops: 4, RxGRO: 2}}
	c := NewLinkCollector("softnic0", l)
	want := `
# HELP softnic_udp_tx_packets_total Datagrams the UDP link's socket accepted.
# TYPE softnic_udp_tx_packets_total counter
softnic_udp_tx_packets_total{device="softnic0"} 7
# HELP softnic_udp_rx_dropped_total Datagrams lost on receive, by reason (kernel: socket buffer full, SO_RXQ_OVFL).
# TYPE softnic_udp_rx_dropped_total counter
softnic_udp_rx_dropped_total{device="softnic0",reason="kernel"} 4
softnic_udp_rx_dropped_total{device="softnic0",reason="truncated"} 0
# HELP softnic_udp_tx_dropped_total Datagrams the UDP link dropped on send, by reason.
# TYPE softnic_udp_tx_dropped_total counter
softnic_udp_tx_dropped_total{device="softnic0",reason="bad_encap"} 1
softnic_udp_tx_dropped_total{device="softnic0",reason="send_error"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"softnic_udp_tx_packets_total", "softnic_udp_rx_dropped_total", "softnic_udp_tx_dropped_total"); err != nil {
		t.Fatal(err)
	}
	// Errors by errno, each direction apart.
	l.s.TxErrnos[link.ErrnoEMSGSIZE] = 3
	l.s.TxErrnos[link.ErrnoEPERM] = 5
	l.s.RxErrnos[link.ErrnoECONNREFUSED] = 2
	l.s.RxErrnos[link.ErrnoOther] = 1
	want = `
# HELP softnic_link_send_errors_total Datagrams the link dropped because sendmmsg failed, by errno (other: any errno not listed).
# TYPE softnic_link_send_errors_total counter
softnic_link_send_errors_total{device="softnic0",errno="ECONNREFUSED"} 0
softnic_link_send_errors_total{device="softnic0",errno="EHOSTUNREACH"} 0
softnic_link_send_errors_total{device="softnic0",errno="EMSGSIZE"} 3
softnic_link_send_errors_total{device="softnic0",errno="ENETUNREACH"} 0
softnic_link_send_errors_total{device="softnic0",errno="ENOBUFS"} 0
softnic_link_send_errors_total{device="softnic0",errno="EPERM"} 5
softnic_link_send_errors_total{device="softnic0",errno="other"} 0
# HELP softnic_link_recv_errors_total Failed recvmmsg calls, by errno (other: any errno not listed); no datagram is lost.
# TYPE softnic_link_recv_errors_total counter
softnic_link_recv_errors_total{device="softnic0",errno="ECONNREFUSED"} 2
softnic_link_recv_errors_total{device="softnic0",errno="EHOSTUNREACH"} 0
softnic_link_recv_errors_total{device="softnic0",errno="EMSGSIZE"} 0
softnic_link_recv_errors_total{device="softnic0",errno="ENETUNREACH"} 0
softnic_link_recv_errors_total{device="softnic0",errno="ENOBUFS"} 0
softnic_link_recv_errors_total{device="softnic0",errno="EPERM"} 0
softnic_link_recv_errors_total{device="softnic0",errno="other"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"softnic_link_send_errors_total", "softnic_link_recv_errors_total"); err != nil {
		t.Fatal(err)
	}
	l.s.TxPackets = 9
	if n := testutil.CollectAndCount(c, "softnic_udp_tx_packets_total"); n != 1 {
		t.Fatalf("%d tx_packets metrics", n)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
}

func TestServe(t *testing.T) {
	d := &fakeDevice{name: "softnic0"}
	d.c.RcvdPkts.Store(42)
	reg := prometheus.NewRegistry()
	if err := Register(reg, d); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	shutdown, err := Serve(addr, reg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `softnic_rcvd_pkts_total{device="softnic0"} 42`; !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, body)
	}
	if _, err := Serve(addr, reg); err == nil {
		t.Fatal("second server on the same address started")
	}
	shutdown()
	shutdown() // idempotent
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}
