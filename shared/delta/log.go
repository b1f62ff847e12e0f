package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Log replay: find the newest usable checkpoint (the _last_checkpoint hint
// first, a listing otherwise), then apply the contiguous JSON commits after
// it. Parsing and reconciliation are pure functions over bytes and actions;
// only loadSegment, readCommit and readObject touch the store.

// commitName returns the object name of the commit file of version v.
func commitName(v int64) string { return fmt.Sprintf("%s%020d.json", logDir, v) }

// checkpointName returns the object name of the classic checkpoint of v.
func checkpointName(v int64) string { return fmt.Sprintf("%s%020d.checkpoint.parquet", logDir, v) }

// logFileKind classifies a _delta_log entry.
type logFileKind int

const (
	kindCommit logFileKind = iota + 1
	kindCheckpoint
	kindCheckpointPart
	kindCheckpointUUID
	kindCRC
	kindOther
)

// logFile is a parsed _delta_log entry.
type logFile struct {
	info    objstore.Info
	version int64
	kind    logFileKind
	part    int // 1-based, multi-part checkpoints only
	parts   int
}

// parseLogName classifies a store name below _delta_log/. Names in
// subdirectories (_sidecars, _staged_commits), hidden files (Hadoop's .crc
// sidecars) and files not starting with a 20-digit version report ok=false.
// Checkpoint names follow PROTOCOL.md "Checkpoints": n.checkpoint.parquet
// (classic), n.checkpoint.o.p.parquet (multi-part) and
// n.checkpoint.u.json|parquet (UUID-named, always V2 spec).
func parseLogName(info objstore.Info) (logFile, bool) {
	base, ok := strings.CutPrefix(info.Name, logDir)
	if !ok || strings.Contains(base, "/") || len(base) < 21 || base[20] != '.' {
		return logFile{}, false
	}
	v, err := strconv.ParseInt(base[:20], 10, 64)
	if err != nil || v < 0 {
		return logFile{}, false
	}
	lf := logFile{info: info, version: v, kind: kindOther}
	rest := base[21:]
	switch {
	case rest == "json":
		lf.kind = kindCommit
	case rest == "crc":
		lf.kind = kindCRC
	case rest == "checkpoint.parquet":
		lf.kind = kindCheckpoint
	case strings.HasPrefix(rest, "checkpoint.") && strings.HasSuffix(rest, ".parquet"):
		// checkpoint.<part 10 digits>.<parts 10 digits>.parquet or
		// checkpoint.<uuid>.parquet.
		mid := strings.TrimSuffix(strings.TrimPrefix(rest, "checkpoint."), ".parquet")
		p, t, ok := strings.Cut(mid, ".")
		if ok && len(p) == 10 && len(t) == 10 {
			pi, err1 := strconv.Atoi(p)
			ti, err2 := strconv.Atoi(t)
			if err1 == nil && err2 == nil && pi >= 1 && pi <= ti {
				lf.kind, lf.part, lf.parts = kindCheckpointPart, pi, ti
			}
		} else if !ok && mid != "" {
			lf.kind = kindCheckpointUUID
		}
	case strings.HasPrefix(rest, "checkpoint.") && strings.HasSuffix(rest, ".json"):
		if u := strings.TrimSuffix(strings.TrimPrefix(rest, "checkpoint."), ".json"); u != "" && !strings.Contains(u, ".") {
			lf.kind = kindCheckpointUUID
		}
	}
	return lf, true
}

// checkpointRef is one complete checkpoint: a classic file, every part of
// a multi-part set (parts in order), or a UUID-named V2 checkpoint.
type checkpointRef struct {
	version   int64
	files     []objstore.Info
	uuidNamed bool
	// embedded is the checkpoint's content as _last_checkpoint carries it,
	// when complete enough to spare reading files[0] (see useHint).
	embedded *lastCheckpointV2
}

// segment is what a snapshot at version is built from.
type segment struct {
	version    int64
	checkpoint *checkpointRef
	commits    []objstore.Info // versions checkpoint+1 .. version, contiguous
	// commit is version's commit file as listed, when the listing holds
	// it (a version only a checkpoint stands for may not), for
	// SnapshotSince.
	commit objstore.Info
}

// listing is the parsed content of (part of) _delta_log.
type listing struct {
	commits     map[int64]objstore.Info
	checkpoints map[int64]*checkpointRef  // complete checkpoints only, one per version
	uuidNamed   map[int64][]objstore.Info // UUID-named checkpoints by version, in name order
	crcs        map[int64]objstore.Info
	others      []logFile
}

// listLog lists _delta_log entries with version ≥ from.
func listLog(ctx context.Context, store objstore.Store, from int64) (*listing, error) {
	l := &listing{
		commits:     map[int64]objstore.Info{},
		checkpoints: map[int64]*checkpointRef{},
		uuidNamed:   map[int64][]objstore.Info{},
		crcs:        map[int64]objstore.Info{},
	}
	startAt := ""
	if from > 0 {
		startAt = fmt.Sprintf("%s%020d", logDir, from)
	}
	parts := map[[2]int64][]objstore.Info{} // (version, parts) → infos by part index
	err := store.List(ctx, logDir, startAt, func(info objstore.Info) error {
		lf, ok := parseLogName(info)
		if !ok {
			return nil
		}
		switch lf.kind {
		case kindCommit:
			l.commits[lf.version] = info
		case kindCheckpoint:
			l.checkpoints[lf.version] = &checkpointRef{version: lf.version, files: []objstore.Info{info}}
		case kindCheckpointPart:
			k := [2]int64{lf.version, int64(lf.parts)}
			if parts[k] == nil {
				parts[k] = make([]objstore.Info, lf.parts)
			}
			parts[k][lf.part-1] = info
		case kindCheckpointUUID:
			l.uuidNamed[lf.version] = append(l.uuidNamed[lf.version], info)
		case kindCRC:
			l.crcs[lf.version] = info
		default:
			l.others = append(l.others, lf)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s%s: %w", store.URL(), logDir, err)
	}
	// Several checkpoints of one version hold the same state; a reader may
	// use any (PROTOCOL.md "Checkpoints"). Prefer the classic file, then
	// the first UUID-named one, then a complete multi-part set.
	for v, infos := range l.uuidNamed {
		if _, classic := l.checkpoints[v]; !classic {
			l.checkpoints[v] = &checkpointRef{version: v, files: infos[:1], uuidNamed: true}
		}
	}
	for k, infos := range parts {
		if _, other := l.checkpoints[k[0]]; other {
			continue
		}
		complete := !slices.ContainsFunc(infos, func(i objstore.Info) bool { return i.Name == "" })
		if complete {
			l.checkpoints[k[0]] = &checkpointRef{version: k[0], files: infos}
		}
	}
	return l, nil
}

// latestVersion is the newest version the listing can reach, or -1.
func (l *listing) latestVersion() int64 {
	v := int64(-1)
	for c := range l.commits {
		v = max(v, c)
	}
	for c := range l.checkpoints {
		v = max(v, c)
	}
	return v
}

// segmentFor picks the newest complete checkpoint ≤ target and the commits
// after it. target < 0 means the latest version. needCheckpoint refuses a
// segment that would start at version 0 (used for partial listings, which
// do not see early commits).
func (l *listing) segmentFor(target int64, needCheckpoint bool) (*segment, error) {
	latest := l.latestVersion()
	if latest < 0 {
		return nil, ErrNotATable
	}
	if target < 0 {
		target = latest
	}
	if target > latest {
		return nil, fmt.Errorf("%w: version %d is newer than the latest version %d", ErrVersionNotFound, target, latest)
	}
	seg := &segment{version: target, commit: l.commits[target]}
	for v, cp := range l.checkpoints {
		if v <= target && (seg.checkpoint == nil || v > seg.checkpoint.version) {
			seg.checkpoint = cp
		}
	}
	if seg.checkpoint == nil && needCheckpoint {
		return nil, errNeedFullListing
	}
	start := int64(0)
	if seg.checkpoint != nil {
		start = seg.checkpoint.version + 1
	}
	for v := start; v <= target; v++ {
		info, ok := l.commits[v]
		if !ok {
			if v == start && seg.checkpoint == nil {
				return nil, fmt.Errorf("%w: version %d needs commit %d, which is not retained and no checkpoint covers it", ErrVersionNotFound, target, v)
			}
			return nil, fmt.Errorf("%w: commit %d is missing (versions must be contiguous)", ErrCorruptLog, v)
		}
		seg.commits = append(seg.commits, info)
	}
	return seg, nil
}

var errNeedFullListing = errors.New("partial listing has no checkpoint")

// lastCheckpoint is the _last_checkpoint hint (PROTOCOL.md "Last
// Checkpoint File Schema").
type lastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	Parts         *int   `json:"parts,omitempty"`
	SizeInBytes   *int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles *int64 `json:"numOfAddFiles,omitempty"`
	// V2Checkpoint names the UUID-named checkpoint of Version and may
	// embed its content: "a writer can choose to embed some or all of the
	// V2 spec checkpoint in the _last_checkpoint file" (PROTOCOL.md "V2
	// Spec"). Spark writes it as LastCheckpointV2.
	V2Checkpoint *lastCheckpointV2 `json:"v2Checkpoint,omitempty"`
}

// lastCheckpointV2 is _last_checkpoint's v2Checkpoint. A nil slice means
// the writer left that part out; an empty one that there is none.
type lastCheckpointV2 struct {
	Path             string    `json:"path"`
	SizeInBytes      int64     `json:"sizeInBytes"`
	ModificationTime int64     `json:"modificationTime"`
	NonFileActions   []Action  `json:"nonFileActions,omitempty"`
	SidecarFiles     []Sidecar `json:"sidecarFiles,omitempty"`
}

// useHint makes seg start from the UUID-named checkpoint that lc names,
// when seg starts from a checkpoint of that version and the file is still
// listed (a hint can be stale). The embedded content replaces reading the
// file only when it has every non-file action (their checkpointMetadata
// among them) and at least one sidecar: a V2 checkpoint keeps either all
// or none of its file actions in sidecars (PROTOCOL.md "V2 Spec"), so with
// sidecars the file holds nothing else, while without them its file
// actions are in the file.
func (l *listing) useHint(seg *segment, lc lastCheckpoint) {
	h := lc.V2Checkpoint
	if h == nil || seg.checkpoint == nil || seg.checkpoint.version != lc.Version {
		return
	}
	name := logDir + h.Path[strings.LastIndexByte(h.Path, '/')+1:]
	i := slices.IndexFunc(l.uuidNamed[lc.Version], func(info objstore.Info) bool { return info.Name == name })
	if i < 0 {
		return
	}
	cp := &checkpointRef{version: lc.Version, files: []objstore.Info{l.uuidNamed[lc.Version][i]}, uuidNamed: true}
	ownMetadata := func(a Action) bool { return a.CheckpointMetadata != nil && a.CheckpointMetadata.Version == lc.Version }
	if len(h.SidecarFiles) > 0 && slices.ContainsFunc(h.NonFileActions, ownMetadata) {
		cp.embedded = h
	}
	seg.checkpoint = cp
}

// readLastCheckpoint returns the hint, or ok=false when it is missing,
// empty or corrupt (the hint is advisory; a listing always works).
func (t *Table) readLastCheckpoint(ctx context.Context) (lastCheckpoint, bool) {
	b, err := readObject(ctx, t.store, lastCheckpointName)
	if err != nil {
		if !errors.Is(err, objstore.ErrNotExist) {
			t.opts.Logger.Debug("delta: ignoring unreadable _last_checkpoint", "table", t.store.URL(), "error", err)
		}
		return lastCheckpoint{}, false
	}
	var lc lastCheckpoint
	if err := json.Unmarshal(bytes.TrimSpace(b), &lc); err != nil || lc.Version < 0 {
		t.opts.Logger.Debug("delta: ignoring corrupt _last_checkpoint", "table", t.store.URL(), "error", err)
		return lastCheckpoint{}, false
	}
	return lc, true
}

// loadSegment finds the files for version target (< 0: latest).
func (t *Table) loadSegment(ctx context.Context, target int64) (*segment, error) {
	lc, hinted := t.readLastCheckpoint(ctx)
	if hinted && (target < 0 || lc.Version <= target) {
		l, err := listLog(ctx, t.store, lc.Version)
		if err != nil {
			return nil, err
		}
		seg, err := l.segmentFor(target, true)
		if err == nil {
			l.useHint(seg, lc)
			return seg, nil
		}
		if !errors.Is(err, errNeedFullListing) && !errors.Is(err, ErrNotATable) {
			return nil, err
		}
		// The hint is stale (its checkpoint is gone or incomplete): list all.
	}
	l, err := listLog(ctx, t.store, 0)
	if err != nil {
		return nil, err
	}
	seg, err := l.segmentFor(target, false)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", t.store.URL(), err)
	}
	if hinted {
		l.useHint(seg, lc)
	}
	return seg, nil
}

// readObject reads a whole object.
func readObject(ctx context.Context, store objstore.Store, name string) ([]byte, error) {
	r, err := store.NewReader(ctx, name, 0, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// commitData is one parsed JSON commit.
type commitData struct {
	version   int64
	actions   []Action
	info      *CommitInfo
	ict       *int64 // commitInfo.inCommitTimestamp
	modTimeMs int64
}

// timestampMs is the commit's raw timestamp: inCommitTimestamp, else
// commitInfo.timestamp, else the file's modification time.
func (c *commitData) timestampMs() int64 {
	switch {
	case c.ict != nil:
		return *c.ict
	case c.info != nil && c.info.Timestamp > 0:
		return c.info.Timestamp
	}
	return c.modTimeMs
}

// readCommit reads and parses the commit file info.
func readCommit(ctx context.Context, store objstore.Store, info objstore.Info, version int64) (*commitData, error) {
	b, err := readObject(ctx, store, info.Name)
	if err != nil {
		return nil, fmt.Errorf("read commit %d: %w", version, err)
	}
	c, err := parseCommit(version, b)
	if err != nil {
		return nil, err
	}
	c.modTimeMs = info.Updated.UnixMilli()
	return c, nil
}

// parseCommit parses a commit file.
func parseCommit(version int64, b []byte) (*commitData, error) {
	c := &commitData{version: version}
	err := parseActions(b, func(line []byte, a *Action) {
		if a.CommitInfo != nil {
			if c.info == nil {
				c.info = a.CommitInfo
				var ict struct {
					CommitInfo struct {
						InCommitTimestamp *int64 `json:"inCommitTimestamp"`
					} `json:"commitInfo"`
				}
				if json.Unmarshal(line, &ict) == nil {
					c.ict = ict.CommitInfo.InCommitTimestamp
				}
			}
			return
		}
		c.actions = append(c.actions, *a)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: commit %d %w", ErrCorruptLog, version, err)
	}
	return c, nil
}

// parseActions calls fn for each action of newline-delimited JSON (a
// commit or a JSON checkpoint). Blank lines, unknown fields and unknown
// action types are ignored, as the protocol requires. The error names the
// line that is not JSON.
func parseActions(b []byte, fn func(line []byte, a *Action)) error {
	for lineNo := 1; len(b) > 0; lineNo++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var a Action
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		fn(line, &a)
	}
	return nil
}

// monotonic makes commit timestamps strictly increasing the way Delta does
// for time travel: a commit not later than its predecessor is placed 1 ms
// after it.
func monotonic(ts []int64) {
	for i := 1; i < len(ts); i++ {
		if ts[i] <= ts[i-1] {
			ts[i] = ts[i-1] + 1
		}
	}
}

// fileKey is the logical file key (path, deletion vector unique id).
func fileKey(path string, dv *DeletionVector) string {
	if dv == nil {
		return path
	}
	return path + "\x00" + dvID(dv)
}

// dvID is the deletion vector's unique id: storageType, pathOrInlineDv and
// "@offset" when an offset is present; "" for no deletion vector.
func dvID(dv *DeletionVector) string {
	if dv == nil {
		return ""
	}
	id := dv.StorageType + dv.PathOrInlineDv
	if dv.Offset != nil {
		id += "@" + strconv.FormatInt(int64(*dv.Offset), 10)
	}
	return id
}

// state is the reconciled content of the log at a version.
type state struct {
	protocol   *Protocol
	metadata   *Metadata
	files      map[string]Add
	tombstones map[string]Remove
	txns       map[string]Txn
	domains    map[string]DomainMetadata
}

func newState() *state {
	return &state{
		files:      map[string]Add{},
		tombstones: map[string]Remove{},
		txns:       map[string]Txn{},
		domains:    map[string]DomainMetadata{},
	}
}

// clone copies the state so a new version can be applied without touching
// the snapshot it came from.
func (s *state) clone() *state {
	c := &state{
		protocol:   s.protocol,
		metadata:   s.metadata,
		files:      make(map[string]Add, len(s.files)),
		tombstones: make(map[string]Remove, len(s.tombstones)),
		txns:       make(map[string]Txn, len(s.txns)),
		domains:    make(map[string]DomainMetadata, len(s.domains)),
	}
	for k, v := range s.files {
		c.files[k] = v
	}
	for k, v := range s.tombstones {
		c.tombstones[k] = v
	}
	for k, v := range s.txns {
		c.txns[k] = v
	}
	for k, v := range s.domains {
		c.domains[k] = v
	}
	return c
}

// apply reconciles one action. fromCheckpoint marks checkpoint rows, whose
// removes are tombstones that never cancel a checkpoint add.
func (s *state) apply(a *Action, fromCheckpoint bool) {
	switch {
	case a.Add != nil:
		k := fileKey(a.Add.Path, a.Add.DeletionVector)
		add := *a.Add
		if add.PartitionValues == nil {
			add.PartitionValues = map[string]*string{}
		}
		s.files[k] = add
		delete(s.tombstones, k)
	case a.Remove != nil:
		k := fileKey(a.Remove.Path, a.Remove.DeletionVector)
		if !fromCheckpoint {
			delete(s.files, k)
		}
		s.tombstones[k] = *a.Remove
	case a.MetaData != nil:
		md := *a.MetaData
		s.metadata = &md
	case a.Protocol != nil:
		p := *a.Protocol
		s.protocol = &p
	case a.Txn != nil:
		s.txns[a.Txn.AppID] = *a.Txn
	case a.DomainMetadata != nil:
		if a.DomainMetadata.Removed {
			delete(s.domains, a.DomainMetadata.Domain)
		} else {
			s.domains[a.DomainMetadata.Domain] = *a.DomainMetadata
		}
	}
}

// replay builds the snapshot for seg.
func (t *Table) replay(ctx context.Context, seg *segment) (*Snapshot, error) {
	st := newState()
	cpVersion := int64(-1)
	var lastTs int64
	if seg.checkpoint != nil {
		cpVersion = seg.checkpoint.version
		if err := loadCheckpoint(ctx, t.store, seg.checkpoint, func(a *Action) { st.apply(a, true) }); err != nil {
			return nil, fmt.Errorf("load checkpoint %d of %s: %w", cpVersion, t.store.URL(), err)
		}
		for _, f := range seg.checkpoint.files {
			lastTs = max(lastTs, f.Updated.UnixMilli())
		}
	}
	for i, info := range seg.commits {
		v := cpVersion + 1 + int64(i)
		c, err := readCommit(ctx, t.store, info, v)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", t.store.URL(), err)
		}
		lastTs = st.applyCommits(lastTs, c)
	}
	return t.snapshotOf(st, seg.version, cpVersion, lastTs, seg.commit)
}

// applyCommits applies the actions of commits, in order, and returns the
// last one's timestamp (lastTs when there is none).
func (s *state) applyCommits(lastTs int64, commits ...*commitData) int64 {
	for _, c := range commits {
		for j := range c.actions {
			s.apply(&c.actions[j], false)
		}
		lastTs = c.timestampMs()
	}
	return lastTs
}

// snapshotOf returns the snapshot of st, the reconciled state of version,
// once it has a protocol and a metaData this reader supports; commit is
// the version's commit file as listed (empty when unknown).
func (t *Table) snapshotOf(st *state, version, cpVersion, lastTs int64, commit objstore.Info) (*Snapshot, error) {
	if st.protocol == nil || st.metadata == nil {
		return nil, fmt.Errorf("%w: %s version %d has no protocol or metaData", ErrCorruptLog, t.store.URL(), version)
	}
	if err := st.protocol.CheckRead(); err != nil {
		return nil, fmt.Errorf("read %s: %w", t.store.URL(), err)
	}
	snap, err := newSnapshot(t, version, cpVersion, lastTs, st)
	if err != nil {
		return nil, err
	}
	snap.commit = commit
	return snap, nil
}

// msTime converts epoch milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// sortedValues returns m's values ordered by key.
func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// ioParallelism bounds concurrent object reads (commit files).
const ioParallelism = 8

// parallel runs fn(i) for i in [0, n) with bounded concurrency and returns
// the first error.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(ioParallelism)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}
