// Package metrics exports softnic's counters to Prometheus (STYLE.md 13).
//
// The engine only increments fixed atomics (transport.Counters, named
// after rxe's hw_counters in rxe_hw_counters.h; link.UDPStats for the UDP
// link); a Collector reads a snapshot of them (atomic loads) when
// Prometheus scrapes, so the datapath never calls Prometheus. Collectors are
// registered on a registry the caller injects, never the global one.
//
// Names keep rxe's counter names recognisable under a softnic_ prefix,
// with _total on every counter as Prometheus names them
// (softnic_rcvd_pkts_total is rxe's rcvd_pkts), and a device label.
// Drops by cause share one metric with a reason label.
package metrics

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
)

// Device is what a collector reads: *verbs.Device is one.
type Device interface {
	Name() string
	Counters() ibv.Counters
}

// LinkStatser is a link with counters: *link.UDPLink is one.
type LinkStatser interface {
	Stats() link.UDPStats
}

// counter is one exported value: a metric name (with help) and, for
// metrics split by a label, the label's value.
type counter struct {
	name, help string
	label      string // label name for split metrics ("" for none)
	value      string // label value
	get        func(*ibv.Counters) uint64
}

// deviceCounters maps every field of transport.Counters to a metric;
// TestEveryCounterExported keeps it complete.
var deviceCounters = []counter{
	{name: "sent_pkts", help: "Packets sent (rxe sent_pkts).", get: func(c *ibv.Counters) uint64 { return c.SentPkts }},
	{name: "rcvd_pkts", help: "Packets received (rxe rcvd_pkts).", get: func(c *ibv.Counters) uint64 { return c.RcvdPkts }},
	{name: "sent_bytes", help: "UDP payload bytes sent.", get: func(c *ibv.Counters) uint64 { return c.SentBytes }},
	{name: "rcvd_bytes", help: "UDP payload bytes received.", get: func(c *ibv.Counters) uint64 { return c.RcvdBytes }},
	{name: "duplicate_request", help: "Duplicate requests received (rxe duplicate_request).", get: func(c *ibv.Counters) uint64 { return c.DuplicateRequest }},
	{name: "out_of_sequence", help: "Out-of-sequence requests received (rxe out_of_sequence).", get: func(c *ibv.Counters) uint64 { return c.OutOfSequence }},
	{name: "rcvd_rnr_err", help: "RNR NAKs received (rxe rcvd_rnr_err).", get: func(c *ibv.Counters) uint64 { return c.RcvdRNRErr }},
	{name: "send_rnr_err", help: "RNR NAKs sent (rxe send_rnr_err).", get: func(c *ibv.Counters) uint64 { return c.SendRNRErr }},
	{name: "rcvd_seq_err", help: "Sequence-error NAKs received (rxe rcvd_seq_err).", get: func(c *ibv.Counters) uint64 { return c.RcvdSeqErr }},
	{name: "ack_deferred", help: "ACKs deferred (rxe ack_deferred).", get: func(c *ibv.Counters) uint64 { return c.AckDeferred }},
	{name: "answer_joined", help: "Read batches whose ACKs waited for the application's answer (held by the receive goroutine or deferred by a poll) and left with it in one send (softnic).", get: func(c *ibv.Counters) uint64 { return c.AnswerJoined }},
	{name: "rx_turn_timeout", help: "Read batches handed to their QPs before a batch the link read earlier, after waiting 100 ms for it (softnic).", get: func(c *ibv.Counters) uint64 { return c.RxTurnTimeout }},
	{name: "answer_missed", help: "Read batches whose ACKs waited for an application's answer that did not come (softnic).", get: func(c *ibv.Counters) uint64 { return c.AnswerMissed }},
	{name: "poll_lease_step_offs", help: "Times the receive goroutine, finding the socket empty, stepped off the link for an application busy-polling it (softnic; only with the device's busy polling).", get: func(c *ibv.Counters) uint64 { return c.PollLeaseStepOffs }},
	{name: "poll_lease_expired", help: "Times the receive goroutine took the link back from an application whose busy polling stopped without a blocking wait (softnic).", get: func(c *ibv.Counters) uint64 { return c.PollLeaseExpired }},
	{name: "retry_exceeded_err", help: "Requests that ran out of transport retries (rxe retry_exceeded_err).", get: func(c *ibv.Counters) uint64 { return c.RetryExceededErr }},
	{name: "retry_rnr_exceeded_err", help: "Requests that ran out of RNR retries (rxe retry_rnr_exceeded_err).", get: func(c *ibv.Counters) uint64 { return c.RetryRNRExceededErr }},
	{name: "completer_retry_err", help: "Retries started by the completer (rxe completer_retry_err).", get: func(c *ibv.Counters) uint64 { return c.CompleterRetryErr }},
	{name: "send_err", help: "Packets the link could not send (rxe send_err).", get: func(c *ibv.Counters) uint64 { return c.SendErr }},
	{name: "link_downed", help: "Link down events (rxe link_downed).", get: func(c *ibv.Counters) uint64 { return c.LinkDowned }},
	{name: "rdma_sends", help: "RDMA send operations (rxe rdma_sends).", get: func(c *ibv.Counters) uint64 { return c.RDMASends }},
	{name: "rdma_recvs", help: "RDMA receive operations (rxe rdma_recvs).", get: func(c *ibv.Counters) uint64 { return c.RDMARecvs }},
	{name: "icrc_err", help: "Packets dropped for a bad ICRC.", get: func(c *ibv.Counters) uint64 { return c.ICRCErr }},
	{name: "icrc_unverified", help: "Packets accepted without an ICRC check (the link could not see the IP header).", get: func(c *ibv.Counters) uint64 { return c.ICRCUnverified }},
	{name: "retransmitted_pkts", help: "Packets sent again by go-back-N.", get: func(c *ibv.Counters) uint64 { return c.Retransmits }},
	{name: "retransmit_timeouts", help: "Retransmit timer expiries.", get: func(c *ibv.Counters) uint64 { return c.Timeouts }},
	{name: "early_retries", help: "Go-back-N retries started two round trips after the last progress while losses keep the window small, without spending a retry (softnic).", get: func(c *ibv.Counters) uint64 { return c.EarlyRetries }},
	{name: "np_ecn_marked_roce_packets", help: "CE-marked RoCE packets received, the notification point of congestion control (mlx5 np_ecn_marked_roce_packets).", get: func(c *ibv.Counters) uint64 { return c.NPECNMarkedRoCEPackets }},
	{name: "np_cnp_sent", help: "CNPs sent in answer to CE-marked packets (mlx5 np_cnp_sent).", get: func(c *ibv.Counters) uint64 { return c.NPCNPSent }},
	{name: "rp_cnp_handled", help: "CNPs received that a QP's reaction point acted on (mlx5 rp_cnp_handled).", get: func(c *ibv.Counters) uint64 { return c.RPCNPHandled }},
	{name: "rp_cnp_ignored", help: "CNPs received for a QP without congestion control, dropped (mlx5 rp_cnp_ignored).", get: func(c *ibv.Counters) uint64 { return c.RPCNPIgnored }},
	{name: "held_requests", help: "Requests received beyond the expected PSN and held for the responder's reorder window instead of NAKed at once (softnic).", get: func(c *ibv.Counters) uint64 { return c.HeldRequests }},
	{name: "reasked_requests", help: "Requests sent again alone to ask for responses found lost: a run of READ responses, an atomic's (softnic).", get: func(c *ibv.Counters) uint64 { return c.Reasked }},
	drop("malformed", func(c *ibv.Counters) uint64 { return c.DropMalformed }),
	drop("no_qp", func(c *ibv.Counters) uint64 { return c.DropNoQP }),
	drop("qp_state", func(c *ibv.Counters) uint64 { return c.DropState }),
	drop("address", func(c *ibv.Counters) uint64 { return c.DropAddr }),
	drop("bad_pkey", func(c *ibv.Counters) uint64 { return c.DropPKey }),
	drop("qkey_violation", func(c *ibv.Counters) uint64 { return c.DropQKey }),
	drop("queue_full", func(c *ibv.Counters) uint64 { return c.DropQueueFull }),
	drop("length", func(c *ibv.Counters) uint64 { return c.DropLength }),
	drop("uc_message", func(c *ibv.Counters) uint64 { return c.DropUCMessage }),
	drop("no_recv_wqe", func(c *ibv.Counters) uint64 { return c.DropNoRecvWQE }),
	drop("response", func(c *ibv.Counters) uint64 { return c.DropResponse }),
	nak("remote_access", func(c *ibv.Counters) uint64 { return c.RemoteAccessErr }),
	nak("invalid_request", func(c *ibv.Counters) uint64 { return c.InvalidRequestErr }),
	nak("remote_operational", func(c *ibv.Counters) uint64 { return c.RemoteOpErr }),
}

