package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Source is one Datastream stream's output: the table folders below Prefix
// in a bucket.
type Source struct {
	// Store is the bucket; names are relative to its root.
	Store objstore.Store
	// Bucket is the bucket's name in file ids and notifications ("" for
	// the embedded run's source folder).
	Bucket string
	// Prefix is the stream's path prefix in the bucket, "" for its root.
	Prefix string
}

// dir is the source's prefix as a listing prefix: "" or ending in '/'.
func (s Source) dir() string {
	if p := strings.Trim(s.Prefix, "/"); p != "" {
		return p + "/"
	}
	return ""
}

// key names the watermark of a folder of the source ("" for the source
// itself).
func (s Source) key(folder string) string {
	return strings.TrimSuffix(s.Store.URL(), "/") + "/" + s.dir() + folder
}

// Streams returns the stream roots to reconcile in root: root itself and
// every source the configuration maps (sources) below root's prefix in its
// bucket. A folder of root that holds a configured stream is then no table
// folder of root's, and Reconcile leaves it to that stream.
func (p *Pipeline) Streams(root Source) []Source {
	out := []Source{root}
	for _, cs := range p.Config.Sources {
		prefix := strings.Trim(cs.Prefix, "/")
		if (cs.Bucket != "" && cs.Bucket != root.Bucket) || prefix == "" || !strings.HasPrefix(prefix+"/", root.dir()) || prefix+"/" == root.dir() {
			continue
		}
		out = append(out, Source{Store: root.Store, Bucket: root.Bucket, Prefix: prefix})
	}
	return out
}

// holdsStream reports whether folder of src is, or holds, another of the
// tick's sources.
func (t *reconcileTick) holdsStream(src Source, folder string) bool {
	dir := src.dir() + folder + "/"
	return slices.ContainsFunc(t.o.Sources, func(o Source) bool {
		return o.Store == src.Store && o.Bucket == src.Bucket && strings.HasPrefix(o.dir(), dir)
	})
}

// Announcer hands files found by the reconcile to staging: in the cloud,
// by publishing each one's notification for onfile instances to stage in
// parallel; in the embedded run, by staging them in-process.
type Announcer interface {
	Announce(ctx context.Context, files []datastream.SourceFile) error
}

// AnnounceFunc is an Announcer that is a function.
type AnnounceFunc func(ctx context.Context, files []datastream.SourceFile) error

// Announce calls f.
func (f AnnounceFunc) Announce(ctx context.Context, files []datastream.SourceFile) error {
	return f(ctx, files)
}

// ReconcileOptions configure a Reconcile tick. Grace, lookback, since and
// the tick's bounds come from the configuration (reconcile_*).
type ReconcileOptions struct {
	Sources []Source
	// Announce hands the files found to staging; nil stages them here, one
	// at a time, within Budget.
	Announce Announcer
	// Embedded is for a source that sends no notifications and whose
	// objects' times cannot be trusted (a local folder, where a copy keeps
	// a file's old modification time): every folder is listed whole and
	// every object looked up, each tick, and what the registry does not
	// know is handed over at once, with no grace period.
	Embedded bool
	// DryRun finds without handing anything over or storing progress:
	// what status reports.
	DryRun bool
	// Budget bounds the tick's time (0: none); the folders not reached
	// wait for the next tick, which begins with them.
	Budget time.Duration
}

// FolderReconcile is what a tick found in one table folder.
type FolderReconcile struct {
	Source Source
	Folder string
	// Table is the table id of the folder's files, once known.
	Table string
	// Listed counts the objects listed, Ignored those that are no data
	// files (by name), Looked those looked up.
	Listed, Ignored, Looked int
	// Unregistered are the holes past the grace period: objects the
	// registry does not know although their notification had time to
	// arrive. OldestUnregistered is the creation time of the oldest.
	Unregistered       int
	OldestUnregistered time.Time
	// Announced are the files handed to staging by this tick.
	Announced []datastream.SourceFile
	// Complete is false when the tick's bounds stopped the listing.
	Complete bool
}

// ReconcileResult is what a Reconcile tick did.
type ReconcileResult struct {
	Folders []FolderReconcile
	// Listed, Ignored and Looked add up the folders'; Announced counts the
	// files handed to staging.
	Listed, Ignored, Looked, Announced int
	// Complete is false when the tick's bounds left folders or objects for
	// the next tick.
	Complete bool
}

// lookupBatch is how many objects a look-up asks the registry about at
// once: the backends split it further (Firestore reads 300 documents a
// call), and the local backend answers many ids by listing its records
// once, so fewer, larger look-ups cost it less (the bench's reconcile
// scenario: 2 minutes for a first pass over 100k objects in look-ups of
// 300).
const lookupBatch = 5000

