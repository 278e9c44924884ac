package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/bench"
)

const benchUsage = `Usage: heureka bench [flags]

Runs the fixed workload of docs/bench.md (W1 register, W2 renew, W3 full
registry, W4 delta, W5 one app, W6 propagation, W7 memory, W8 crash
detection) against a Eureka-compatible cluster and against etcd, with a
'limit' column for reads, and prints one table (or --json). Progress goes to
stderr. The whole table at 10,000 instances:

  heureka bench --local 3 --etcd local

With Spring Cloud's eureka-server beside heureka (after make deps):

  heureka bench --local 3 --eureka-server local --etcd local

The summary table at the top of BENCHMARKS.md (all of the above at 10,000,
50,000 and 200,000 instances; make bench-summary builds what it needs first):

  heureka bench --summary BENCHMARKS.md

The scale table of BENCHMARKS.md (heureka and the limit at 10,000, 100,000
and 1,000,000 instances, 20 to an application; make bench-scale):

  heureka bench --scale BENCHMARKS.md

The etcd column needs a build with the etcd client (go build -tags
etcdclient ./cmd/heureka, or make build-bench); the server binary leaves it
out.

Flags:
`

// benchConfig is one parse of `heureka bench`'s arguments: the suite they
// describe and the options that are not the suite's.
type benchConfig struct {
	suite       *bench.Suite
	asJSON      bool
	jsonOut     string
	compare     string
	tableFrom   string
	summary     string
	summaryFrom string
	sizes       []int
	// scale is --scale: summary is its file, with the scale table's
	// markers, sizes and per-size workload (scaleSize).
	scale bool
	// set are the flags given on the command line.
	set map[string]bool
	// noEtcdClient: the summary would have run etcd, but this build
	// cannot.
	noEtcdClient bool
}

// benchFlagValues are the flags parseBench turns into the suite and
// its targets after parsing.
type benchFlagValues struct {
	local                                          *int
	targets, localArgs                             *string
	cacheRefresh, deltaRetention, evictionInterval *time.Duration
	etcdMode, etcdEndpoints, esMode, sizes, scale  *string
	etcdMembers                                    *int
	esBound                                        *time.Duration
	quiet                                          *bool
}

// parseBench parses `heureka bench`'s arguments into a fresh suite. It
// returns the exit code to end with when the arguments end the command
// (help, a bad flag), else -1.
func parseBench(args []string) (*benchConfig, int) {
	fs := newFlagSet("bench")
	c := &benchConfig{suite: &bench.Suite{}}
	v := declareBenchFlags(fs, c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, benchUsage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return nil, 0
		}
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "heureka bench: unexpected argument %q\n", fs.Arg(0))
		return nil, 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.configure(v, set); err != nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return nil, 2
	}
	return c, -1
}

