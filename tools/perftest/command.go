package perftest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

// opts returns the options of perftest's ib_<verb>_<test>, with
// usage text; unsupported ones are listed so that they fail clearly.
func opts(v Verb, t TestKind) (opts []toolcmd.Opt, unsupported []getopt.Option) {
	o := toolcmd.NewOpt
	R, N := getopt.RequiredArg, getopt.NoArg
	opts = []toolcmd.Opt{
		o('a', "all", N, "", "Run sizes from 2 till 2^23"),
	}
	if v == Atomic {
		opts = append(opts, o('A', "atomic_type", R, "<type>", "type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)"))
	}
	opts = append(opts,
		o('c', "connection", R, "<RC/UC/UD>", "connection type RC/UC/UD (default RC)"))
	if t == Lat {
		opts = append(opts, o('C', "report-cycles", N, "", "report times in cpu cycle units (softnic: nanoseconds)"))
	}
	opts = append(opts,
		o('d', "ib-dev", R, "<dev>", "Use IB device <dev> (softnic: names the NIC; default softnic0)"),
		o('D', "duration", R, "<seconds>", "Run test for a customized period of seconds."),
	)
	if v != Write {
		opts = append(opts, o('e', "events", N, "", "Sleep on CQ events (default poll)"))
	}
	opts = append(opts,
		o('f', "margin", R, "<seconds>", "measure results within margins. (default=2sec)"),
		o('F', "CPU-freq", N, "", "Do not show a warning even if cpufreq_ondemand module is loaded"),
	)
	if t == Lat {
		opts = append(opts, o('H', "report-histogrm", N, "", "Print out all results (default print summary only)"))
	}
	opts = append(opts, o('i', "ib-port", R, "<port>", "Use port <port> of IB device (default 1)"))
	if v == Send || v == Write {
		opts = append(opts, o('I', "inline_size", R, "<size>", "Max size of message to be sent in inline"))
	}
	opts = append(opts,
		o('m', "mtu", R, "<mtu>", "MTU size : 256 - 4096 (default port mtu)"),
		o('n', "iters", R, "<iters>", "Number of exchanges (at least 5, default 1000)"),
	)
	if t == BW {
		opts = append(opts, o('N', "noPeak", N, "", "Cancel peak-bw calculation (default with peak up to iters=20000)"))
	}
	if v == Read || v == Atomic {
		opts = append(opts, o('o', "outs", R, "<num>", "num of outstanding read/atom(default max of device)"))
	}
	opts = append(opts, o('p', "port", R, "<port>", "Listen on/connect to port <port> (default 18515)"))
	if t == BW {
		opts = append(opts,
			o('q', "qp", R, "<num of qp's>", "Num of qp's(default 1)"),
			o('Q', "cq-mod", R, "", "Generate Cqe only after <--cq-mod> completion"))
	}
	if v == Send {
		opts = append(opts, o('r', "rx-depth", R, "<dep>", "Rx queue size (default 512)."))
	} else {
		opts = append(opts, o('r', "rx-depth", R, "<dep>", "Rx queue size (RDMA verbs: 1)."))
	}
	opts = append(opts,
		o('s', "size", R, "<size>", "Size of message to exchange"),
		o('S', "sl", R, "<sl>", "SL (default 0)"),
		o('t', "tx-depth", R, "<dep>", "Size of tx queue (default 128)"),
		o('u', "qp-timeout", R, "<timeout>", "QP timeout, timeout value is 4 usec * 2 ^(timeout), default 14"),
	)
	if t == Lat {
		opts = append(opts, o('U', "report-unsorted", N, "", "(implies -H) print out unsorted results (default sorted)"))
	}
	opts = append(opts,
		o('V', "version", N, "", "Display version number"),
		o('x', "gid-index", R, "<index>", "Test uses GID with GID index (softnic: its one GID is index 0)"),
		o(0, "dont_xchg_versions", N, "", "Do not exchange versions and MTU with other side"),
		o(0, "ipv6", N, "", "Use IPv6 GID for the out-of-band socket"),
		o(0, "disable_pcie_relaxed", N, "", "Disable PCIe relaxed ordering (no effect on softnic)"),
		o(0, "output", R, "<units>", "Set verbosity output level: bandwidth , message_rate, latency"),
		o(0, "report_gbits", N, "", "Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)"),
		o(0, "source_ip", R, "<ip>", "Source IP of the interface used for connection establishment"),
		o(0, "tclass", R, "<value>", "Set the Traffic Class in GRH (if GRH is in use)"),
		o(0, "use_old_post_send", N, "", "Use old post send flow (softnic always does)"),
		o('z', "comm_rdma_cm", N, "", "Communicate with rdma_cm module to exchange data - use regular QPs"),
		o('R', "rdma_cm", N, "", "Connect QPs with rdma_cm and run test on those QPs"),
		o(0, "retry_count", R, "<value>", "Set retry count value in rdma_cm mode (no effect)"),
		o(0, "json", N, "", "softnic: print the results as one JSON object instead of the text table (warnings on stderr)"),
		o(0, "check", N, "", "softnic: fill buffers with patterns and check the data after the run (needs softnic with --check on both sides)"),
		o(0, "cpuprofile", R, "<file>", "softnic: write a CPU profile of the run to <file> (go tool pprof)"),
		o(0, "blockprofile", R, "<file>", "softnic: write a profile of where the run's goroutines blocked, every event, to <file> (go tool pprof)"),
		o(0, "mutexprofile", R, "<file>", "softnic: write a profile of the run's contended mutexes, every contention, to <file> (go tool pprof)"),
		o(0, "trace", R, "<file>", "softnic: write an execution trace of the run (every goroutine's runs, waits and system calls) to <file> (go tool trace)"),
	)
	for _, s := range "wyMlBEJjKkTLXWgvbOZPG" {
		unsupported = append(unsupported, getopt.Option{Short: s, Arg: map[bool]getopt.ArgKind{true: R, false: N}[strings.ContainsRune("wyMlBEJjKkTLXW", s)]})
	}
	for _, l := range []string{"force-link", "remote_mac", "local_mac", "remote_ip", "local_ip", "remote_port", "local_port",
		"pkey_index", "inline_recv", "burst_size", "typical_pkt_size", "rate_limit", "rate_limit_type", "rate_units",
		"out_json_file", "latency_gap", "flow_label", "use_cuda", "use_cuda_bus_id", "use_rocm", "mmap", "mmap-offset",
		"dlid", "wait_destroy", "flows", "flows_burst", "reply_every", "vlan_pcp", "recv_post_list", "aes_block_size",
		"kek_path", "credentials_path", "data_enc_keys_number", "data_enc_key_app_path", "log_dci_streams",
		"log_active_dci_streams", "post_list", "limit_bw", "limit_msgrate", "MGID", "source_mac", "dest_mac", "dest_ip",
		"dest_port", "source_port", "ethertype", "tos", "hop_limit", "vector", "report-counters"} {
		unsupported = append(unsupported, getopt.Option{Long: l, Arg: R})
	}
	for _, l := range []string{"run_infinitely", "use-srq", "report-both", "reversed", "tcp", "cpu_util", "out_json", "raw_ipv6",
		"report-per-port", "odp", "use_hugepages", "promiscuous", "sniffer", "raw_mcast", "mr_per_qp", "perform_warm_up",
		"vlan_en", "aes_xts", "encrypt_on_tx", "sig_before", "use_ooo", "mcg", "mac_fwd",
		"use_rss", "bidirectional", "dualport", "server", "client"} {
		unsupported = append(unsupported, getopt.Option{Long: l, Arg: N})
	}
	return opts, unsupported
}

