package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// The maintenance verbs run by hand what scheduled maintenance runs
// (pipeline.Maintain), with its functions and its optimistic rules, on one
// Delta table of any writer: no lease is taken, so they are safe beside a
// running merge for the reasons Maintain's doc gives.

// verbUsage sets the usage of a maintenance verb: its synopsis, what it
// does, then its flags.
func verbUsage(fs *flag.FlagSet, text string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags] TABLE\n%s\n", fs.Name(), text)
		fs.PrintDefaults()
	}
}

// verbTable parses a maintenance verb's arguments, checks its flags'
// values (check; nil: none) and opens its TABLE; the caller closes the
// store. A refused flag is told before the table is read.
func verbTable(ctx context.Context, fs *flag.FlagSet, args []string, check func() error) (string, objstore.Store, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", nil, err
	}
	url, err := tableArg(fs, pos, strings.TrimPrefix(fs.Name(), "dsdelta "))
	if err != nil {
		return "", nil, err
	}
	if check != nil {
		if err := check(); err != nil {
			return "", nil, err
		}
	}
	_, store, err := openTable(ctx, url)
	if err != nil {
		return "", nil, err
	}
	return url, store, nil
}

// retryLogger says on stderr when a verb lost a race to a concurrent
// commit and tried again.
func retryLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// optimistic reads the table in store, refuses it when dsdelta cannot
// write it, and runs op, an optimistic rewrite of it, by maintenance's
// rule (pipeline.Optimistically): a loss to a concurrent commit is tried
// again once, and a second loss is an error wrapping delta.ErrConflict.
// It returns the snapshot read first.
func optimistic(ctx context.Context, store objstore.Store, url, verb string, logger *slog.Logger, op func(context.Context) error) (*delta.Snapshot, error) {
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if err := refuseUnwritable(url, verb, snap); err != nil {
		return nil, err
	}
	lost, err := pipeline.Optimistically(ctx, logger, store, op)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", url, verb, err)
	}
	if lost {
		return nil, fmt.Errorf("%s: %s lost the race to concurrent commits twice (other writers changed the files it read); nothing was committed, run it again later: %w", url, verb, delta.ErrConflict)
	}
	return snap, nil
}

// refuseUnwritable names why dsdelta may not write the table of snap; nil
// when it may.
func refuseUnwritable(url, verb string, snap *delta.Snapshot) error {
	if err := snap.Protocol().CheckWrite(snap.Metadata()); err != nil {
		return fmt.Errorf("%s: refused: dsdelta cannot %s this table safely: %w", url, verb, err)
	}
	return nil
}

// sizeOf is a snapshot's files and bytes, as the verbs print them.
func sizeOf(snap *delta.Snapshot) string {
	return fmt.Sprintf("%d files, %d bytes", snap.NumFiles(), snap.SizeBytes())
}

// printCommitted prints the table before and after the commit of version
// v, read back from the log: a merge that committed meanwhile is in both.
func printCommitted(ctx context.Context, w io.Writer, store objstore.Store, v int64) error {
	tab := delta.Open(store)
	before, err := tab.SnapshotAt(ctx, v-1)
	if err != nil {
		return fmt.Errorf("read version %d back: %w", v-1, err)
	}
	after, err := tab.SnapshotAt(ctx, v)
	if err != nil {
		return fmt.Errorf("read version %d back: %w", v, err)
	}
	fmt.Fprintf(w, "  before: version %d, %s\n  after:  version %d, %s\n", before.Version(), sizeOf(before), after.Version(), sizeOf(after))
	return nil
}

