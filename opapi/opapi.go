package opapi

// Status is the body of GET /v1/status: this node's view of itself and the
// cluster, its response cache, the leader's lease numbers and the process
// memory.
type Status struct {
	NodeStatus
	Cache CacheStats `json:"cache"`
	// Leases is the leader's view; nil when no leader answered.
	Leases *LeaseStatus `json:"leases,omitempty"`
	Memory Memory       `json:"memory"`
	// Regions are the copies of remote regions this node serves.
	Regions []RegionStatus `json:"regions,omitempty"`
}

// RegionStatus is one remote region's copy as a node holds it (the same on
// every node of the cluster: the copy is written through the log).
type RegionStatus struct {
	Name string `json:"name"`
	// Loaded is set once a whole copy was taken; until then regions= reads
	// are refused (403).
	Loaded bool `json:"loaded"`
	// Reachable is false while the region does not answer: its last copy
	// is served, marked.
	Reachable bool   `json:"reachable"`
	Kind      string `json:"kind,omitempty"`
	Source    string `json:"source,omitempty"`
	Instances int    `json:"instances"`
	// SyncedAtMs is when the copy was last confirmed equal to the region's
	// registry (epoch ms); SinceMs when Reachable last changed.
	SyncedAtMs int64  `json:"synced_at_ms"`
	SinceMs    int64  `json:"since_ms"`
	Error      string `json:"error,omitempty"`
}

// NodeStatus is the node's Raft and registry state.
type NodeStatus struct {
	Node string `json:"node"`
	// ClusterID is the identity of the cluster this node belongs to,
	// written by its first leader ("" until the node learned it).
	ClusterID         string `json:"cluster_id,omitempty"`
	State             string `json:"state"` // Leader, Follower, Candidate or Shutdown
	Leader            string `json:"leader"`
	LeaderHTTPAddr    string `json:"leader_http_addr"`
	Term              uint64 `json:"term"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastLogIndex      uint64 `json:"last_log_index"`
	FirstLogIndex     uint64 `json:"first_log_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	// SnapshotThreshold is how many log entries past LastSnapshotIndex
	// make Raft take the next snapshot (it follows the registry's size).
	SnapshotThreshold uint64 `json:"snapshot_threshold"`
	LastContactMs     int64  `json:"last_contact_ms"`
	Mode              string `json:"mode"`
	Quorum            bool   `json:"quorum"`
	// Ready is set once the node caught up after starting.
	Ready bool `json:"ready"`
	// ReadGate is how registry reads are answered: open, durable_stale
	// (from the durable state, marked stale) or closed (refused, 503).
	ReadGate string `json:"read_gate"`
	// BootLogIndex is the last log index the node found at start;
	// ReadyAfterMs how long after start it caught up (0 until then).
	BootLogIndex uint64 `json:"boot_log_index"`
	ReadyAfterMs int64  `json:"ready_after_ms"`
	// ReadGateCloses counts the times the read gate closed again after
	// it had opened: losses of touch with the leader (a partition, a
	// pause, an election), each followed by a catch-up.
	ReadGateCloses uint64 `json:"read_gate_closes"`
	// QuorumLost is set once the node has been without quorum for longer
	// than an election takes; Fallback when it then serves AP fallback (or
	// still holds journal writes to replay).
	QuorumLost     bool  `json:"quorum_lost"`
	Fallback       bool  `json:"fallback"`
	JournalEntries int   `json:"journal_entries"`
	JournalBytes   int64 `json:"journal_bytes"`
	// JournalRefused counts writes refused since start because the journal
	// was full.
	JournalRefused  uint64 `json:"journal_refused"`
	Instances       int    `json:"instances"`
	Applications    int    `json:"applications"`
	RegistryVersion uint64 `json:"registry_version"`
	LogBytes        int64  `json:"log_bytes"`
	// DiskFull is set while the disk holding the data directory has no
	// room: writes this node would store are refused (503) until a probe
	// can write again. DiskFullForMs is how long it has been full,
	// DiskFullCause the write failure that started it.
	DiskFull      bool   `json:"disk_full"`
	DiskFullForMs int64  `json:"disk_full_for_ms"`
	DiskFullCause string `json:"disk_full_cause,omitempty"`
	// DiskFullRefused counts registry writes refused since start because
	// the disk was full; DiskWriteFailures the store's writes (log, journal,
	// snapshots) that failed for lack of room.
	DiskFullRefused   uint64 `json:"disk_full_refused"`
	DiskWriteFailures uint64 `json:"disk_write_failures"`
	// AppliedEntries and AppliedBytes count the commands this node applied
	// since it started, and their encoded size.
	AppliedEntries uint64 `json:"applied_entries"`
	AppliedBytes   uint64 `json:"applied_bytes"`
	// Packing is set while every server reads packed log entries, so that
	// a leader packs the client writes that reach it together into one
	// entry; PackedEntries and PackedWrites count what this node packed
	// as leader. LineWaits counts the times this node, as leader, held
	// its next entry for the calls of followers it had just answered, and
	// LineWaitsFull those that ran to their bound without them.
	Packing       bool   `json:"packing"`
	PackedEntries uint64 `json:"packed_entries"`
	PackedWrites  uint64 `json:"packed_writes"`
	LineWaits     uint64 `json:"line_waits"`
	LineWaitsFull uint64 `json:"line_waits_full"`
	// CommandsSinceSnapshot is how many commands the FSM applied since its
	// last snapshot (a packed entry's each): the node snapshots once this
	// or the log entries since reach the snapshot threshold.
	CommandsSinceSnapshot uint64 `json:"commands_since_snapshot"`
}

