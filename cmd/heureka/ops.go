package main

// The operator subcommands: thin clients of a node's operator API
// (/v1/status, /v1/members, /v1/mode, /v1/snapshot). Each takes --addr (the
// node's HTTP address, default $HEUREKA_ADDR or 127.0.0.1:8761), prints a
// human summary or, with --json, the server's JSON, and exits 0 on success,
// 1 when the node cannot be reached or refuses, 2 on bad usage.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
	"github.com/heureka-registry/heureka/opapi"
	"github.com/heureka-registry/heureka/store"
)

const defaultOpsAddr = "127.0.0.1:8761"

const opsUsage = `Operator commands (each takes --addr HOST:PORT, --json and --timeout):
  heureka status                          node, leader, Raft indexes, mode, quorum, leases, cache
  heureka members [list]                  the cluster's members
  heureka members join --id ID --raft-addr HOST:PORT --http-addr HOST:PORT
  heureka members remove ID
  heureka mode                            show the consistency mode
  heureka mode ap|cp                      switch the cluster's mode
  heureka snapshot save FILE [--stale]    download the registry ("-" for stdout)
  heureka snapshot restore FILE           replace the cluster's registry with FILE

With auth on, pass credentials as $HEUREKA_CREDENTIALS=user:password (or in
--addr, http://user:password@host:port). HTTPS: --tls-ca, and --tls-cert and
--tls-key for nodes that require client certificates ($HEUREKA_TLS_CA,
$HEUREKA_TLS_CERT, $HEUREKA_TLS_KEY); an --addr without a scheme then means
https. Changes (members join and remove, mode ap|cp, snapshot restore) send
the cluster secret, read as heureka serve reads it: --cluster-secret or
--cluster-secret-file, else $HEUREKA_CLUSTER_SECRET or
$HEUREKA_CLUSTER_SECRET_FILE. A node with a secret refuses changes without
it (or an admin user); one without a secret takes them from this host only.
`

// opsClient talks to one node's operator API.
type opsClient struct {
	base    string
	json    bool
	client  *http.Client
	stdout  io.Writer
	command string

	// credentials is "user:password" ($HEUREKA_CREDENTIALS), sent as basic
	// auth unless --addr carries its own user info.
	credentials string
	// secret and secretFile give the cluster secret (--cluster-secret[-file]
	// or their variables; one of them set), read and sent with control
	// calls only (opsControl).
	secret, secretFile     string
	tlsCA, tlsCert, tlsKey string
}

// errUsage marks a usage error (exit code 2).
var errUsage = errors.New("usage")

// opsFlags declares the flags every operator command shares.
func opsFlags(name string, c *opsClient, timeout *time.Duration, def time.Duration) *flag.FlagSet {
	fs := newFlagSet(name)
	addr := os.Getenv("HEUREKA_ADDR")
	if addr == "" {
		addr = defaultOpsAddr
	}
	fs.StringVar(&c.base, "addr", addr, "HTTP address of a node (host:port or http://host:port)")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of a summary")
	fs.DurationVar(timeout, "timeout", def, "give up after this long")
	fs.StringVar(&c.tlsCA, "tls-ca", os.Getenv("HEUREKA_TLS_CA"), "PEM CA bundle to verify the node's certificate (HTTPS)")
	fs.StringVar(&c.tlsCert, "tls-cert", os.Getenv("HEUREKA_TLS_CERT"), "PEM client certificate (for nodes that require one)")
	fs.StringVar(&c.tlsKey, "tls-key", os.Getenv("HEUREKA_TLS_KEY"), "PEM key for --tls-cert")
	fs.StringVar(&c.secret, "cluster-secret", os.Getenv("HEUREKA_CLUSTER_SECRET"), "the cluster secret, sent with changes (members join and remove, mode, snapshot restore)")
	fs.StringVar(&c.secretFile, "cluster-secret-file", os.Getenv("HEUREKA_CLUSTER_SECRET_FILE"), "file holding the cluster secret (instead of --cluster-secret)")
	c.credentials = os.Getenv("HEUREKA_CREDENTIALS")
	return fs
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newOps parses args for an operator command; extra declares its own flags.
func newOps(name string, args []string, def time.Duration, extra func(fs *flag.FlagSet)) (*opsClient, []string, error) {
	c := &opsClient{stdout: os.Stdout, command: name}
	var timeout time.Duration
	fs := opsFlags(name, c, &timeout, def)
	if extra != nil {
		extra(fs)
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stdout, opsUsage)
		return nil, nil, flag.ErrHelp
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	// A flag overrides the other's variable: --cluster-secret-file with
	// $HEUREKA_CLUSTER_SECRET set means the file.
	secret, file := c.secret, c.secretFile
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "cluster-secret":
			file = ""
		case "cluster-secret-file":
			secret = ""
		}
	})
	c.secret, c.secretFile = secret, file
	tr := &http.Transport{Proxy: nil}
	if c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" {
		cfg, err := opsTLS(c.tlsCA, c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		tr.TLSClientConfig = cfg
		if !strings.Contains(c.base, "://") {
			c.base = "https://" + c.base
		}
	}
	if !strings.Contains(c.base, "://") {
		c.base = "http://" + c.base
	}
	c.base = strings.TrimRight(c.base, "/")
	if err := checkOpsAddr(c.base); err != nil {
		return nil, nil, fmt.Errorf("%w: --addr %q: %v", errUsage, redactedAddr(c.base), err)
	}
	c.client = &http.Client{Timeout: timeout, Transport: tr}
	return c, pos, nil
}