// declareBenchFlags declares the flags: the suite's settings and the
// options write c directly, the rest come back for configure.
func declareBenchFlags(fs *flag.FlagSet, c *benchConfig) *benchFlagValues {
	s := c.suite
	d := bench.DefaultWorkload()
	v := &benchFlagValues{}
	v.local = fs.Int("local", 0, "start a local heureka cluster of this many nodes (from this executable) and bench it")
	fs.StringVar(&s.NodeBinary, "local-bin", "", "heureka executable of the --local nodes (default: this one), e.g. an older build to compare with")
	v.targets = fs.String("targets", "", "comma-separated base URLs of an existing Eureka-compatible cluster (http://host:port,...)")
	v.localArgs = fs.String("local-args", "", "extra flags for the --local nodes' heureka serve, space-separated (e.g. --pprof)")
	v.cacheRefresh = fs.Duration("target-cache-refresh", 30*time.Second, "with --targets: their response cache refresh interval (W4 and W6 wait it out; 0 for heureka, whose default push makes changes visible at once)")
	v.deltaRetention = fs.Duration("target-delta-retention", 0, "with --targets: their delta retention; W4 waits this long after W1 (0: read the delta as it is)")
	v.evictionInterval = fs.Duration("target-eviction-interval", 0, "with --targets: their eviction interval, for W8's note")
	v.etcdMode = fs.String("etcd", "none", "local: start a local etcd cluster; none: no etcd column (--summary: local)")
	v.etcdMembers = fs.Int("etcd-members", 3, "members of the --etcd local cluster")
	v.etcdEndpoints = fs.String("etcd-endpoints", "", "comma-separated client URLs of an existing etcd cluster")
	fs.StringVar(&s.EtcdBinary, "etcd-bin", "etcd", "etcd executable for --etcd local")
	v.esMode = fs.String("eureka-server", "none", "local: start local peers of Spring Cloud's eureka-server beside heureka; none: no eureka-server column (--summary: local)")
	fs.IntVar(&s.LocalEurekaServer, "eureka-server-peers", 3, "peers of the --eureka-server local cluster")
	fs.StringVar(&s.EurekaServerJar, "eureka-server-jar", "e2e/eurekaserver/target/eurekaserver.jar", "the eureka-server jar (built by make deps)")
	fs.BoolVar(&s.EurekaServerNoReadOnly, "eureka-server-no-readonly", false, "turn eureka-server's readOnly response cache off")
	v.esBound = fs.Duration("eureka-server-bound", 25*time.Minute, "bound on the time the eureka-server column's workloads take in all (0: none); the rows it has not measured then say so")
	fs.StringVar(&s.Java, "java", "java", "java executable for --eureka-server local")
	fs.IntVar(&s.Workload.Instances, "instances", d.Instances, "W1: instances to register")
	fs.IntVar(&s.Workload.Apps, "apps", 0, fmt.Sprintf("W1: applications the instances are spread over (default %d, at most --instances)", d.Apps))
	fs.IntVar(&s.Workload.MetadataBytes, "metadata-bytes", d.MetadataBytes, "W1: metadata per instance, in bytes")
	fs.IntVar(&s.Workload.RenewalSecs, "renewal-interval", d.RenewalSecs, fmt.Sprintf("W1: the instances' leaseInfo.renewalIntervalInSecs, which sets the self-preservation threshold W2S is judged by (--scale: %d)", bench.ScaleRenewalSecs))
	fs.IntVar(&s.Writers, "writers", 64, "W1: concurrent writers")
	fs.IntVar(&s.Renewers, "renewers", 64, "W2: concurrent renewing clients")
	fs.IntVar(&s.FullReaders, "full-readers", 8, "W3: concurrent full-registry readers")
	fs.IntVar(&s.Readers, "readers", 32, "W4, W5: concurrent readers")
	fs.DurationVar(&s.Duration, "duration", 5*time.Second, "length of each timed phase (W2–W5 and each limit run); W6 rows stop after 3× this")
	fs.DurationVar(&s.Idle, "idle", 0, "after W1, wait --idle-settle, then measure the local nodes' CPU at rest for this long, given in W1's note (0: not measured)")
	fs.DurationVar(&s.IdleSettle, "idle-settle", bench.DefaultIdleSettle, "--idle: how long to wait after W1 before measuring")
	fs.DurationVar(&s.RenewSoak, "renew-soak", 0, fmt.Sprintf("W2S: renew every instance in turn for this long, watching evictions and self-preservation (0: not run; --scale runs %s at its largest size)", bench.ScaleRenewSoak))
	fs.DurationVar(&s.RegisterTimeout, "register-timeout", 0, "W1: give up registering after this long (0: 5m, or 2s for each 1,000 instances when that is longer)")
	fs.IntVar(&s.Samples, "samples", 300, "W6: samples per row at most")
	fs.IntVar(&s.CrashInstances, "crash-instances", 100, "W8: instances that stop renewing")
	fs.IntVar(&s.CrashLeaseSecs, "crash-lease", 2, "W8: their lease duration in seconds (etcd: TTL)")
	fs.DurationVar(&s.CrashTimeout, "crash-timeout", time.Minute, "W8: give up waiting after this long")
	fs.BoolVar(&s.NoLimit, "no-limit", false, "skip the limit column")
	fs.StringVar(&s.TempDir, "tmp", "", "directory for local clusters' data (default: the system's temp dir)")
	fs.StringVar(&s.KeepLogs, "keep-logs", "", "DIR: copy the local clusters' logs (heureka nodes, etcd members, eureka-server peers) into DIR as they stop; with --local-args \"--log-level debug\" a node's view of every row")
	fs.BoolVar(&c.asJSON, "json", false, "print the report as JSON on stdout instead of the table")
	fs.StringVar(&c.jsonOut, "json-out", "", "also write the JSON report to this file (--summary: a directory for one report per size)")
	fs.StringVar(&c.compare, "compare", "", "A.json,B.json: print how each figure grows from report A to report B, and exit")
	fs.StringVar(&c.tableFrom, "table-from", "", "A.json: print the table of a saved report (--json-out), and exit")
	fs.StringVar(&c.summary, "summary", "", "FILE: run the suite at each --summary-sizes (3 heureka nodes, 3 eureka-server peers, 3 etcd members unless told otherwise) and rewrite the summary table between FILE's bench-summary markers")
	v.sizes = fs.String("summary-sizes", sizeList(bench.SummarySizes), "--summary: comma-separated registry sizes (instances)")
	fs.StringVar(&c.summaryFrom, "summary-from", "", "--summary, --scale: A.json,B.json,...: write the table from these reports (of --json-out) instead of running")
	v.scale = fs.String("scale", "", fmt.Sprintf("FILE: run heureka (3 local nodes) and the limit at %s instances, %d to an application, and rewrite the table between FILE's bench-scale markers (--summary-sizes changes the sizes; --etcd and --eureka-server add columns)", sizeList(bench.ScaleSizes), bench.ScaleInstancesPerApp))
	v.quiet = fs.Bool("quiet", false, "no progress on stderr")
	return v
}

