package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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

The etcd column needs a build with the etcd client (go build -tags
etcdclient ./cmd/heureka, or make build-bench); the server binary leaves it
out.

Flags:
`

// benchFlags are the flags of `heureka bench` that are not settings of
// the suite itself.
type benchFlags struct {
	local                                          *int
	targets, localArgs                             *string
	cacheRefresh, deltaRetention, evictionInterval *time.Duration
	etcdMode, etcdEndpoints, esMode                *string
	etcdMembers                                    *int
	asJSON, quiet                                  *bool
	jsonOut, compare                               *string
}

// benchCmd is `heureka bench`.
func benchCmd(args []string) int {
	var s bench.Suite
	fs, f := newBenchFlags(&s)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, benchUsage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "heureka bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *f.compare != "" {
		return benchCompare(*f.compare)
	}
	if err := f.configure(&s); err != nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return 2
	}
	return runBench(&s, f, args)
}

// newBenchFlags declares the flags: the suite's settings write s, the
// others f.
func newBenchFlags(s *bench.Suite) (*flag.FlagSet, *benchFlags) {
	fs := newFlagSet("bench")
	d := bench.DefaultWorkload()
	f := &benchFlags{}
	f.local = fs.Int("local", 0, "start a local heureka cluster of this many nodes (from this executable) and bench it")
	f.targets = fs.String("targets", "", "comma-separated base URLs of an existing Eureka-compatible cluster (http://host:port,...)")
	f.localArgs = fs.String("local-args", "", "extra flags for the --local nodes' heureka serve, space-separated (e.g. --pprof)")
	f.cacheRefresh = fs.Duration("target-cache-refresh", 30*time.Second, "with --targets: their response cache refresh interval (W4 and W6 wait it out; 0 for heureka, whose default push makes changes visible at once)")
	f.deltaRetention = fs.Duration("target-delta-retention", 0, "with --targets: their delta retention; W4 waits this long after W1 (0: read the delta as it is)")
	f.evictionInterval = fs.Duration("target-eviction-interval", 0, "with --targets: their eviction interval, for W8's note")
	f.etcdMode = fs.String("etcd", "none", "local: start a local etcd cluster; none: no etcd column")
	f.etcdMembers = fs.Int("etcd-members", 3, "members of the --etcd local cluster")
	f.etcdEndpoints = fs.String("etcd-endpoints", "", "comma-separated client URLs of an existing etcd cluster")
	fs.StringVar(&s.EtcdBinary, "etcd-bin", "etcd", "etcd executable for --etcd local")
	f.esMode = fs.String("eureka-server", "none", "local: start local peers of Spring Cloud's eureka-server beside heureka; none: no eureka-server column")
	fs.IntVar(&s.LocalEurekaServer, "eureka-server-peers", 3, "peers of the --eureka-server local cluster")
	fs.StringVar(&s.EurekaServerJar, "eureka-server-jar", "e2e/eurekaserver/target/eurekaserver.jar", "the eureka-server jar (built by make deps)")
	fs.BoolVar(&s.EurekaServerNoReadOnly, "eureka-server-no-readonly", false, "turn eureka-server's readOnly response cache off")
	fs.StringVar(&s.Java, "java", "java", "java executable for --eureka-server local")
	fs.IntVar(&s.Workload.Instances, "instances", d.Instances, "W1: instances to register")
	fs.IntVar(&s.Workload.Apps, "apps", 0, fmt.Sprintf("W1: applications the instances are spread over (default %d, at most --instances)", d.Apps))
	fs.IntVar(&s.Workload.MetadataBytes, "metadata-bytes", d.MetadataBytes, "W1: metadata per instance, in bytes")
	fs.IntVar(&s.Writers, "writers", 64, "W1: concurrent writers")
	fs.IntVar(&s.Renewers, "renewers", 64, "W2: concurrent renewing clients")
	fs.IntVar(&s.FullReaders, "full-readers", 8, "W3: concurrent full-registry readers")
	fs.IntVar(&s.Readers, "readers", 32, "W4, W5: concurrent readers")
	fs.DurationVar(&s.Duration, "duration", 5*time.Second, "length of each timed phase (W2–W5 and each limit run); W6 rows stop after 3× this")
	fs.DurationVar(&s.RegisterTimeout, "register-timeout", 5*time.Minute, "W1: give up registering after this long")
	fs.IntVar(&s.Samples, "samples", 300, "W6: samples per row at most")
	fs.IntVar(&s.CrashInstances, "crash-instances", 100, "W8: instances that stop renewing")
	fs.IntVar(&s.CrashLeaseSecs, "crash-lease", 2, "W8: their lease duration in seconds (etcd: TTL)")
	fs.DurationVar(&s.CrashTimeout, "crash-timeout", time.Minute, "W8: give up waiting after this long")
	fs.BoolVar(&s.NoLimit, "no-limit", false, "skip the limit column")
	fs.StringVar(&s.TempDir, "tmp", "", "directory for local clusters' data (default: the system's temp dir)")
	f.asJSON = fs.Bool("json", false, "print the report as JSON on stdout instead of the table")
	f.jsonOut = fs.String("json-out", "", "also write the JSON report to this file")
	f.compare = fs.String("compare", "", "A.json,B.json: print how each figure grows from report A to report B, and exit")
	f.quiet = fs.Bool("quiet", false, "no progress on stderr")
	return fs, f
}

// configure completes the suite from the flags: which systems to measure
// (local clusters or targets), and the executable and progress output.
func (f *benchFlags) configure(s *bench.Suite) error {
	if *f.local > 0 && *f.targets != "" {
		return errors.New("give --local or --targets, not both")
	}
	s.LocalHeureka = *f.local
	s.LocalHeurekaArgs = strings.Fields(*f.localArgs)
	if *f.targets != "" {
		s.Heureka = &bench.HeurekaTarget{URLs: splitList(*f.targets), CacheRefresh: *f.cacheRefresh,
			DeltaRetention: *f.deltaRetention, EvictionInterval: *f.evictionInterval}
	}
	switch {
	case *f.etcdEndpoints != "":
		s.Etcd = &bench.EtcdTarget{Endpoints: splitList(*f.etcdEndpoints)}
	case *f.etcdMode == "local":
		s.LocalEtcd = *f.etcdMembers
	case *f.etcdMode == "none" || *f.etcdMode == "":
	default:
		return fmt.Errorf("--etcd %q: want local or none", *f.etcdMode)
	}
	switch *f.esMode {
	case "local":
	case "none", "":
		s.LocalEurekaServer = 0
	default:
		return fmt.Errorf("--eureka-server %q: want local or none", *f.esMode)
	}
	if (s.Etcd != nil || s.LocalEtcd > 0) && !bench.EtcdClient {
		return errors.New("the etcd column needs a build with the etcd client: go build -tags etcdclient ./cmd/heureka (make build-bench)")
	}
	if exe, err := os.Executable(); err == nil {
		s.Binary = exe
	}
	if !*f.quiet {
		s.Progress = os.Stderr
	}
	return nil
}

// runBench runs the suite until it ends or a signal stops it, and reports
// (a table, or JSON, and the JSON file if asked).
func runBench(s *bench.Suite, f *benchFlags, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := s.Run(ctx)
	if rep == nil {
		fmt.Fprintf(os.Stderr, "heureka bench: %v\n", err)
		return 2
	}
	rep.Command = "heureka bench " + strings.Join(args, " ")
	if *f.jsonOut != "" {
		if werr := writeJSON(*f.jsonOut, rep); werr != nil {
			fmt.Fprintf(os.Stderr, "heureka bench: %v\n", werr)
			return 1
		}
	}
	if *f.asJSON {
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
