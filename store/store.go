// Package store owns heureka's data directory: the Raft log and stable store
// (raft-boltdb), the file snapshot store, and the lock that keeps a second
// process out. Nothing above it touches bolt directly.
//
// It imports no heureka package, and must import none.
package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// ErrLocked is returned when another process holds the data directory.
var ErrLocked = errors.New("data directory is in use by another process")

// ErrOtherNode is returned when the data directory belongs to another node
// id than Config.NodeID.
var ErrOtherNode = errors.New("data directory belongs to another node")

// File names inside the data directory.
const (
	LockFile   = "LOCK"
	LogFile    = "raft.db"
	NodeIDFile = "node-id"
	// ClusterIDFile holds the identity of the cluster the directory's
	// state belongs to, once the node learned it (Store.SetClusterID).
	ClusterIDFile = "cluster-id"
	SnapshotDir   = "snapshots" // created by raft's file snapshot store
)

// The Raft log's cache of recent entries (logCache): its last logCacheSize
// entries, at most logCacheBytes of them. The entries the leader still has
// to send are the last few; 8 MiB holds several seconds of a million
// instances' renewal batches, or all 512 entries of a registration burst.
const (
	logCacheSize  = 512
	logCacheBytes = 8 << 20
)

// Config says where and how to keep the data.
type Config struct {
	// Dir is the data directory; it is created if missing.
	Dir string
	// SnapshotRetain is how many snapshots to keep on disk.
	SnapshotRetain int
	// NodeID, if set, binds the directory to that node id: the first open
	// records it (NodeIDFile), later opens under another id fail with
	// ErrOtherNode. Raft's state names this node by its id; started under
	// another one (a changed host name, the default id), the node would not
	// find itself in its own configuration and never lead or vote.
	NodeID string
}

// DefaultConfig returns the defaults for dir.
func DefaultConfig(dir string) Config { return Config{Dir: dir, SnapshotRetain: 2} }

// Validate checks the config.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("data dir must not be empty")
	}
	if c.SnapshotRetain < 1 {
		return errors.New("snapshot retain must be at least 1")
	}
	return nil
}

// checkNodeID checks id against the one recorded in dir, if any.
func checkNodeID(dir, id string) error {
	if id == "" {
		return nil
	}
	path := filepath.Join(dir, NodeIDFile)
	b, err := os.ReadFile(path)
	switch held := strings.TrimSpace(string(b)); {
	case err == nil && held == "":
		// WriteFileAtomic writes the id or nothing: an empty record is
		// damage, and adopting id would hand another node's Raft state
		// (its votes, its place in the configuration) to this one.
		return damaged(dir, path, errors.New("the node-id record is empty"))
	case err == nil && held != id:
		return fmt.Errorf("%w: %s holds node %q, not %q (start it with --node-id %s, or give this node its own data directory)",
			ErrOtherNode, dir, held, id, held)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read node id: %w", err)
	}
	return nil
}

// recordNodeID records id in dir unless a record is there: a directory
// from before the file existed, or one of a node started without an id,
// adopts id. It is called once the log file is in place, so that a node-id
// record without a log means the log was lost (checkLog).
func recordNodeID(dir, id string) error {
	if id == "" {
		return nil
	}
	path := filepath.Join(dir, NodeIDFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		return nil
	}
	if err := WriteFileAtomic(path, []byte(id+"\n")); err != nil {
		return fmt.Errorf("record node id: %w", err)
	}
	return nil
}