func drop(reason string, get func(*ibv.Counters) uint64) counter {
	return counter{name: "rcvd_dropped_pkts", help: "Received packets dropped, by reason (bad_pkey is rxe's bad_pkey_cntr, qkey_violation its qkey_viol_cntr).",
		label: "reason", value: reason, get: get}
}

func nak(reason string, get func(*ibv.Counters) uint64) counter {
	return counter{name: "sent_naks", help: "NAKs sent, by cause (AETH syndrome).", label: "reason", value: reason, get: get}
}

// Collector is a prometheus.Collector over one device's counters.
type Collector struct {
	dev   Device
	descs []*prometheus.Desc // one per deviceCounters entry
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector over dev's counters, labelled
// device=dev.Name().
func NewCollector(dev Device) *Collector {
	c := &Collector{dev: dev}
	byName := map[string]*prometheus.Desc{}
	for _, m := range deviceCounters {
		d, ok := byName[m.name]
		if !ok {
			var labels []string
			if m.label != "" {
				labels = []string{m.label}
			}
			d = prometheus.NewDesc("softnic_"+m.name+"_total", m.help, labels, prometheus.Labels{"device": dev.Name()})
			byName[m.name] = d
		}
		c.descs = append(c.descs, d)
	}
	return c
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, d := range c.descs {
		if !seen[d] {
			seen[d] = true
			ch <- d
		}
	}
}

// Collect reads every counter from one snapshot of the device's.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctr := c.dev.Counters()
	for i, m := range deviceCounters {
		v := float64(m.get(&ctr))
		if m.label != "" {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, v, m.value)
		} else {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, v)
		}
	}
}