// checkOpsAddr refuses a node URL no request could be sent to, so that a
// typo is a usage error, not an unreachable node.
func checkOpsAddr(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // without the URL, which may carry a password
		}
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("no host")
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return fmt.Errorf("port %q: want a number from 0 to 65535", p)
		}
	}
	return nil
}

// redactedAddr is a node URL as a message may show it: a password in it
// (--addr is the documented way to pass one) is replaced by "xxxxx", even
// in a URL that does not parse.
func redactedAddr(addr string) string {
	if u, err := url.Parse(addr); err == nil {
		return u.Redacted()
	}
	// Unparsable: whatever follows the user in the authority's user
	// information is hidden.
	scheme, rest, _ := strings.Cut(addr, "://")
	authority, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	user, _, hasPassword := strings.Cut(authority[:max(at, 0)], ":")
	if at < 0 || !hasPassword {
		return addr
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// opsExit prints err for command and returns the exit code.
func opsExit(command string, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "heureka %s: %v\n", command, err)
		fmt.Fprint(os.Stderr, opsUsage)
		return 2
	}
	fmt.Fprintf(os.Stderr, "heureka %s: %v\n", command, err)
	return 1
}

// opsControl reports whether a call changes the cluster and so carries the
// cluster secret: every operator call but a read. Reads never carry it, so
// that it is not sent where it is not needed.
func opsControl(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}

// do sends one request and returns the body of a 2xx answer; any other
// answer becomes an error carrying the server's {"error"} message.
func (c *opsClient) do(method, path, contentType string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if user, pw, ok := strings.Cut(c.credentials, ":"); ok && req.URL.User == nil {
		req.SetBasicAuth(user, pw)
	}
	if opsControl(method) {
		// Read only for a change: a status check does not depend on the
		// secret file being readable.
		secret, err := readClusterSecret(c.secret, c.secretFile)
		if err != nil {
			return nil, err
		}
		if secret != "" {
			req.Header.Set(nodeapi.SecretHeader, secret)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return nil, fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, msg)
	}
	return data, nil
}

func (c *opsClient) getJSON(path string, v any) ([]byte, error) {
	data, err := c.do(http.MethodGet, path, "", nil)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("GET %s: decode answer: %w", path, err)
		}
	}
	return data, nil
}

// printJSON writes raw JSON indented.
func (c *opsClient) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		_, err = c.stdout.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(c.stdout)
	return err
}

// printed ends an answer's handling early: when the request failed (done,
// with its error) or --json asked for the raw answer (done, once printed).
// Otherwise the caller prints its own summary.
func (c *opsClient) printed(raw []byte, err error) (done bool, _ error) {
	if err != nil {
		return true, err
	}
	if c.json {
		return true, c.printJSON(raw)
	}
	return false, nil
}

func (c *opsClient) printValue(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.printJSON(raw)
}

// ---------------------------------------------------------------------------
// heureka status

func opsStatusCmd(args []string) int {
	c, pos, err := newOps("status", args, 5*time.Second, nil)
	if err != nil {
		return opsExit("status", err)
	}
	if len(pos) != 0 {
		return opsExit("status", fmt.Errorf("%w: status takes no arguments, got %q", errUsage, pos[0]))
	}
	return opsExit("status", c.status())
}