func usage(v Verb, t TestKind) func(io.Writer) {
	return func(w io.Writer) {
		c := Defaults(v, t)
		n := c.Tool()
		fmt.Fprintf(w, "usage: softnic %s [options] [host]\n\n", n)
		fmt.Fprintf(w, "softnic's version of perftest's ib_%s: it pairs with ib_%s (perftest 4.5) in\neither role.\n\n", n, n)
		fmt.Fprintf(w, "  softnic %s            start a server and wait for connection\n", n)
		fmt.Fprintf(w, "  softnic %s <host>     connect to server at <host>\n\nOptions:\n", n)
		opts, _ := opts(v, t)
		toolcmd.WriteOpts(w, opts)
		fmt.Fprintln(w, "\nsoftnic options:")
		toolcmd.WriteOpts(w, toolcmd.NICOpts)
		fmt.Fprintln(w, "\nThe out-of-band exchange on TCP port -p, the header, the address lines and the\n"+
			"result table are perftest's. On a terminal, runs longer than two seconds show a\nprogress line on standard error.")
	}
}

// Command is "softnic <verb>_<test>": perftest's ib_<verb>_<test>'s
// options, then Run.
func Command(v Verb, t TestKind) toolcmd.Command {
	verb := [...]string{Write: "RDMA WRITE", Read: "RDMA READ", Send: "SEND", Atomic: "atomic"}[v]
	test := map[TestKind]string{BW: "bandwidth", Lat: "latency"}[t]
	cfg := Defaults(v, t)
	return toolcmd.Command{Name: cfg.Tool(), Summary: fmt.Sprintf("%s %s, like perftest's ib_%s", verb, test, cfg.Tool()),
		Run: func(env *toolnic.Env, args []string) int { return run(v, t, env, args) }}
}