// Register registers a collector for dev on reg. Two devices need two
// names.
func Register(reg prometheus.Registerer, dev Device) error {
	return reg.Register(NewCollector(dev))
}

// linkCounter is one exported value of link.UDPStats: a metric and, for
// metrics split by a label, the label's name (reason when empty) and
// value.
type linkCounter struct {
	name, help, reason string
	label              string
	get                func(*link.UDPStats) uint64
}

// linkCounters lists the link's metrics; the send and receive errors by
// errno (softnic_link_send_errors_total{errno="EMSGSIZE"}) follow, one
// per link.LinkErrno.
var linkCounters = append([]linkCounter{
	{"udp_tx_packets", "Datagrams the UDP link's socket accepted.", "", "", func(s *link.UDPStats) uint64 { return s.TxPackets }},
	{"udp_tx_bytes", "UDP payload bytes the UDP link sent.", "", "", func(s *link.UDPStats) uint64 { return s.TxBytes }},
	{"udp_tx_gso_sends", "UDP GSO sends of more than one datagram.", "", "", func(s *link.UDPStats) uint64 { return s.TxGSOSends }},
	{"udp_tx_dropped", "Datagrams the UDP link dropped on send, by reason.", "send_error", "", func(s *link.UDPStats) uint64 { return s.TxErrors }},
	{"udp_tx_dropped", "", "bad_encap", "", func(s *link.UDPStats) uint64 { return s.TxBadEncap }},
	{"udp_rx_packets", "Datagrams the UDP link received.", "", "", func(s *link.UDPStats) uint64 { return s.RxPackets }},
	{"udp_rx_bytes", "UDP payload bytes the UDP link received.", "", "", func(s *link.UDPStats) uint64 { return s.RxBytes }},
	{"udp_rx_gro_buffers", "Receive buffers holding several GRO-coalesced datagrams.", "", "", func(s *link.UDPStats) uint64 { return s.RxGRO }},
	{"udp_rx_lent", "Datagrams the UDP link handed over in place, in its GRO buffer.", "", "", func(s *link.UDPStats) uint64 { return s.RxLent }},
	{"udp_rx_lent_released", "Datagrams handed over in place whose buffer reference was given back.", "", "", func(s *link.UDPStats) uint64 { return s.RxLentReleased }},
	{"udp_rx_dropped", "Datagrams lost on receive, by reason (kernel: socket buffer full, SO_RXQ_OVFL).", "truncated", "", func(s *link.UDPStats) uint64 { return s.RxTruncated }},
	{"udp_rx_dropped", "", "kernel", "", func(s *link.UDPStats) uint64 { return s.RxKernelDrops }},
	{"udp_rx_errors", "Failed receive calls (retried).", "", "", func(s *link.UDPStats) uint64 { return s.RxErrors }},
	{"udp_tx_gso_fallbacks", "UDP GSO sends the kernel refused with EIO (GSO then turned off).", "", "", func(s *link.UDPStats) uint64 { return s.TxGSOFallbacks }},
}, errnoCounters()...)

