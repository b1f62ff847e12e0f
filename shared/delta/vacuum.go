package delta

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// VacuumOptions tune Vacuum.
type VacuumOptions struct {
	// Retention keeps files removed less than Retention ago; 0 means the
	// table's delta.deletedFileRetentionDuration (default 7 days).
	Retention time.Duration
	// DryRun lists what would be deleted without deleting or committing.
	DryRun bool
	// Force allows a Retention shorter than the table's setting. Readers
	// and writers running longer than Retention may then fail.
	Force bool
	// Now is the clock; nil means the table's clock.
	Now func() time.Time
}

// VacuumResult reports what Vacuum deleted (or would delete on a dry run).
type VacuumResult struct {
	Files     []string // object names, sorted
	Bytes     int64
	Cutoff    time.Time
	Retention time.Duration
	DryRun    bool
	// KeptFiles and KeptBytes count the files vacuum considered and kept:
	// referenced, or too recent to judge.
	KeptFiles int
	KeptBytes int64
	// StartVersion and EndVersion are the versions of the VACUUM START and
	// VACUUM END commits; 0 when not committed (a dry run, or a table this
	// package may not write, see Vacuum).
	StartVersion, EndVersion int64
}

// Vacuum deletes files under the table root that no retained version
// needs: everything except _delta_log and hidden paths (names starting
// with '_' or '.', except partition directories and _change_data), unless
// a live add or its deletion vector references it, a tombstone removed
// after the cutoff references it, or it was modified after the cutoff
// (an in-flight write). The protocol is checked first. Like Spark it
// records commitInfo-only "VACUUM START" and "VACUUM END" commits, which
// conflict with nothing; they are skipped when we may not write the table.
func (t *Table) Vacuum(ctx context.Context, opts VacuumOptions) (VacuumResult, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return VacuumResult{}, fmt.Errorf("vacuum: %w", err)
	}
	if err := snap.Protocol().CheckVacuum(); err != nil {
		return VacuumResult{}, fmt.Errorf("vacuum %s: %w", t.store.URL(), err)
	}
	conf := snap.st.metadata.Configuration
	tableRetention, err := durationProp(conf, PropDeletedFileRetention, defaultDeletedFileRetention)
	if err != nil {
		return VacuumResult{}, fmt.Errorf("vacuum %s: %w", t.store.URL(), err)
	}
	retention := opts.Retention
	if retention == 0 {
		retention = tableRetention
	}
	if retention < 0 || (retention < tableRetention && !opts.Force) {
		return VacuumResult{}, fmt.Errorf("vacuum %s: retention %s is below the table's %s of %s, the time a reader of an older version or a write in flight may need its files: %w",
			t.store.URL(), retention, PropDeletedFileRetention, tableRetention, ErrRetentionTooShort)
	}
	now := t.now
	if opts.Now != nil {
		now = opts.Now
	}
	cutoff := now().Add(-retention)
	res := VacuumResult{Cutoff: cutoff, Retention: retention, DryRun: opts.DryRun}

	keep, err := t.vacuumKeepSet(snap, cutoff.UnixMilli())
	if err != nil {
		return VacuumResult{}, fmt.Errorf("vacuum %s: %w", t.store.URL(), err)
	}
	err = t.store.List(ctx, "", "", func(info objstore.Info) error {
		if hiddenFromVacuum(info.Name) {
			return nil
		}
		if keep[info.Name] || keep[dvKeepKey(info.Name)] || info.Updated.After(cutoff) {
			res.KeptFiles++
			res.KeptBytes += info.Size
			return nil
		}
		res.Files = append(res.Files, info.Name)
		res.Bytes += info.Size
		return nil
	})
	if err != nil {
		return VacuumResult{}, fmt.Errorf("vacuum %s: list: %w", t.store.URL(), err)
	}
	if opts.DryRun {
		return res, nil
	}

	writable := snap.Protocol().CheckWrite(snap.Metadata()) == nil
	if writable {
		start := snap.NewTransaction(Operation{Name: "VACUUM START", Parameters: map[string]string{
			"retentionCheckEnabled":    strconv.FormatBool(!opts.Force),
			"specifiedRetentionMillis": strconv.FormatInt(retention.Milliseconds(), 10),
			"defaultRetentionMillis":   strconv.FormatInt(tableRetention.Milliseconds(), 10),
		}})
		start.SetMetrics(map[string]string{
			"numFilesToDelete":   strconv.Itoa(len(res.Files)),
			"sizeOfDataToDelete": strconv.FormatInt(res.Bytes, 10),
		})
		if snap, err = start.Commit(ctx); err != nil {
			return VacuumResult{}, fmt.Errorf("vacuum %s: %w", t.store.URL(), err)
		}
		res.StartVersion = snap.Version()
	}
	var (
		mu      sync.Mutex
		deleted int
	)
	err = parallel(ctx, len(res.Files), func(ctx context.Context, i int) error {
		err := t.store.Delete(ctx, res.Files[i])
		if err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", res.Files[i], err)
		}
		mu.Lock()
		deleted++
		mu.Unlock()
		return nil
	})
	if err != nil {
		return VacuumResult{}, fmt.Errorf("vacuum %s: %w", t.store.URL(), err)
	}
	t.opts.Logger.Info("delta: vacuumed", "table", t.store.URL(), "files", deleted, "bytes", res.Bytes, "cutoff", cutoff)
	if writable {
		end := snap.NewTransaction(Operation{Name: "VACUUM END", Parameters: map[string]string{"status": "COMPLETED"}})
		end.SetMetrics(map[string]string{"numDeletedFiles": strconv.Itoa(deleted), "numVacuumedDirectories": "0"})
		ended, err := end.Commit(ctx)
		if err != nil {
			return res, fmt.Errorf("vacuum %s: files deleted, but recording VACUUM END failed: %w", t.store.URL(), err)
		}
		res.EndVersion = ended.Version()
	}
	return res, nil
}