// WriteFileAtomic writes data to path so that a crash or an interrupted
// write leaves either the old file or the whole new one: a temporary file
// beside it, synced, renamed into place, then the directory synced.
func WriteFileAtomic(path string, data []byte) error {
	f, err := replaceFile(path, data)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// replaceFile is WriteFileAtomic that keeps the new file open (for reading
// and writing, at its end) once it is renamed into place, error or not: a
// failure after the rename (syncing the directory) leaves path naming the
// new file, and a caller that keeps a handle must follow it there. The
// file is nil when path still names the old one.
func replaceFile(path string, data []byte) (*os.File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	return tmp, syncDir(filepath.Dir(path))
}

// syncDir makes dir's entries durable: a file created or renamed there,
// however synced itself, may otherwise be gone after a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Store is an open data directory.
type Store struct {
	dir  string
	lock *os.File
	bolt *raftboltdb.BoltStore
	// mapped guards every use of bolt, so that its mapped pages can be
	// given back after the log is cut (mappedLog).
	mapped *mappedLog
	// Log is the Raft log store (bolt behind an in-memory cache of recent entries).
	Log raft.LogStore
	// Stable is the Raft stable store (current term, vote).
	Stable raft.StableStore
	// Snapshots is the file snapshot store.
	Snapshots raft.SnapshotStore
	// Disk hears of every write to the stores above that fails for lack of
	// room, and says while the disk is full (DiskWatch).
	Disk *DiskWatch
}

// Open locks and opens the data directory.
func Open(cfg Config, log hclog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("store config: %w", err)
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s, err := lockStore(cfg)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.Dir, LogFile)
	start := time.Now()
	info, err := checkDir(cfg.Dir)
	if err != nil {
		s.unlock()
		return nil, err
	}
	log.Debug("checked the data directory", "log_entries", info.Entries, "log_pages", info.Pages,
		"elapsed_ms", time.Since(start).Milliseconds())
	if err := s.openBolt(logPath); err != nil {
		s.unlock()
		if errors.Is(err, errPanicked) || errors.Is(err, bbolt.ErrInvalid) || errors.Is(err, bbolt.ErrChecksum) ||
			errors.Is(err, bbolt.ErrVersionMismatch) {
			return nil, damaged(cfg.Dir, logPath, fmt.Errorf("the log store is damaged: %w", err))
		}
		return nil, fmt.Errorf("open log store: %w", err)
	}
	if err := s.openStores(cfg, info, logPath, log); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// lockStore creates the data directory if need be, locks it, and checks
// that it belongs to cfg.NodeID.
func lockStore(cfg Config) (*Store, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: cfg.Dir, lock: lock}
	if err := checkNodeID(cfg.Dir, cfg.NodeID); err != nil {
		s.unlock()
		return nil, err
	}
	return s, nil
}

// openBolt opens the log file in bolt (a panic inside it comes back as an
// error).
func (s *Store) openBolt(logPath string) error {
	return noPanic("open", func() (err error) {
		s.bolt, err = raftboltdb.New(raftboltdb.Options{
			Path: logPath,
			// Our own lock already excludes other processes; the timeout only
			// guards against a stuck bolt lock. The log is appended to and
			// cut at the front after every snapshot, which leaves many free
			// pages: bolt's default freelist (a sorted array, written out
			// whole at every commit and merged on every free) then costs each
			// write more the longer the node has run. The hash-map freelist
			// is not written at all (bolt rebuilds it by scanning the file
			// when it opens, quick for a log of this size).
			BoltOptions: &bbolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
		})
		return err
	})
}

// openStores puts the Raft stores over the open bolt file (the log behind
// a cache, both watched for a full disk), checks that bolt sees the log
// the check read (info), records the node id, and opens the snapshot
// store. On an error the caller closes s.
func (s *Store) openStores(cfg Config, info LogCheck, logPath string, log hclog.Logger) error {
	s.mapped = newMappedLog(s.bolt, logPath, log.Named("log"))
	// Opening read every page in use (bolt rebuilds its freelist by
	// walking the file): give them back, as after a cut.
	s.mapped.releaseLogged("open", 0, 0)
	s.Disk = NewDiskWatch(cfg.Dir)
	// The watch goes below the cache, which caches only what was stored.
	s.Log = newLogCache(WatchLog(s.mapped, s.Disk), logCacheSize, logCacheBytes)
	s.Stable = WatchStable(s.mapped, s.Disk)
	// bolt must see the log the check read: the same meta page, the same
	// entries.
	if err := noPanic("read", func() error { return errors.Join(s.checkBounds(info), s.checkTerms()) }); err != nil {
		return damaged(cfg.Dir, logPath, fmt.Errorf("the log store is damaged: %w", err))
	}
	if err := recordNodeID(cfg.Dir, cfg.NodeID); err != nil {
		return err
	}
	// The file snapshot store adds its own "snapshots" folder under the
	// directory it is given.
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain,
		log.Named("snapshots"))
	if err != nil {
		return fmt.Errorf("open snapshot store: %w", err)
	}
	s.Snapshots = WatchSnapshots(snaps, s.Disk)
	return nil
}

// stableTerms are the stable store's numbers raft reads (raft's
// keyCurrentTerm and keyLastVoteTerm): 8 bytes each, or absent.
var stableTerms = []string{"CurrentTerm", "LastVoteTerm"}

