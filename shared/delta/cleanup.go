package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// CleanupOptions tune CleanupLog.
type CleanupOptions struct {
	// Retention keeps commits newer than Retention; 0 means the table's
	// delta.logRetentionDuration (default 30 days).
	Retention time.Duration
	// Now is the clock; nil means the table's clock.
	Now func() time.Time
}

// CleanupResult reports what CleanupLog deleted.
type CleanupResult struct {
	// Deleted are the deleted object names, oldest version first.
	Deleted []string
	// OldestVersion is the oldest version still reconstructable (-1 when
	// nothing was deleted).
	OldestVersion int64
	Cutoff        time.Time
}

// CleanupLog deletes expired log files as Delta's metadata cleanup does:
// the cutoff is midnight UTC of now − retention; with V the newest commit
// whose timestamp is not after the cutoff and C the newest complete
// checkpoint at or before V, every commit, checkpoint (UUID-named V2 ones
// included), checksum and compacted log file of a version < C is deleted,
// oldest first. C's checkpoint and commit stay, so the latest snapshot and
// every version from C on remain loadable. Nothing is deleted when no such
// checkpoint exists, or when delta.enableExpiredLogCleanup is "false".
// Sidecar files in _delta_log/_sidecars are left alone: deleting the ones
// no kept checkpoint references (PROTOCOL.md "Metadata Cleanup", steps 4
// and 5) is not done yet.
func (t *Table) CleanupLog(ctx context.Context, opts CleanupOptions) (CleanupResult, error) {
	res := CleanupResult{OldestVersion: -1}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return res, fmt.Errorf("clean up log: %w", err)
	}
	if v, ok := snap.st.metadata.Configuration[PropEnableExpiredLogCleanup]; ok && strings.EqualFold(strings.TrimSpace(v), "false") {
		t.opts.Logger.Info("delta: expired log cleanup disabled by table property", "table", t.store.URL(), "property", PropEnableExpiredLogCleanup)
		return res, nil
	}
	retention := opts.Retention
	if retention == 0 {
		if retention, err = durationProp(snap.st.metadata.Configuration, PropLogRetentionDuration, defaultLogRetention); err != nil {
			return res, fmt.Errorf("clean up log of %s: %w", t.store.URL(), err)
		}
	}
	if retention < 0 {
		return res, fmt.Errorf("clean up log of %s: negative retention %s", t.store.URL(), retention)
	}
	now := t.now
	if opts.Now != nil {
		now = opts.Now
	}
	cutoff := now().Add(-retention).UTC().Truncate(24 * time.Hour)
	res.Cutoff = cutoff

	timeline, err := t.commitTimeline(ctx)
	if err != nil {
		return res, fmt.Errorf("clean up log: %w", err)
	}
	newestExpired := int64(-1)
	for _, c := range timeline {
		if c.timestampMs <= cutoff.UnixMilli() {
			newestExpired = c.version
		}
	}
	if newestExpired < 0 {
		return res, nil
	}
	l, err := listLog(ctx, t.store, 0)
	if err != nil {
		return res, fmt.Errorf("clean up log: %w", err)
	}
	keepFrom := int64(-1)
	for v := range l.checkpoints {
		if v <= newestExpired && v <= snap.version && v > keepFrom {
			keepFrom = v
		}
	}
	if keepFrom <= 0 {
		return res, nil
	}
	var names []string
	err = t.store.List(ctx, logDir, "", func(info objstore.Info) error {
		lf, ok := parseLogName(info)
		if !ok || lf.version >= keepFrom {
			return nil
		}
		switch lf.kind {
		case kindCommit, kindCheckpoint, kindCheckpointPart, kindCheckpointUUID, kindCRC:
			names = append(names, info.Name)
		default:
			if end, ok := compactedEnd(info.Name); ok && end < keepFrom {
				names = append(names, info.Name)
			}
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", t.store.URL(), err)
	}
	slices.Sort(names) // zero-padded versions: lexical = version order
	for _, name := range names {
		if err := t.store.Delete(ctx, name); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return res, fmt.Errorf("clean up log of %s: delete %s: %w", t.store.URL(), name, err)
		}
		res.Deleted = append(res.Deleted, name)
	}
	res.OldestVersion = keepFrom
	t.opts.Logger.Info("delta: cleaned up expired log", "table", t.store.URL(), "deleted", len(res.Deleted), "oldest_version", keepFrom, "cutoff", cutoff)
	return res, nil
}

// compactedEnd parses "_delta_log/<x>.<y>.compacted.json" and returns y.
func compactedEnd(name string) (int64, bool) {
	base := strings.TrimPrefix(name, logDir)
	rest, ok := strings.CutSuffix(base, ".compacted.json")
	if !ok {
		return 0, false
	}
	_, end, ok := strings.Cut(rest, ".")
	if !ok || len(end) != 20 {
		return 0, false
	}
	var v int64
	if _, err := fmt.Sscanf(end, "%d", &v); err != nil {
		return 0, false
	}
	return v, true
}