func run(v Verb, t TestKind, env *toolnic.Env, args []string) int {
	cfg := Defaults(v, t)
	name := cfg.Tool()
	opts, unsupported := opts(v, t)
	all := append([]toolcmd.Opt(nil), opts...)
	for _, u := range unsupported {
		all = append(all, toolcmd.Opt{Option: u})
	}
	r, status, ok := toolcmd.Parse(env, name, all, args, usage(v, t))
	if !ok {
		return status
	}
	for _, m := range r.Matches {
		for _, u := range unsupported {
			if m.Opt.Name() == u.Name() {
				fmt.Fprintf(env.Err, "softnic %s: %s is not supported by softnic\n", name, m.Opt.Spelling())
				return toolcmd.ExitFail
			}
		}
	}
	if r.Has("version") {
		fmt.Fprintf(env.Out, "Version: %s\n", Version)
		return toolcmd.ExitOK
	}
	host, err := toolcmd.ServerHost(env, r, config(&cfg, r), "Invalid Command line. Please check command rerun: more than one host %q")
	if err != nil {
		return toolcmd.BadUsage(env, name, err)
	}
	if host != "" {
		cfg.ServerName = host
	}
	for _, p := range profiles {
		m, ok := r.Last(p.flag)
		if !ok {
			continue
		}
		stop, err := p.start(m.Value)
		if err != nil {
			return toolcmd.Fail(env, name, fmt.Errorf("--%s: %w", p.flag, err))
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(env.Err, "softnic %s: --%s: %v\n", name, p.flag, err)
			}
		}()
	}
	stdout, stderr := env.Out, env.Err
	err = toolcmd.RunOnNIC(env, cfg.IBDev, cfg.ServerName, cfg.RDMACM || cfg.CommRDMACM, func(ctx context.Context, tenv toolnic.Env) error {
		e := Env{Env: tenv, JSON: r.Has("json")}
		if isTerminal(stdout) && isTerminal(stderr) && !e.JSON {
			e.Progress = stderr
		}
		_, err := Run(ctx, cfg, e)
		return err
	})
	if err != nil {
		return toolcmd.Fail(env, name, err)
	}
	return toolcmd.ExitOK
}