// checkTerms checks that the terms raft will read are 8 bytes, or absent:
// CheckLogFile checks the stable bucket's structure, not its values, and
// raft-boltdb reads a shorter value by indexing past its end (a panic in
// whoever reads it first: HasState at start-up, or raft).
func (s *Store) checkTerms() error {
	for _, key := range stableTerms {
		v, err := s.mapped.Get([]byte(key))
		if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
			return fmt.Errorf("stable store %s: %w", key, err)
		}
		if err == nil && len(v) != 8 {
			return fmt.Errorf("stable store %s holds %d bytes, not 8", key, len(v))
		}
	}
	return nil
}

// checkBounds reads the log's first and last entries through bolt and
// compares them with what CheckLogFile found.
func (s *Store) checkBounds(info LogCheck) error {
	first, err := s.mapped.FirstIndex()
	if err != nil {
		return fmt.Errorf("first index: %w", err)
	}
	last, err := s.mapped.LastIndex()
	if err != nil {
		return fmt.Errorf("last index: %w", err)
	}
	if first != info.FirstIndex || last != info.LastIndex {
		return fmt.Errorf("bolt reads entries %d..%d, the check read %d..%d", first, last, info.FirstIndex, info.LastIndex)
	}
	if last > 0 {
		var l raft.Log
		if err := s.mapped.GetLog(last, &l); err != nil {
			return fmt.Errorf("last entry %d: %w", last, err)
		}
	}
	return nil
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// ConfiguredServers is how many servers the directory's latest Raft
// configuration names (0 without state): the latest snapshot's, or a
// configuration entry logged after it. heureka serve reads it before Raft
// starts, to judge a node restarted without cluster flags.
func (s *Store) ConfiguredServers() (int, error) {
	servers, index := 0, uint64(0)
	metas, err := s.Snapshots.List()
	if err != nil {
		return 0, fmt.Errorf("list snapshots: %w", err)
	}
	if len(metas) > 0 {
		servers, index = len(metas[0].Configuration.Servers), metas[0].Index
	}
	first, err := s.Log.FirstIndex()
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	last, err := s.Log.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	for i := max(first, index+1); i <= last && i > 0; i++ {
		var l raft.Log
		if err := s.Log.GetLog(i, &l); err != nil || l.Type != raft.LogConfiguration {
			continue
		}
		if n, ok := decodeServers(l.Data); ok {
			servers = n
		}
	}
	return servers, nil
}

// decodeServers counts the servers of an encoded configuration; Raft's
// decoder panics on bad input, which here only means "not known".
func decodeServers(data []byte) (n int, ok bool) {
	defer func() {
		if recover() != nil {
			n, ok = 0, false
		}
	}()
	return len(raft.DecodeConfiguration(data).Servers), true
}

// ClusterID is the identity of the cluster the directory belongs to, as
// recorded by SetClusterID; "" when none is recorded (a new directory, or
// one from before the file existed).
func (s *Store) ClusterID() (string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, ClusterIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read cluster id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SetClusterID records the identity of the cluster the directory belongs
// to, so that the node can name it before it has replayed its log.
func (s *Store) SetClusterID(id string) error {
	if err := WriteFileAtomic(filepath.Join(s.dir, ClusterIDFile), []byte(id+"\n")); err != nil {
		return fmt.Errorf("record cluster id: %w", err)
	}
	return nil
}

// HasState reports whether the directory already holds Raft state, in which
// case bootstrap settings are ignored.
func (s *Store) HasState() (bool, error) {
	ok, err := raft.HasExistingState(s.Log, s.Stable, s.Snapshots)
	if err != nil {
		return false, fmt.Errorf("check existing state: %w", err)
	}
	return ok, nil
}

// LogSize is the size in bytes of the log file.
func (s *Store) LogSize() int64 {
	fi, err := os.Stat(filepath.Join(s.dir, LogFile))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Close closes the log store and releases the lock.
func (s *Store) Close() error {
	var err error
	if s.mapped != nil {
		err = s.mapped.Close()
	} else if s.bolt != nil {
		err = s.bolt.Close()
	}
	s.bolt, s.mapped = nil, nil
	s.unlock()
	if err != nil {
		return fmt.Errorf("close log store: %w", err)
	}
	return nil
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := io.ReadAll(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (held by pid %s)", ErrLocked, dir, string(owner))
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprint(os.Getpid())), 0)
	return f, nil
}

func (s *Store) unlock() {
	if s.lock != nil {
		_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
		s.lock.Close()
		s.lock = nil
	}
}