// configure completes the suite from the parsed flags (set: the flags
// given): the summary's sizes and defaults, and the systems to measure.
func (c *benchConfig) configure(v *benchFlagValues, set map[string]bool) error {
	s := c.suite
	c.set = set
	if *v.scale != "" {
		if c.summary != "" {
			return errors.New("give --summary or --scale, not both")
		}
		c.summary, c.scale = *v.scale, true
		if !set["summary-sizes"] {
			*v.sizes = sizeList(bench.ScaleSizes)
		}
		if *v.local == 0 && *v.targets == "" {
			*v.local = 3
		}
	}
	for _, f := range splitList(*v.sizes) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return fmt.Errorf("--summary-sizes: %q is not a number of instances", f)
		}
		c.sizes = append(c.sizes, n)
	}
	if c.summary != "" && !c.scale {
		// The summary's defaults: every column, local clusters.
		if *v.local == 0 && *v.targets == "" {
			*v.local = 3
		}
		if !set["etcd"] && *v.etcdEndpoints == "" {
			*v.etcdMode = "local"
			if !bench.EtcdClient {
				*v.etcdMode = "none"
				c.noEtcdClient = true
			}
		}
		if !set["eureka-server"] {
			*v.esMode = "local"
		}
	}
	if *v.local > 0 && *v.targets != "" {
		return errors.New("give --local or --targets, not both")
	}
	s.LocalHeureka = *v.local
	s.LocalHeurekaArgs = strings.Fields(*v.localArgs)
	if *v.targets != "" {
		s.Heureka = &bench.HeurekaTarget{URLs: splitList(*v.targets), CacheRefresh: *v.cacheRefresh,
			DeltaRetention: *v.deltaRetention, EvictionInterval: *v.evictionInterval}
	}
	if err := c.configureColumns(v); err != nil {
		return err
	}
	if exe, err := os.Executable(); err == nil {
		s.Binary = exe
	}
	if !*v.quiet {
		s.Progress = os.Stderr
	}
	return nil
}