// LeaseStatus is the leader's view of leases and self-preservation
// (docs/leases.md, "Self-preservation").
type LeaseStatus struct {
	SelfPreservationEnabled bool    `json:"self_preservation_enabled"`
	SelfPreservationActive  bool    `json:"self_preservation_active"`
	RenewsLastMin           int64   `json:"renews_last_min"`
	Threshold               int64   `json:"renews_threshold"`
	ExpectedRenewsPerMin    float64 `json:"expected_renews_per_min"`
	Instances               int     `json:"instances"`
	Expired                 int     `json:"expired"`
	EvictedTotal            uint64  `json:"evicted_total"`
	LeaderSinceMs           int64   `json:"leader_since_ms"`
	GraceUntilMs            int64   `json:"grace_until_ms"`
	// From names the node that computed it (always the leader).
	From string `json:"from"`
}

// CacheStats are the response cache's counters.
type CacheStats struct {
	ReadOnlyHits    uint64  `json:"read_only_hits"`
	ReadOnlyMisses  uint64  `json:"read_only_misses"`
	ReadWriteHits   uint64  `json:"read_write_hits"`
	ReadWriteMisses uint64  `json:"read_write_misses"`
	Builds          uint64  `json:"builds"`
	BuildErrors     uint64  `json:"build_errors"`
	BuildSeconds    float64 `json:"build_seconds"`
	Invalidations   uint64  `json:"invalidations"`
	Refreshes       uint64  `json:"refreshes"`
	// Pushes counts readOnly rebuilds made right after changes.
	Pushes        uint64 `json:"pushes"`
	ReadWriteKeys int    `json:"read_write_entries"`
	ReadOnlyKeys  int    `json:"read_only_entries"`
	// Bytes is the logical size of the documents held, plain and gzipped;
	// fragments shared by several documents count in each.
	Bytes int64 `json:"bytes"`
}

// Memory is the Go runtime's view of the process memory.
type Memory struct {
	HeapAllocBytes uint64 `json:"heap_alloc_bytes"`
	HeapInuseBytes uint64 `json:"heap_inuse_bytes"`
	SysBytes       uint64 `json:"sys_bytes"`
	NumGC          uint32 `json:"num_gc"`
}

// Members is the body of GET /v1/members.
type Members struct {
	Members []Member `json:"members"`
}

// Member is one member of the Raft configuration.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}