// errnoCounters returns the link's error counters by errno and direction.
func errnoCounters() []linkCounter {
	var cs []linkCounter
	for i := range link.NumLinkErrnos {
		send, recv := "", ""
		if i == 0 {
			send = "Datagrams the link dropped because sendmmsg failed, by errno (other: any errno not listed)."
			recv = "Failed recvmmsg calls, by errno (other: any errno not listed); no datagram is lost."
		}
		cs = append(cs,
			linkCounter{"link_send_errors", send, i.String(), "errno", func(s *link.UDPStats) uint64 { return s.TxErrnos[i] }},
			linkCounter{"link_recv_errors", recv, i.String(), "errno", func(s *link.UDPStats) uint64 { return s.RxErrnos[i] }})
	}
	return cs
}

// LinkCollector is a prometheus.Collector over a UDP link's counters.
type LinkCollector struct {
	l     LinkStatser
	descs []*prometheus.Desc
}

var _ prometheus.Collector = (*LinkCollector)(nil)

// NewLinkCollector returns a collector over l's counters, labelled
// device=device.
func NewLinkCollector(device string, l LinkStatser) *LinkCollector {
	c := &LinkCollector{l: l}
	byName := map[string]*prometheus.Desc{}
	for _, m := range linkCounters {
		d, ok := byName[m.name]
		if !ok {
			var labels []string
			if m.reason != "" {
				labels = []string{"reason"}
				if m.label != "" {
					labels = []string{m.label}
				}
			}
			d = prometheus.NewDesc("softnic_"+m.name+"_total", m.help, labels, prometheus.Labels{"device": device})
			byName[m.name] = d
		}
		c.descs = append(c.descs, d)
	}
	return c
}

// Describe sends the descriptors of every metric.
func (c *LinkCollector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, d := range c.descs {
		if !seen[d] {
			seen[d] = true
			ch <- d
		}
	}
}

// Collect takes one snapshot of the link's counters.
func (c *LinkCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	for i, m := range linkCounters {
		v := float64(m.get(&s))
		if m.reason != "" {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, v, m.reason)
		} else {
			ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, v)
		}
	}
}

// Handler returns the /metrics handler for reg.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// WriteText writes reg's metrics to w in Prometheus's text exposition
// format, what /metrics serves.
func WriteText(w io.Writer, reg *prometheus.Registry) error {
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(bw, mf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Serve serves reg's metrics at http://addr/metrics until shutdown is
// called. It fails at once if addr cannot be listened on.
func Serve(addr string, reg *prometheus.Registry) (shutdown func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return ServeListener(ln, reg), nil
}

// ServeListener serves reg's metrics at /metrics on ln until shutdown is
// called; shutdown closes ln and waits (up to a second) for requests in
// flight.
func ServeListener(ln net.Listener, reg *prometheus.Registry) (shutdown func()) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns when shut down, or if ln fails
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if srv.Shutdown(ctx) != nil {
				srv.Close()
			}
			<-done
		})
	}
}