// clockSkew allows for the store's clock against this process's in the
// creation-time rule (watermark.knownSince).
const clockSkew = 5 * time.Minute

// Reconcile is a tick of the reconcile: in every table folder of every
// source it lists the objects from the folder's watermark, looks up those
// the registry may not know, and hands those it does not know and that are
// older than the grace period to staging, at most reconcile_max_files
// files and reconcile_max_listed listed objects in a tick, with progress
// kept in the watermarks (see watermark.go). Data files are chosen by
// name as Stage chooses them. A folder's failure does not stop the
// others; the errors are returned together.
func (p *Pipeline) Reconcile(ctx context.Context, o ReconcileOptions) (ReconcileResult, error) {
	res := ReconcileResult{Complete: true}
	// Microseconds: the precision the watermark keeps times in.
	t := &reconcileTick{p: p, o: o, now: p.now().Truncate(time.Microsecond), res: &res,
		maxFiles: p.Config.MaxReconcileFiles(), maxListed: p.Config.MaxReconcileListed()}
	if o.Budget > 0 {
		t.deadline = t.now.Add(o.Budget)
	}
	var errs []error
	for _, src := range o.Sources {
		if err := t.source(ctx, src); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range res.Folders {
		res.Listed += f.Listed
		res.Ignored += f.Ignored
		res.Looked += f.Looked
		res.Announced += len(f.Announced)
	}
	if !o.DryRun && !o.Embedded {
		p.log().Info("reconcile done", "event", "reconcile_done", "folders", len(res.Folders), "listed", res.Listed,
			"looked_up", res.Looked, "dispatched", res.Announced, "unregistered", res.unregistered(), "complete", res.Complete, "errors", len(errs))
	}
	return res, errors.Join(errs...)
}

func (r *ReconcileResult) unregistered() int {
	n := 0
	for _, f := range r.Folders {
		n += f.Unregistered
	}
	return n
}

// reconcileTick is one Reconcile call's state.
type reconcileTick struct {
	p                   *Pipeline
	o                   ReconcileOptions
	now, deadline       time.Time
	res                 *ReconcileResult
	maxFiles, maxListed int
	listed, announced   int
}

// grace is how old an unknown object must be to be handed over.
func (t *reconcileTick) grace() time.Duration {
	if t.o.Embedded {
		return 0
	}
	return t.p.Config.Grace()
}

// spent reports whether the tick's bounds are reached.
func (t *reconcileTick) spent() bool {
	return t.listed >= t.maxListed || t.announced >= t.maxFiles ||
		(!t.deadline.IsZero() && !t.p.now().Before(t.deadline))
}

// rotation is the source-level watermark: the folder the next tick begins
// with, so that a tick stopped by its bounds does not leave the same
// folders behind every time.
type rotation struct {
	Next string `json:"next,omitempty"`
}

// source reconciles the table folders of one source, beginning with the
// folder where the last tick stopped.
func (t *reconcileTick) source(ctx context.Context, src Source) error {
	var folders []string
	var rootFiles []objstore.Info
	rootIgnored := 0
	err := objstore.Entries(ctx, src.Store, src.dir(), func(name string, folder bool, info objstore.Info) error {
		if folder {
			if !t.holdsStream(src, name) {
				folders = append(folders, name)
			}
		} else if t.candidate(info) {
			rootFiles = append(rootFiles, info)
		} else {
			rootIgnored++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reconcile %s: list its folders: %w", src.key(""), err)
	}
	var rot rotation
	rotRev, err := t.load(ctx, src.key(""), &rot)
	if err != nil {
		return err
	}
	first, _ := slices.BinarySearch(folders, rot.Next)
	order := append(slices.Clone(folders[first:]), folders[:first]...)
	var errs []error
	next := ""
	for _, folder := range order {
		if t.spent() {
			next = folder
			t.res.Complete = false
			break
		}
		if err := t.folder(ctx, src, folder); err != nil {
			errs = append(errs, err)
		}
	}
	if len(rootFiles)+rootIgnored > 0 && !t.spent() {
		// Objects beside the table folders belong to no folder: they are
		// looked up every tick.
		if err := t.rootFiles(ctx, src, rootFiles, rootIgnored); err != nil {
			errs = append(errs, err)
		}
	}
	if !t.o.DryRun && next != rot.Next {
		if err := t.store(ctx, src.key(""), rotation{Next: next}, rotRev); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// load reads the watermark document of key into v, and its revision.
func (t *reconcileTick) load(ctx context.Context, key string, v any) (int64, error) {
	data, rev, err := t.p.Watermarks.Watermark(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("reconcile %s: read its watermark: %w", key, err)
	}
	if data != nil {
		if err := json.Unmarshal(data, v); err != nil {
			// A document this release cannot read is started again: a
			// pass from the folder's start costs look-ups, never files.
			t.p.log().Warn("unreadable watermark; listing the folder again", "key", key, "error", err)
		}
	}
	return rev, nil
}

// store writes the watermark document of key, unless another tick stored
// one meanwhile: that tick's progress stands, and this one's files were
// handed over all the same (staging them twice is harmless).
func (t *reconcileTick) store(ctx context.Context, key string, v any, rev int64) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := t.p.Watermarks.PutWatermark(ctx, key, data, rev); err != nil {
		if errors.Is(err, coord.ErrConflict) {
			t.p.log().Info("watermark stored by another tick meanwhile", "key", key)
			return nil
		}
		return fmt.Errorf("reconcile %s: store its watermark: %w", key, err)
	}
	return nil
}

// candidate reports whether an object is a data file Stage would read.
func (t *reconcileTick) candidate(info objstore.Info) bool {
	f := datastream.SourceFile{Name: info.Name, Size: info.Size}
	_, skip := datastream.Skip(f)
	return !skip && t.p.Config.IsDataFile(info.Name)
}

// id is the registry's id of the object of the source named name
// (relative to the source's prefix).
func (src Source) id(name string, generation int64) string {
	return coord.FileID(src.Bucket, src.dir()+name, generation)
}

// learnTable notes the folder's table from a registered file of it.
func (w *watermark) learnTable(rec coord.FileRecord) {
	if w.Table == "" && rec.Table != UnknownTable {
		w.Table = rec.Table
	}
}

// folder runs one tick's pass through a table folder.
func (t *reconcileTick) folder(ctx context.Context, src Source, folder string) error {
	key := src.key(folder)
	w := watermark{Folder: folder}
	rev, err := t.load(ctx, key, &w)
	if err != nil {
		return err
	}
	w.Folder = folder
	lookback := t.p.Config.Lookback()
	fr := FolderReconcile{Source: src, Folder: folder, Table: w.Table}
	from := w.Resume
	if from == "" {
		w.PassStart = t.now
		from = w.startName(t.p.Config.ReconcileSince)
	}
	// Holes the registry knows by now make room before the listing, which
	// stops at maxHoles.
	if err := t.recheckHoles(ctx, src, &w, &fr); err != nil {
		return err
	}
	store := objstore.Sub(src.Store, strings.TrimSuffix(src.dir(), "/"))
	var pending []objstore.Info // to look up
	lookup := func() error {
		if err := t.lookUp(ctx, src, &w, &fr, pending); err != nil {
			return err
		}
		pending = pending[:0]
		return nil
	}
	errStop := errors.New("stop")
	listErr := store.List(ctx, folder+"/", from, func(info objstore.Info) error {
		if t.spent() || len(w.Holes) >= maxHoles {
			w.Resume = info.Name
			return errStop
		}
		t.listed++
		fr.Listed++
		if !t.candidate(info) {
			fr.Ignored++
			return nil
		}
		if ft, ok := folderTime(folder, info.Name); ok {
			w.sawTime(ft, info.Updated, t.now, lookback)
		}
		if i := w.hole(info.Name); i >= 0 {
			w.Holes[i].Pass = unixTime{w.PassStart}
			return nil // looked up with the holes
		}
		if !t.o.Embedded && w.knownSince(info.Updated, clockSkew) {
			return nil
		}
		pending = append(pending, info)
		// Each of them may become a hole: the look-up comes before the
		// holes could pass maxHoles.
		if len(pending) >= lookupBatch || len(w.Holes)+len(pending) >= maxHoles {
			return lookup()
		}
		return nil
	})
	if listErr != nil && !errors.Is(listErr, errStop) {
		return fmt.Errorf("reconcile %s: list: %w", key, listErr)
	}
	if err := lookup(); err != nil {
		return err
	}
	fr.Complete = listErr == nil
	if !fr.Complete {
		t.res.Complete = false
	}
	if err := t.handOver(ctx, src, &w, &fr); err != nil {
		return err
	}
	if fr.Complete {
		w.completePass(t.now, lookback, t.o.Embedded)
	}
	fr.Table = w.Table
	t.res.Folders = append(t.res.Folders, fr)
	if t.o.DryRun {
		return nil
	}
	return t.store(ctx, key, &w, rev)
}

// lookUp asks the registry about listed objects: the known ones name the
// folder's table, the others become holes.
func (t *reconcileTick) lookUp(ctx context.Context, src Source, w *watermark, fr *FolderReconcile, infos []objstore.Info) error {
	if len(infos) == 0 {
		return nil
	}
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = src.id(info.Name, info.Generation)
	}
	known, err := t.p.Registry.Files(ctx, ids)
	if err != nil {
		return fmt.Errorf("reconcile %s: look up %d files: %w", src.key(w.Folder), len(ids), err)
	}
	fr.Looked += len(ids)
	retention := t.p.registryRetention()
	for i, info := range infos {
		if rec, ok := known[ids[i]]; ok {
			w.learnTable(rec)
			continue
		}
		// A file older than the registry keeps records, seen after the
		// first pass, is one whose record expired: merged long ago.
		if !t.o.Embedded && !w.Covered.IsZero() && info.Updated.Before(t.now.Add(-retention)) {
			continue
		}
		w.Holes = append(w.Holes, hole{Name: info.Name, Generation: info.Generation, Size: info.Size,
			Created: unixTime{info.Updated}, Next: unixTime{info.Updated.Add(t.grace())}, Pass: unixTime{w.PassStart}, fresh: true})
	}
	return nil
}

// recheckHoles looks the holes up again and forgets those the registry
// knows now; those found by this tick were looked up a moment ago.
func (t *reconcileTick) recheckHoles(ctx context.Context, src Source, w *watermark, fr *FolderReconcile) error {
	ids := make([]string, len(w.Holes))
	var asked []string
	for i, h := range w.Holes {
		ids[i] = src.id(h.Name, h.Generation)
		if !h.fresh {
			asked = append(asked, ids[i])
		}
	}
	known, err := t.p.Registry.Files(ctx, asked)
	if err != nil {
		return fmt.Errorf("reconcile %s: look up %d unregistered files: %w", src.key(w.Folder), len(asked), err)
	}
	fr.Looked += len(asked)
	kept := w.Holes[:0]
	for i, h := range w.Holes {
		if rec, ok := known[ids[i]]; ok {
			w.learnTable(rec)
			continue
		}
		kept = append(kept, h)
	}
	w.Holes = kept
	return nil
}

// handOver hands over the holes whose time has come, oldest first, within
// the tick's bound of files, and counts those past the grace period.
func (t *reconcileTick) handOver(ctx context.Context, src Source, w *watermark, fr *FolderReconcile) error {
	grace := t.grace()
	slices.SortFunc(w.Holes, func(a, b hole) int { return cmp.Or(a.Created.Compare(b.Created.Time), strings.Compare(a.Name, b.Name)) })
	var due []datastream.SourceFile
	for i := range w.Holes {
		h := &w.Holes[i]
		if !h.Created.After(t.now.Add(-grace)) {
			fr.Unregistered++
			if fr.OldestUnregistered.IsZero() {
				fr.OldestUnregistered = h.Created.Time
			}
		}
		if h.Next.After(t.now) || t.announced >= t.maxFiles {
			continue
		}
		due = append(due, datastream.SourceFile{Bucket: src.Bucket, Name: src.dir() + h.Name, Generation: h.Generation,
			Size: h.Size, EventType: "OBJECT_FINALIZE", Created: h.Created.Time})
		h.Tries++
		h.Next = unixTime{t.now.Add(retryDelay(grace, h.Tries))}
		t.announced++
	}
	if len(due) == 0 || t.o.DryRun {
		return nil
	}
	for _, f := range due {
		if t.o.Embedded {
			break // no notification was to be had: nothing to warn of
		}
		t.p.log().Warn("file found by reconcile: its notification never arrived", "event", "file_reconciled",
			"table_folder", w.Folder, "table", w.Table, "bucket", f.Bucket, "file", f.Name, "generation", f.Generation,
			"age_seconds", int64(t.now.Sub(f.Created).Seconds()))
	}
	if err := t.announce(ctx, due); err != nil {
		return fmt.Errorf("reconcile %s: hand %d files to staging: %w", src.key(w.Folder), len(due), err)
	}
	fr.Announced = due
	return nil
}

// announce hands files to staging: to the Announcer, or to Stage here.
func (t *reconcileTick) announce(ctx context.Context, files []datastream.SourceFile) error {
	if t.o.Announce != nil {
		return t.o.Announce.Announce(ctx, files)
	}
	for _, f := range files {
		if !t.deadline.IsZero() && !t.p.now().Before(t.deadline) {
			return nil // the holes are handed over again later
		}
		if _, err := t.p.Stage(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// rootFiles looks up the data files that lie beside a source's table
// folders, as the embedded run's source may have them, and hands the
// unknown ones over: they have no watermark, and are looked up every tick.
func (t *reconcileTick) rootFiles(ctx context.Context, src Source, infos []objstore.Info, ignored int) error {
	w := watermark{PassStart: t.now}
	fr := FolderReconcile{Source: src, Listed: len(infos) + ignored, Ignored: ignored, Complete: true}
	for chunk := range slices.Chunk(infos, lookupBatch) {
		if err := t.lookUp(ctx, src, &w, &fr, chunk); err != nil {
			return err
		}
	}
	if err := t.handOver(ctx, src, &w, &fr); err != nil {
		return err
	}
	t.res.Folders = append(t.res.Folders, fr)
	return nil
}