// configureColumns sets up the etcd and eureka-server columns.
func (c *benchConfig) configureColumns(v *benchFlagValues) error {
	s := c.suite
	switch {
	case *v.etcdEndpoints != "":
		s.Etcd = &bench.EtcdTarget{Endpoints: splitList(*v.etcdEndpoints)}
	case *v.etcdMode == "local":
		s.LocalEtcd = *v.etcdMembers
	case *v.etcdMode == "none" || *v.etcdMode == "":
	default:
		return fmt.Errorf("--etcd %q: want local or none", *v.etcdMode)
	}
	switch *v.esMode {
	case "local":
	case "none", "":
		s.LocalEurekaServer = 0
	default:
		return fmt.Errorf("--eureka-server %q: want local or none", *v.esMode)
	}
	if *v.esBound > 0 {
		s.Budgets = map[string]time.Duration{bench.ColumnEurekaServer: *v.esBound}
	}
	if (s.Etcd != nil || s.LocalEtcd > 0) && !bench.EtcdClient {
		return errors.New("the etcd column needs a build with the etcd client: go build -tags etcdclient ./cmd/heureka (make build-bench)")
	}
	return nil
}

// benchCmd is `heureka bench`.
func benchCmd(args []string) int {
	c, code := parseBench(args)
	if c == nil {
		return code
	}
	if c.compare != "" {
		return benchCompare(c.compare)
	}
	if c.tableFrom != "" {
		r, err := readReport(c.tableFrom)
		if err != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
			return 1
		}
		fmt.Fprint(os.Stdout, r.Table())
		return 0
	}
	if c.summary != "" {
		return benchSummary(args, c)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := c.suite.Run(ctx)
	if rep == nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return 2
	}
	rep.Command = "heureka bench " + strings.Join(args, " ")
	if c.jsonOut != "" {
		if werr := writeJSON(c.jsonOut, rep); werr != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %v\n", werr)
			return 1
		}
	}
	if c.asJSON {
		printJSON(rep)
	} else {
		fmt.Fprint(os.Stdout, rep.Table())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return 1
	}
	return 0
}

// benchSummary is `heureka bench --summary FILE`: the suite at each size,
// one after another, each on clusters of its own, then the summary table
// written between FILE's markers. With --summary-from it writes the table
// from saved reports instead. A size whose run failed part way still gets
// its row, with the cells it could not measure saying why.
func benchSummary(args []string, c *benchConfig) int {
	command := "heureka bench " + strings.Join(args, " ")
	info := bench.SummaryInfo{Date: time.Now(), Commit: buildCommit(), Command: command}
	if c.summaryFrom != "" {
		return summaryFromReports(c, info)
	}
	var reps []*bench.Report
	dir := c.jsonOut
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "heureka-bench-summary-"); err != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
			return 1
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	failed := false
	for _, n := range c.sizes {
		// A fresh suite per size, from the same arguments.
		sc, _ := parseBench(args)
		s := sc.suite
		s.Workload.Instances = n
		if c.scale {
			sc.scaleSize(n)
		}
		if s.Progress != nil {
			fmt.Fprintf(s.Progress, "heureka bench %s: %s instances\n", c.mode(), strconv.Itoa(n))
		}
		rep, err := s.Run(ctx)
		if rep == nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %d instances: %v\n", n, err)
			return 2
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %d instances: %v\n", n, err)
			failed = true
		}
		if e := rep.System(bench.ColumnEtcd); e != nil && sc.noEtcdClient {
			e.NotRun = "this build has no etcd client: make build-bench"
		}
		rep.Command = command
		rep.Commit = info.Commit
		path := fmt.Sprintf("%s/%d.json", strings.TrimRight(dir, "/"), n)
		if werr := writeJSON(path, rep); werr != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %v\n", werr)
			return 1
		}
		fmt.Fprintf(os.Stderr, "heureka bench %s: %d instances done in %s, report in %s\n", c.mode(), n, rep.Elapsed.Round(time.Second), path)
		reps = append(reps, rep)
		if ctx.Err() != nil {
			break
		}
	}
	if len(reps) > 0 {
		// The date --summary-from would give the same reports.
		info.Date = reps[0].Started
	}
	if code := writeSummary(c, reps, info); code != 0 {
		return code
	}
	if failed {
		return 1
	}
	return 0
}