// vacuumKeepSet returns the object names the snapshot still references:
// live files and their deletion vectors, and files of tombstones removed
// after cutoffMs.
func (t *Table) vacuumKeepSet(snap *Snapshot, cutoffMs int64) (map[string]bool, error) {
	keep := map[string]bool{}
	addPath := func(p string) error {
		name, ok, err := t.objectName(p)
		if err != nil {
			return err
		}
		if ok {
			keep[name] = true
		}
		return nil
	}
	addDV := func(dv *DeletionVector) error {
		if dv == nil {
			return nil
		}
		p, err := dvStoragePath(*dv)
		if err != nil {
			return err
		}
		if p == "" {
			return nil
		}
		if dv.StorageType == "u" {
			keep[p] = true
			// A DV file found under a prefixed name (see resolveDVFile)
			// is kept too.
			keep[dvKeepKey(p)] = true
			return nil
		}
		return addPath(p)
	}
	for _, a := range snap.st.files {
		if err := addPath(a.Path); err != nil {
			return nil, err
		}
		if err := addDV(a.DeletionVector); err != nil {
			return nil, fmt.Errorf("deletion vector of %s: %w", a.Path, err)
		}
	}
	for _, r := range snap.st.tombstones {
		if r.DeletionTimestamp == nil || *r.DeletionTimestamp <= cutoffMs {
			continue
		}
		if err := addPath(r.Path); err != nil {
			return nil, err
		}
		if err := addDV(r.DeletionVector); err != nil {
			return nil, fmt.Errorf("deletion vector of %s: %w", r.Path, err)
		}
	}
	return keep, nil
}

// dvKeepKey is the key under which vacuum remembers a DV file by its
// directory and "deletion_vector_<uuid>.bin" suffix, whatever prefix the
// writer put before it; "" for names that are not DV files.
func dvKeepKey(name string) string {
	dir, base := path.Split(name)
	i := strings.LastIndex(base, dvFilePrefix)
	if i < 0 || !strings.HasSuffix(base, ".bin") {
		return ""
	}
	return "\x00dv:" + dir + base[i:]
}

// dvStoragePath is the single call site of DeletionVector.StoragePath.
func dvStoragePath(dv DeletionVector) (string, error) { return dv.StoragePath() }

// objectName maps a log path (URI-encoded, relative or absolute) to a store
// object name; ok is false for absolute paths outside the table root,
// which vacuum never lists anyway.
func (t *Table) objectName(p string) (string, bool, error) {
	root := strings.TrimSuffix(t.store.URL(), "/") + "/"
	if u, err := url.Parse(p); err == nil && (u.IsAbs() || strings.HasPrefix(p, "/")) {
		abs := p
		if u.Scheme == "file" {
			abs = u.Path
		}
		if dec, err := url.PathUnescape(abs); err == nil {
			abs = dec
		}
		if rel, ok := strings.CutPrefix(abs, root); ok {
			return rel, true, nil
		}
		if rel, ok := strings.CutPrefix(p, root); ok {
			return rel, true, nil
		}
		return "", false, nil
	}
	name, err := url.PathUnescape(p)
	if err != nil {
		return "", false, fmt.Errorf("path %q: %w", p, err)
	}
	return name, true, nil
}

// hiddenFromVacuum reports whether vacuum must not consider name: the log,
// and any path with a segment starting with '_' or '.', except partition
// directories ("col=value") and _change_data / _delta_index.
func hiddenFromVacuum(name string) bool {
	if strings.HasPrefix(name, logDir) {
		return true
	}
	segs := strings.Split(name, "/")
	for i, s := range segs {
		if !strings.HasPrefix(s, "_") && !strings.HasPrefix(s, ".") {
			continue
		}
		isDir := i < len(segs)-1
		if isDir && (strings.Contains(s, "=") || s == "_change_data" || s == "_delta_index") {
			continue
		}
		return true
	}
	return false
}