// profiles are the perftest look-alikes' profiling flags. Each covers
// the NIC's opening, the out-of-band exchange and the run; start begins
// one into the file path (runtime/pprof's format, read by go tool
// pprof), and stop ends it and closes the file.
var profiles = []struct {
	flag  string
	start func(path string) (stop func() error, err error)
}{
	{"cpuprofile", startCPUProfile},
	{"blockprofile", func(path string) (func() error, error) {
		// Every blocking event: the waits of a latency run are few and
		// each is worth seeing.
		return startRuntimeProfile(path, "block", runtime.SetBlockProfileRate, 1)
	}},
	{"mutexprofile", func(path string) (func() error, error) {
		return startRuntimeProfile(path, "mutex", func(r int) { runtime.SetMutexProfileFraction(r) }, 1)
	}},
	{"trace", startTrace},
}

// startTrace writes the runtime's execution trace (runtime/trace) to
// path until stopped: where each goroutine ran and waited, when the
// network poller woke it, each system call, to the microsecond.
func startTrace(path string) (stop func() error, err error) {
	return startToFile(path, trace.Start, trace.Stop)
}

func startCPUProfile(path string) (stop func() error, err error) {
	return startToFile(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startToFile creates path, starts a recording into it (start) and
// returns what ends the recording (end) and closes the file.
func startToFile(path string, start func(io.Writer) error, end func()) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		end()
		return f.Close()
	}, nil
}