// summaryFromReports is --summary with --summary-from: the table from
// saved reports, dated and named as their run was.
func summaryFromReports(c *benchConfig, info bench.SummaryInfo) int {
	var reps []*bench.Report
	for _, p := range splitList(c.summaryFrom) {
		r, err := readReport(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
			return 1
		}
		reps = append(reps, r)
	}
	if len(reps) > 0 {
		info.Date = reps[0].Started
		if reps[0].Commit != "" {
			info.Commit = reps[0].Commit
		}
		if reps[0].Command != "" {
			info.Command = reps[0].Command
		}
	}
	return writeSummary(c, reps, info)
}

// mode is the flag that chose the sizes run: --summary or --scale.
func (c *benchConfig) mode() string {
	if c.scale {
		return "--scale"
	}
	return "--summary"
}

// scaleSize sets the workload of one size of the scale table: the
// instances in applications of bench.ScaleInstancesPerApp, the fleet's
// renewal interval, and at the largest size the sustained renewals (W2S),
// unless the flags said otherwise.
func (c *benchConfig) scaleSize(n int) {
	s := c.suite
	if !c.set["renewal-interval"] {
		s.Workload.RenewalSecs = bench.ScaleRenewalSecs
	}
	if !c.set["apps"] {
		s.Workload.Apps = max(1, n/bench.ScaleInstancesPerApp)
	}
	if !c.set["renew-soak"] && n == slices.Max(c.sizes) {
		s.RenewSoak = bench.ScaleRenewSoak
	}
}

// writeSummary writes the summary (or scale) table of reps into c's file.
func writeSummary(c *benchConfig, reps []*bench.Report, info bench.SummaryInfo) int {
	file, markers := c.summary, bench.SummaryMarkers
	if c.scale {
		markers = bench.ScaleMarkers
		for _, r := range reps {
			r.WithoutDisabled()
		}
	}
	table := bench.SummaryTable(reps, info)
	if err := bench.RewriteSection(file, table, markers); err != nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		fmt.Fprint(os.Stdout, table)
		return 1
	}
	fmt.Fprint(os.Stdout, table)
	fmt.Fprintf(os.Stderr, "heureka bench: wrote the summary table into %s\n", file)
	return 0
}

// buildCommit is the commit this executable was built from: the build's
// version control stamp, or else the working directory's git HEAD, with
// " + local changes" when files other than Markdown differ from it;
// "unknown" when neither says.
func buildCommit() string {
	rev, modified := "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if rev == "" {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return "unknown"
		}
		rev = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			for _, l := range strings.Split(strings.TrimSpace(string(st)), "\n") {
				if l != "" && !strings.HasSuffix(l, ".md") {
					modified = true
				}
			}
		}
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if modified {
		rev += " + local changes"
	}
	return rev
}

func sizeList(sizes []int) string {
	var parts []string
	for _, n := range sizes {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

// splitList splits a comma-separated flag value (endpoints, service URLs),
// trimming spaces and trailing slashes and dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimRight(strings.TrimSpace(p), "/"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// printJSON writes v to stdout as indented JSON (the tools' --json output).
func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeJSON(path string, rep *bench.Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readReport(path string) (*bench.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &r, nil
}

func benchCompare(arg string) int {
	parts := splitList(arg)
	if len(parts) != 2 {
		fmt.Fprintln(os.Stderr, "heureka bench: --compare wants A.json,B.json")
		return 2
	}
	a, err := readReport(parts[0])
	if err == nil {
		var b *bench.Report
		if b, err = readReport(parts[1]); err == nil {
			fmt.Fprint(os.Stdout, bench.GrowthTable(a, b))
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
	return 1
}