func cmdOptimize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("optimize", stderr)
	target := fs.Int64("target-file-bytes", config.DefaultTargetFileBytes, "size of the files written; files under a quarter of it are compacted (give a dsdelta table its target_file_bytes)")
	maxDeleted := fs.Float64("max-deleted-share", delta.DefaultMaxDeletedShare, "rewrite a file whose deletion vector marks more than this share of its rows (give a dsdelta table its deletion_vector_max_deleted_share; 1: never for its vector alone)")
	maxBytes := fs.Int64("max-bytes", 0, "rewrite at most this many bytes of files, small files first, then the most-deleted ones, and leave the rest for another run (give a dsdelta table its compaction_max_bytes); 0: no cap")
	dryRun := fs.Bool("dry-run", false, "print what would be rewritten, and write nothing")
	verbUsage(fs, "Bin-packs the small files of the Delta table TABLE (and clusters a dsdelta\n"+
		"current-state table by key), and folds deletion vectors, as scheduled\n"+
		"compaction does. Committed optimistically: a merge that commits meanwhile\n"+
		"wins, and the optimize tries once more from a fresh snapshot.")
	url, store, err := verbTable(ctx, fs, args, func() error {
		if *target <= 0 {
			return fmt.Errorf("%w: --target-file-bytes must be positive", errUsage)
		}
		if !(*maxDeleted > 0 && *maxDeleted <= 1) {
			return fmt.Errorf("%w: --max-deleted-share must be above 0 and at most 1", errUsage)
		}
		if *maxBytes < 0 {
			return fmt.Errorf("%w: --max-bytes must not be negative (0: no cap)", errUsage)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer store.Close()
	return optimizeTable(ctx, store, url, pipeline.CompactOptions{TargetFileBytes: *target, MaxDeletedShare: *maxDeleted, MaxBytes: *maxBytes, DryRun: *dryRun}, stdout, retryLogger(stderr))
}

// optimizeTable compacts the table in store as maintenance does
// (pipeline.Compact, retried by pipeline.Optimistically) and prints what
// it did.
func optimizeTable(ctx context.Context, store objstore.Store, url string, opts pipeline.CompactOptions, w io.Writer, logger *slog.Logger) error {
	var r delta.OptimizeResult
	snap, err := optimistic(ctx, store, url, "optimize", logger, func(ctx context.Context) error {
		var err error
		r, err = pipeline.Compact(ctx, store, opts)
		return err
	})
	if err != nil {
		return err
	}
	folded := ""
	if r.DeletionVectorsPurged > 0 {
		folded = fmt.Sprintf(", folding %d deletion vectors (%d rows purged)", r.DeletionVectorsPurged, r.RowsPurged)
	}
	if r.FilesLeft > 0 {
		folded += fmt.Sprintf("; %d files (%d bytes) left for another run by --max-bytes", r.FilesLeft, r.BytesLeft)
	}
	switch {
	case r.FilesRemoved == 0:
		fmt.Fprintf(w, "%s: nothing to optimize at version %d (%s): no small files, no deletion vector to fold\n", url, snap.Version(), sizeOf(snap))
		return nil
	case opts.DryRun:
		fmt.Fprintf(w, "%s: would rewrite %d files (%d bytes) into files of about %d bytes%s (dry run, version %d: %s)\n",
			url, r.FilesRemoved, r.BytesRemoved, opts.TargetFileBytes, folded, snap.Version(), sizeOf(snap))
		return nil
	}
	fmt.Fprintf(w, "%s: optimized in version %d: %d files (%d bytes) rewritten into %d files (%d bytes)%s\n",
		url, r.Version, r.FilesRemoved, r.BytesRemoved, r.FilesAdded, r.BytesAdded, folded)
	return printCommitted(ctx, w, store, r.Version)
}

func cmdVacuum(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("vacuum", stderr)
	retain := fs.String("retain", "", "keep the files removed less than this long ago (168h, 7d); default: the table's delta.deletedFileRetentionDuration (7 days unless set)")
	force := fs.Bool("force", false, "allow a --retain below the table's delta.deletedFileRetentionDuration; readers of older versions, and merges writing meanwhile, may then lose files they need")
	dryRun := fs.Bool("dry-run", false, "list the files that would be deleted, and delete nothing")
	verbUsage(fs, "Deletes the files of the Delta table TABLE that no version within the\n"+
		"retention references, as scheduled maintenance and Spark's VACUUM do. Files\n"+
		"written within the retention are kept, so a merge writing meanwhile loses\n"+
		"nothing. A --retain below the table's retention is refused unless --force.")
	var opts delta.VacuumOptions
	url, store, err := verbTable(ctx, fs, args, func() error {
		if *retain == "" {
			return nil
		}
		d, err := config.ParseDuration(*retain)
		if err != nil || d <= 0 {
			return fmt.Errorf("%w: --retain %q: want a positive duration such as 168h or 7d", errUsage, *retain)
		}
		opts.Retention = d
		return nil
	})
	if err != nil {
		return err
	}
	defer store.Close()
	opts.Force, opts.DryRun = *force, *dryRun
	return vacuumTable(ctx, store, url, opts, stdout)
}

// vacuumTable vacuums the table in store (delta.Table.Vacuum, which checks
// the protocol and the retention) and prints what it did.
func vacuumTable(ctx context.Context, store objstore.Store, url string, opts delta.VacuumOptions, w io.Writer) error {
	r, err := delta.Open(store).Vacuum(ctx, opts)
	if errors.Is(err, delta.ErrRetentionTooShort) {
		return configError{fmt.Errorf("%w (--force overrides)", err)}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	before := fmt.Sprintf("%d files, %d bytes", r.KeptFiles+len(r.Files), r.KeptBytes+r.Bytes)
	after := fmt.Sprintf("%d files, %d bytes", r.KeptFiles, r.KeptBytes)
	cutoff := fmt.Sprintf("unreferenced since before %s (retention %s)", r.Cutoff.UTC().Format(time.RFC3339), r.Retention)
	if opts.DryRun {
		fmt.Fprintf(w, "%s: would delete %d files (%d bytes) %s; data files %s → %s (dry run)\n", url, len(r.Files), r.Bytes, cutoff, before, after)
		for _, f := range r.Files {
			fmt.Fprintf(w, "  %s\n", f)
		}
		return nil
	}
	fmt.Fprintf(w, "%s: deleted %d files (%d bytes) %s\n  data files: %s → %s\n", url, len(r.Files), r.Bytes, cutoff, before, after)
	if r.StartVersion > 0 {
		fmt.Fprintf(w, "  committed: version %d (VACUUM START), version %d (VACUUM END)\n", r.StartVersion, r.EndVersion)
	} else {
		fmt.Fprintln(w, "  committed: nothing (dsdelta does not write this table's log; the files were deleted as its protocol allows)")
	}
	return nil
}

func cmdCheckpoint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("checkpoint", stderr)
	dryRun := fs.Bool("dry-run", false, "say which version would be checkpointed, and write nothing")
	verbUsage(fs, "Writes a checkpoint of the Delta table TABLE at its latest version, so\n"+
		"that readers replay no commit before it. A checkpoint describes a version\n"+
		"already committed: a merge committing meanwhile is unaffected.")
	url, store, err := verbTable(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	return checkpointTable(ctx, store, url, *dryRun, stdout)
}

// checkpointTable writes the checkpoint of the latest version of the
// table in store, as maintenance does, and prints it.
func checkpointTable(ctx context.Context, store objstore.Store, url string, dryRun bool, w io.Writer) error {
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if err := refuseUnwritable(url, "checkpoint", snap); err != nil {
		return err
	}
	v, prev := snap.Version(), snap.CheckpointVersion()
	last := "none"
	if prev >= 0 {
		last = fmt.Sprint(prev)
	}
	switch {
	case prev == v:
		fmt.Fprintf(w, "%s: version %d has a checkpoint already; nothing to write\n", url, v)
		return nil
	case dryRun:
		fmt.Fprintf(w, "%s: would write the checkpoint of version %d (%s; latest checkpoint: %s; commits replayed on open: %d → 0) (dry run)\n",
			url, v, sizeOf(snap), last, v-prev)
		return nil
	}
	if err := snap.WriteCheckpoint(ctx); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	fmt.Fprintf(w, "%s: wrote the checkpoint of version %d (%s; previous checkpoint: %s; commits replayed on open: %d → 0)\n",
		url, v, sizeOf(snap), last, v-prev)
	return nil
}

func cmdExpireTombstones(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("expire-tombstones", stderr)
	retain := fs.String("retain", "7d", "keep the tombstones of deletes more recent than this (168h, 7d): give the table's tombstone_retention")
	target := fs.Int64("target-file-bytes", config.DefaultTargetFileBytes, "size of the files written (give the table's target_file_bytes)")
	dryRun := fs.Bool("dry-run", false, "count the tombstones that would expire, and write nothing")
	verbUsage(fs, "Removes the tombstones older than --retain from a dsdelta tombstone table\n"+
		"(TABLE_tombstones; TABLE, a current-state table, stands for its tombstones)\n"+
		"and merges its small files, as scheduled maintenance does. An event older\n"+
		"than an expired delete can then bring its key back: the retention must\n"+
		"exceed how late events arrive.")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "expire-tombstones")
	if err != nil {
		return err
	}
	d, err := config.ParseDuration(*retain)
	if err != nil || d <= 0 {
		return fmt.Errorf("%w: --retain %q: want a positive duration such as 168h or 7d", errUsage, *retain)
	}
	if *target <= 0 {
		return fmt.Errorf("%w: --target-file-bytes must be positive", errUsage)
	}
	url, store, err := tombstonesOf(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	return expireTable(ctx, store, url, cdc.ExpireOptions{Retention: d, TargetFileBytes: *target, DryRun: *dryRun}, stdout, retryLogger(stderr))
}

// tombstonesOf opens the tombstone table url names: url itself, or the
// tombstones of the current-state table at url. Any other table is
// refused, naming what it is.
func tombstonesOf(ctx context.Context, url string) (string, objstore.Store, error) {
	_, store, err := openTable(ctx, url)
	if err != nil {
		return "", nil, err
	}
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		store.Close()
		return "", nil, fmt.Errorf("%s: %w", url, err)
	}
	switch role := snap.Configuration()[cdc.PropRole]; role {
	case "tombstones":
		return url, store, nil
	case "state":
		store.Close()
		tabs, closeStores, err := tableSetAt(ctx, url)
		if err != nil {
			return "", nil, err
		}
		// The store outlives the folder it was opened from: closing
		// that folder's store closes the bucket client of both.
		return tabs.Tombstones.URL(), closingStore{tabs.Tombstones, closeStores}, nil
	case "":
		store.Close()
		return "", nil, fmt.Errorf("%s: refused: not a dsdelta table (no %s property); expire-tombstones works on the tombstone tables dsdelta keeps beside its current-state tables", url, cdc.PropRole)
	default:
		store.Close()
		return "", nil, fmt.Errorf("%s: refused: a dsdelta %s table, not a tombstone table; expire-tombstones works on the <table>_tombstones beside a current-state table", url, role)
	}
}

// closingStore is a store whose Close runs close, the closing of the
// store it was made from.
type closingStore struct {
	objstore.Store
	close func()
}

func (s closingStore) Close() error {
	s.close()
	return nil
}

// expireTable expires the tombstones of the table in store as maintenance
// does (cdc.ExpireTombstones, retried by pipeline.Optimistically) and
// prints what it did.
func expireTable(ctx context.Context, store objstore.Store, url string, opts cdc.ExpireOptions, w io.Writer, logger *slog.Logger) error {
	now := time.Now()
	opts.Now = func() time.Time { return now }
	var r cdc.ExpireResult
	snap, err := optimistic(ctx, store, url, "expire tombstones of", logger, func(ctx context.Context) error {
		var err error
		r, err = cdc.ExpireTombstones(ctx, store, opts)
		return err
	})
	if err != nil {
		return err
	}
	cutoff := fmt.Sprintf("deleted before %s (retention %s)", now.Add(-opts.Retention).UTC().Format(time.RFC3339), opts.Retention)
	if opts.DryRun {
		fmt.Fprintf(w, "%s: would expire %d tombstones %s, rewriting %d files and merging %d small files (%d bytes) (dry run, version %d: %s)\n",
			url, r.Expired, cutoff, r.FilesRewritten, r.FilesCompacted, r.BytesRemoved, snap.Version(), sizeOf(snap))
		return nil
	}
	if r.Version == 0 {
		fmt.Fprintf(w, "%s: no tombstone %s, no small files to merge; nothing committed (version %d: %s)\n", url, cutoff, snap.Version(), sizeOf(snap))
		return nil
	}
	fmt.Fprintf(w, "%s: expired %d tombstones %s in version %d (%d superseded dropped); %d files rewritten, %d small files merged, into %d files (%d → %d bytes)\n",
		url, r.Expired, cutoff, r.Version, r.Superseded, r.FilesRewritten, r.FilesCompacted, r.FilesAdded, r.BytesRemoved, r.BytesAdded)
	return printCommitted(ctx, w, store, r.Version)
}

func cmdRepairStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("repair-stats", stderr)
	dryRun := fs.Bool("dry-run", false, "list the files whose statistics would be repaired, and write nothing")
	verbUsage(fs, "Repairs the statistics older dsdelta releases wrote wrong in the Delta\n"+
		"table TABLE: a file whose Parquet footer has unsigned bounds of a decimal\n"+
		"of more than 18 digits is rewritten; a file whose add.stats has float,\n"+
		"double or such decimal bounds that no row of it has (left by a rewrite\n"+
		"that dropped rows) is added again with the bounds of its rows, its data\n"+
		"untouched. Files of other writers are left alone; a clean table gets no\n"+
		"commit. Committed optimistically, as optimize is.")
	url, store, err := verbTable(ctx, fs, args, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	return repairTable(ctx, store, url, *dryRun, stdout, retryLogger(stderr))
}

// repairTable repairs the statistics of the table in store
// (pipeline.RepairStats, retried by pipeline.Optimistically) and prints
// what it changed.
func repairTable(ctx context.Context, store objstore.Store, url string, dryRun bool, w io.Writer, logger *slog.Logger) error {
	var r delta.RepairStatsResult
	snap, err := optimistic(ctx, store, url, "repair the statistics of", logger, func(ctx context.Context) error {
		var err error
		r, err = pipeline.RepairStats(ctx, store, dryRun)
		return err
	})
	if err != nil {
		return err
	}
	found := fmt.Sprintf("%d files with unsigned wide-decimal footer bounds (%d bytes), %d files with bounds no row has",
		len(r.Rewritten), r.BytesRemoved, len(r.Restated))
	switch {
	case len(r.Rewritten)+len(r.Restated) == 0:
		fmt.Fprintf(w, "%s: statistics clean at version %d (%d files written by dsdelta checked; %s); nothing to repair\n", url, snap.Version(), r.FilesChecked, sizeOf(snap))
		return nil
	case dryRun:
		fmt.Fprintf(w, "%s: would repair %s (dry run, version %d: %s)\n", url, found, snap.Version(), sizeOf(snap))
		printRepaired(w, r)
		return nil
	}
	fmt.Fprintf(w, "%s: repaired in version %d: %s; rewritten into %d files (%d bytes), the others' stats restated\n",
		url, r.Version, found, r.FilesAdded, r.BytesAdded)
	printRepaired(w, r)
	return printCommitted(ctx, w, store, r.Version)
}

// printRepaired lists the files a repair rewrote and restated.
func printRepaired(w io.Writer, r delta.RepairStatsResult) {
	for _, p := range r.Rewritten {
		fmt.Fprintf(w, "  rewritten: %s\n", p)
	}
	for _, p := range r.Restated {
		fmt.Fprintf(w, "  restated:  %s\n", p)
	}
}