// startRuntimeProfile turns on the runtime's named profile (block,
// mutex) with set(rate) and writes it to path when stopped.
func startRuntimeProfile(path, name string, set func(int), rate int) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	set(rate)
	return func() error {
		set(0)
		err := pprof.Lookup(name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// config applies the parsed options to cfg with perftest's
// checks (perftest_parameters.c parser).
func config(cfg *Config, r *getopt.Result) error {
	intOpt := func(name, what string, lo, hi int64) (int64, bool, error) {
		m, ok := r.Last(name)
		if !ok {
			return 0, false, nil
		}
		v, err := getopt.Int(m.Value)
		if err != nil || v < lo || v > hi {
			return 0, true, fmt.Errorf(" %s should be between %d and %d (got %q)", what, lo, hi, m.Value)
		}
		return v, true, nil
	}
	set := func(name, what string, lo, hi int64, dst *int) error {
		v, ok, err := intOpt(name, what, lo, hi)
		if ok && err == nil {
			*dst = int(v)
		}
		return err
	}
	if err := set("port", "Port", 0, 65535, &cfg.Port); err != nil {
		return err
	}
	cfg.RDMACM = r.Has("rdma_cm")
	cfg.CommRDMACM = r.Has("comm_rdma_cm")
	if err := set("ib-port", "IB Port", 1, 255, &cfg.IBPort); err != nil {
		return err
	}
	if err := set("iters", "Iteration num", MinIter, MaxIter, &cfg.Iters); err != nil {
		return err
	}
	if err := set("tx-depth", "Tx depth", 1, MaxTx, &cfg.TxDepth); err != nil {
		return err
	}
	if err := set("rx-depth", " Rx depth", 1, MaxRx, &cfg.RxDepth); err != nil {
		return err
	}
	if r.Has("rx-depth") && cfg.Verb != Send && cfg.RxDepth > DefRxRDMA {
		return fmt.Errorf(" On RDMA verbs rx depth can be only 1")
	}
	if err := set("sl", "Service Level", 0, 15, &cfg.SL); err != nil {
		return err
	}
	if err := set("gid-index", "Gid index", 0, 64, &cfg.GIDIndex); err != nil {
		return err
	}
	if err := set("qp", "num of Qps", 1, MaxQPNum, &cfg.NumQP); err != nil {
		return err
	}
	if err := set("inline_size", "Max inline", 0, MaxInline, &cfg.Inline); err != nil {
		return err
	}
	if err := set("outs", "Outstanding Reads", 0, 1<<16, &cfg.OutReads); err != nil {
		return err
	}
	if v, ok, err := intOpt("cq-mod", "CQ moderation", 1, MaxCQMod); err != nil {
		return err
	} else if ok {
		cfg.CQMod, cfg.CQModSet = int(v), true
	}
	if v, ok, err := intOpt("qp-timeout", "QP Timeout", 0, 31); err != nil {
		return err
	} else if ok {
		cfg.QPTimeout = uint8(v)
	}
	if v, ok, err := intOpt("tclass", "Traffic class", 0, 255); err != nil {
		return err
	} else if ok {
		cfg.TClass = uint8(v)
	}
	if m, ok := r.Last("mtu"); ok {
		v, err := getopt.Int(m.Value)
		switch {
		case err != nil:
			return fmt.Errorf(" MTU should be an integer (got %q)", m.Value)
		case v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096:
			cfg.MTU = int(v)
		default:
			return fmt.Errorf(" Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}", v)
		}
	}
	if m, ok := r.Last("size"); ok {
		s, factor := m.Value, uint64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			s, factor = strings.TrimSuffix(s, "K"), 1024
		case strings.HasSuffix(s, "M"):
			s, factor = strings.TrimSuffix(s, "M"), 1024*1024
		}
		v, err := getopt.Uint(s)
		if err != nil || v*factor < 1 || v*factor > 0xffffffff/2 {
			return fmt.Errorf(" Message Size should be between %d and %d (got %q)", 1, 0xffffffff/2, m.Value)
		}
		cfg.Size, cfg.SizeSet = v*factor, true
	}
	if m, ok := r.Last("duration"); ok {
		v, err := getopt.Int(m.Value)
		if err != nil || v <= 0 {
			return fmt.Errorf(" Duration period should be a positive integer (got %q)", m.Value)
		}
		cfg.Duration = time.Duration(v) * time.Second
	}
	if m, ok := r.Last("margin"); ok {
		v, err := getopt.Int(m.Value)
		if err != nil || v < 0 {
			return fmt.Errorf(" Margin should be a non-negative integer (got %q)", m.Value)
		}
		cfg.Margin = time.Duration(v) * time.Second
	}
	if m, ok := r.Last("connection"); ok {
		c, err := ParseConn(m.Value, cfg.Verb)
		if err != nil {
			return err
		}
		cfg.Conn = c
	}
	if m, ok := r.Last("atomic_type"); ok {
		a, err := ParseAtomic(m.Value)
		if err != nil {
			return err
		}
		cfg.Atomic = a
	}
	if m, ok := r.Last("output"); ok {
		switch m.Value {
		case "bandwidth":
			cfg.Output = OutputBW
		case "message_rate":
			cfg.Output = OutputMsgRate
		case "latency":
			cfg.Output = OutputLat
		default:
			return fmt.Errorf(" Invalid verbosity level output flag. Please use bandwidth, latency, message_rate")
		}
		if cfg.Test == BW && cfg.Output == OutputLat {
			return fmt.Errorf(" Output verbosity level for BW can be: bandwidth, message_rate")
		}
		if cfg.Test == Lat && cfg.Output != OutputLat {
			return fmt.Errorf(" Output verbosity level for LAT can be: latency")
		}
	}
	if m, ok := r.Last("ib-dev"); ok {
		cfg.IBDev = m.Value
	}
	if m, ok := r.Last("source_ip"); ok {
		cfg.SourceIP = m.Value
	}
	cfg.All = r.Has("all")
	cfg.Events = r.Has("events")
	cfg.NoPeak = r.Has("noPeak")
	cfg.Cycles = r.Has("report-cycles")
	cfg.Unsorted = r.Has("report-unsorted")
	cfg.Histogram = r.Has("report-histogrm")
	cfg.ReportGbit = r.Has("report_gbits")
	cfg.NoXchgVer = r.Has("dont_xchg_versions")
	cfg.IPv6 = r.Has("ipv6")
	cfg.Check = r.Has("check")
	if r.Has("retry_count") {
		if _, err := strconv.Atoi(mustLast(r, "retry_count")); err != nil {
			return fmt.Errorf(" Retry Count should be an integer")
		}
	}
	return nil
}

func mustLast(r *getopt.Result, name string) string {
	m, _ := r.Last(name)
	return m.Value
}