func (c *opsClient) status() error {
	var st opapi.Status
	if done, err := c.printed(c.getJSON("/v1/status", &st)); done {
		return err
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	leader := "none"
	if st.Leader != "" {
		leader = st.Leader + " at " + st.LeaderHTTPAddr
	}
	quorum := "no"
	if st.Quorum {
		quorum = "yes"
	}
	fmt.Fprintf(w, "node\t%s (%s)\n", st.Node, st.State)
	fmt.Fprintf(w, "leader\t%s\n", leader)
	fmt.Fprintf(w, "mode\t%s, quorum %s%s\n", st.Mode, quorum, fallbackText(st.Fallback))
	fmt.Fprintf(w, "raft\tterm %d, commit %d, applied %d, last log %d, snapshot %d, log %s\n",
		st.Term, st.CommitIndex, st.AppliedIndex, st.LastLogIndex, st.LastSnapshotIndex, sizeText(st.LogBytes))
	if st.DiskFull {
		fmt.Fprintf(w, "disk\tFULL for %s: writes refused (%d so far) until there is room; %s\n",
			(time.Duration(st.DiskFullForMs) * time.Millisecond).Round(time.Second), st.DiskFullRefused, st.DiskFullCause)
	}
	fmt.Fprintf(w, "registry\t%d applications, %d instances (version %d)\n", st.Applications, st.Instances, st.RegistryVersion)
	if l := st.Leases; l != nil {
		sp := "disabled"
		switch {
		case l.SelfPreservationActive:
			sp = "ACTIVE (EMERGENCY: renewals below threshold, eviction stopped)"
		case l.SelfPreservationEnabled:
			sp = "enabled, inactive"
		}
		fmt.Fprintf(w, "leases\trenews %d/min, threshold %d, expected %.0f/min, evicted %d\n", l.RenewsLastMin, l.Threshold, l.ExpectedRenewsPerMin, l.EvictedTotal)
		fmt.Fprintf(w, "self-preservation\t%s\n", sp)
	} else {
		fmt.Fprintf(w, "leases\tunknown (no leader)\n")
	}
	ch := st.Cache
	fmt.Fprintf(w, "cache\treadOnly %d hits / %d misses, readWrite %d hits / %d misses, %d builds, %s\n",
		ch.ReadOnlyHits, ch.ReadOnlyMisses, ch.ReadWriteHits, ch.ReadWriteMisses, ch.Builds, sizeText(ch.Bytes))
	return w.Flush()
}

// fallbackText describes the status' "fallback" field.
func fallbackText(active bool) string {
	if active {
		return ", AP fallback ACTIVE"
	}
	return ", fallback off"
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ---------------------------------------------------------------------------
// heureka members

func opsMembersCmd(args []string) int {
	var id, raftAddr, httpAddr string
	c, pos, err := newOps("members", args, 15*time.Second, func(fs *flag.FlagSet) {
		fs.StringVar(&id, "id", "", "members join: the new member's node id")
		fs.StringVar(&raftAddr, "raft-addr", "", "members join: the new member's Raft address")
		fs.StringVar(&httpAddr, "http-addr", "", "members join: the new member's HTTP address")
	})
	if err != nil {
		return opsExit("members", err)
	}
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	if sub != "join" && (id != "" || raftAddr != "" || httpAddr != "") {
		return opsExit("members", fmt.Errorf("%w: --id, --raft-addr and --http-addr are for members join", errUsage))
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return opsExit("members", fmt.Errorf("%w: members list takes no arguments", errUsage))
		}
		err = c.membersList()
	case "join":
		if len(pos) != 0 || id == "" || raftAddr == "" || httpAddr == "" {
			return opsExit("members", fmt.Errorf("%w: members join needs --id, --raft-addr and --http-addr", errUsage))
		}
		err = c.membersJoin(opapi.Member{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr})
	case "remove":
		if len(pos) != 1 || pos[0] == "" {
			return opsExit("members", fmt.Errorf("%w: members remove takes one non-empty node id", errUsage))
		}
		err = c.membersRemove(pos[0])
	default:
		return opsExit("members", fmt.Errorf("%w: unknown subcommand %q", errUsage, sub))
	}
	return opsExit("members "+sub, err)
}

func (c *opsClient) membersList() error {
	var body opapi.Members
	if done, err := c.printed(c.getJSON("/v1/members", &body)); done {
		return err
	}
	sort.Slice(body.Members, func(i, j int) bool { return body.Members[i].ID < body.Members[j].ID })
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tHTTP\tRAFT")
	for _, m := range body.Members {
		role := "non-voter"
		switch {
		case m.Leader:
			role = "leader"
		case m.Voter:
			role = "voter"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.ID, role, m.HTTPAddr, m.RaftAddr)
	}
	return w.Flush()
}

func (c *opsClient) membersJoin(m opapi.Member) error {
	body, _ := json.Marshal(m)
	if done, err := c.printed(c.do(http.MethodPost, "/v1/members", "application/json", bytes.NewReader(body))); done {
		return err
	}
	fmt.Fprintf(c.stdout, "joined %s (raft %s, http %s)\n", m.ID, m.RaftAddr, m.HTTPAddr)
	return nil
}

func (c *opsClient) membersRemove(id string) error {
	// Escaped, the id stays one path segment: ids from before the member id
	// check may hold '/', '%' or '?'.
	if done, err := c.printed(c.do(http.MethodDelete, "/v1/members/"+url.PathEscape(id), "", nil)); done {
		return err
	}
	fmt.Fprintf(c.stdout, "removed %s\n", id)
	return nil
}

// ---------------------------------------------------------------------------
// heureka mode

func opsModeCmd(args []string) int {
	c, pos, err := newOps("mode", args, 15*time.Second, nil)
	if err != nil {
		return opsExit("mode", err)
	}
	switch len(pos) {
	case 0:
		err = c.mode("")
	case 1:
		m := strings.ToLower(pos[0])
		if m != "ap" && m != "cp" {
			return opsExit("mode", fmt.Errorf("%w: mode %q: want ap or cp", errUsage, pos[0]))
		}
		err = c.mode(m)
	default:
		return opsExit("mode", fmt.Errorf("%w: mode takes at most one argument (ap or cp)", errUsage))
	}
	return opsExit("mode", err)
}

func (c *opsClient) mode(set string) error {
	var raw []byte
	var err error
	if set == "" {
		raw, err = c.getJSON("/v1/mode", nil)
	} else {
		body, _ := json.Marshal(map[string]string{"mode": set})
		raw, err = c.do(http.MethodPut, "/v1/mode", "application/json", bytes.NewReader(body))
	}
	if done, err := c.printed(raw, err); done {
		return err
	}
	var m struct {
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(raw, &m)
	if m.Mode == "" {
		m.Mode = set
	}
	if set != "" {
		fmt.Fprintf(c.stdout, "mode set to %s\n", m.Mode)
		return nil
	}
	fmt.Fprintf(c.stdout, "mode %s\n", m.Mode)
	return nil
}

// ---------------------------------------------------------------------------
// heureka snapshot

// snapshotResult describes a saved or restored snapshot.
type snapshotResult struct {
	File         string `json:"file"`
	Bytes        int    `json:"bytes"`
	Instances    int    `json:"instances"`
	Applications int    `json:"applications"`
	Restored     bool   `json:"restored,omitempty"`
}

func opsSnapshotCmd(args []string) int {
	var stale bool
	c, pos, err := newOps("snapshot", args, 2*time.Minute, func(fs *flag.FlagSet) {
		fs.BoolVar(&stale, "stale", false, "snapshot save: take the node's own copy, without the leader")
	})
	if err != nil {
		return opsExit("snapshot", err)
	}
	if len(pos) != 2 || (pos[0] != "save" && pos[0] != "restore") || pos[1] == "" {
		return opsExit("snapshot", fmt.Errorf("%w: want snapshot save FILE or snapshot restore FILE (a non-empty FILE, \"-\" for stdout or stdin)", errUsage))
	}
	if pos[0] == "save" {
		return opsExit("snapshot save", c.snapshotSave(pos[1], stale))
	}
	if stale {
		return opsExit("snapshot", fmt.Errorf("%w: --stale is for snapshot save", errUsage))
	}
	return opsExit("snapshot restore", c.snapshotRestore(pos[1]))
}

func (c *opsClient) snapshotSave(file string, stale bool) error {
	path := "/v1/snapshot"
	if stale {
		path += "?stale=true"
	}
	data, err := c.do(http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	res, err := describeSnapshot(file, data)
	if err != nil {
		return fmt.Errorf("the node sent an unreadable snapshot: %w", err)
	}
	if file == "-" {
		_, err = c.stdout.Write(data)
		return err
	}
	if err := store.WriteFileAtomic(file, data); err != nil {
		return err
	}
	if c.json {
		return c.printValue(res)
	}
	fmt.Fprintf(c.stdout, "saved %d instances in %d applications (%s) to %s\n", res.Instances, res.Applications, sizeText(int64(res.Bytes)), file)
	return nil
}

func (c *opsClient) snapshotRestore(file string) error {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	res, err := describeSnapshot(file, data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	raw, err := c.do(http.MethodPost, "/v1/snapshot", "application/octet-stream", bytes.NewReader(data))
	if err != nil {
		return err
	}
	res.Restored = true
	if c.json {
		return c.printJSON(raw)
	}
	fmt.Fprintf(c.stdout, "restored %d instances in %d applications from %s\n", res.Instances, res.Applications, file)
	return nil
}

// describeSnapshot decodes a snapshot to check it and count its contents.
func describeSnapshot(file string, data []byte) (snapshotResult, error) {
	st, err := fsm.ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		return snapshotResult{}, err
	}
	return snapshotResult{File: file, Bytes: len(data), Instances: len(st.Entries), Applications: st.Applications()}, nil
}
