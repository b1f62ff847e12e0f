package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

// The local backend keeps JSON documents in an objstore.Store, normally the
// lake, under Root (default "_dsdelta/coord"):
//
//	tables/<table>.json                      TableDoc with the lease: counters, open batch, status
//	files/<table>/<FileID>.json              one FileRecord per source object
//	files/<table>/<FileID>.skipped.json      the FileRecord of a skipped source object
//	pending/<table>/<arrival:020d>_<FileID>  empty marker per staged file, listed in arrival order
//	batches/<table>/<seq:020d>.json          batch records
//	watermarks/<WatermarkID>.json            WatermarkDoc, opaque to the coordinator
//
// There are no multi-object transactions, so every change is a sequence of
// single-object compare-and-swap writes (put-if-absent, or IfGenerationMatch
// on the generation read) ordered so that a crash between any two leaves
// a state the next call repairs or ignores:
//
//   - The lease lives in the table document: checking the fencing token and
//     opening or closing a batch are one compare-and-swap, as atomic as the
//     Firestore transaction.
//   - Forming a batch commits by writing the open batch (seq and file ids)
//     into the table document; marking the files batched and deleting their
//     markers follow, and NextBatch redoes them when it resumes the batch.
//   - Completing a batch marks the files merged first and then closes the
//     batch in the table document, so a closed batch never has unmerged
//     files; a crash in between leaves the batch open and it is resumed.
//   - Registration writes the pending marker before the file record; a
//     marker whose record is missing or says otherwise is ignored and
//     eventually deleted. The file record's put-if-absent decides which of
//     concurrent deliveries created the file.
//
// The lease records the holder's Process. An Acquire that finds a live
// lease of another holder on this host whose process is gone frees it in
// the same compare-and-swap that takes it, so of several processes taking
// over at once one wins, and the others find the winner alive.
//
// A skipped record is the only one that both expires and may change (a
// registration stages the file again), and the store has no conditional
// delete: Expire could delete a record that a registration had just
// rewritten. So skipped records live apart, are written once (put-if-absent)
// and never rewritten; RegisterFile and Quarantine look only at the
// <FileID>.json record and create it, and readers prefer it to a skipped
// record of the same file. Skip creates the table document when there is
// none, so that the table is found (File, Files, Expire), but assigns no
// arrival number: the table has no status until a file is staged.
//
// Counts of pending and quarantined files are computed from the records
// rather than kept as counters that a crash could skew. Two registrations
// racing in different processes may become visible out of arrival order;
// batches still take files in arrival order among those visible, and the
// merge's ordering keys make the order of batches irrelevant to the result.

// LocalOptions configures NewLocal.
type LocalOptions struct {
	// Root is the prefix of the coordination documents in the store;
	// "_dsdelta/coord" when empty.
	Root string
	// Now is the clock that judges lease expiry; time.Now when nil.
	Now func() time.Time
	// Retention sets ExpireAt of merged files and done batches;
	// DefaultRetention when zero.
	Retention time.Duration
	// Process is recorded as the holder of the leases this coordinator
	// acquires, and judges whether other holders are gone;
	// CurrentProcess() when zero. Tests set it to play other processes.
	Process Process
	// Logger reports leases taken over; slog.Default() when nil.
	Logger *slog.Logger
}

// Local is the coordination backend over an objstore.Store, safe for several
// processes sharing the store as long as its conditional writes are atomic
// (objstore's local-directory, memory and GCS backends are).
type Local struct {
	store     objstore.Store
	root      string
	now       func() time.Time
	retention time.Duration
	proc      Process
	log       *slog.Logger
}

// NewLocal returns a Local keeping its documents in store.
func NewLocal(store objstore.Store, opts LocalOptions) (*Local, error) {
	if store == nil {
		return nil, errors.New("new local coordinator: nil store")
	}
	l := &Local{store: meter{store}, root: strings.Trim(opts.Root, "/"), now: opts.Now, retention: opts.Retention,
		proc: opts.Process, log: opts.Logger}
	if l.proc == (Process{}) {
		l.proc = CurrentProcess()
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.root == "" {
		l.root = "_dsdelta/coord"
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.retention <= 0 {
		l.retention = DefaultRetention
	}
	return l, nil
}

// maxAttempts bounds compare-and-swap retries; each retry waits a little, so
// this is seconds of continuous contention.
const maxAttempts = 2000

// skippedSuffix ends the name of a skipped record; file ids hold no '.'.
const skippedSuffix = ".skipped.json"

func (l *Local) tableName(tableID string) string { return l.root + "/tables/" + tableID + ".json" }
func (l *Local) filesPrefix() string             { return l.root + "/files/" }
func (l *Local) fileName(tableID, id string) string {
	return l.filesPrefix() + tableID + "/" + id + ".json"
}
func (l *Local) skippedName(tableID, id string) string {
	return l.filesPrefix() + tableID + "/" + id + skippedSuffix
}
func (l *Local) markerPrefix(tableID string) string { return l.root + "/pending/" + tableID + "/" }
func (l *Local) markerName(tableID string, arrival int64, id string) string {
	return fmt.Sprintf("%s%020d_%s", l.markerPrefix(tableID), arrival, id)
}
func (l *Local) batchName(tableID string, seq int64) string {
	return fmt.Sprintf("%s/batches/%s/%020d.json", l.root, tableID, seq)
}
func (l *Local) watermarkName(key string) string {
	return l.root + "/watermarks/" + WatermarkID(key) + ".json"
}

// parseFileName splits the name of a record under files/ into its table and
// file id, and tells whether it is a skipped record; ok is false for
// anything else.
func (l *Local) parseFileName(name string) (tableID, id string, skipped, ok bool) {
	rest, ok := strings.CutPrefix(name, l.filesPrefix())
	if !ok {
		return "", "", false, false
	}
	tableID, base, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(base, "/") {
		return "", "", false, false
	}
	if id, skipped = strings.CutSuffix(base, skippedSuffix); !skipped {
		if id, ok = strings.CutSuffix(base, ".json"); !ok {
			return "", "", false, false
		}
	}
	if ValidFileID(id) != nil {
		return "", "", false, false
	}
	return tableID, id, skipped, true
}

// read decodes the object name into dst and returns its generation, or 0
// when it does not exist. The generation is read before and after the
// content so that the content is known to be that generation's.
func (l *Local) read(ctx context.Context, name string, dst any) (int64, error) {
	opcount.Add(ctx, opcount.FirestoreRead, 1) // see meter
	for range maxAttempts {
		before, err := l.store.Stat(ctx, name)
		if errors.Is(err, objstore.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
		data, err := l.readAll(ctx, name)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // deleted meanwhile; look again
		}
		if err != nil {
			return 0, err
		}
		after, err := l.store.Stat(ctx, name)
		if err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
		if err != nil || after.Generation != before.Generation {
			continue // replaced while we read it
		}
		if err := json.Unmarshal(data, dst); err != nil {
			return 0, fmt.Errorf("decode %s: %w", name, err)
		}
		return before.Generation, nil
	}
	return 0, fmt.Errorf("read %s: changing too fast: %w", name, ErrConflict)
}

func (l *Local) readAll(ctx context.Context, name string) ([]byte, error) {
	r, err := l.store.NewReader(ctx, name, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// write stores v as name if the object's generation is still gen (absent
// when gen is 0); it returns ErrConflict when it is not, which the
// callers of retry retry.
func (l *Local) write(ctx context.Context, name string, v any, gen int64) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	opts := objstore.WriteOptions{ContentType: "application/json"}
	if gen == 0 {
		opts.IfAbsent = true
	} else {
		opts.IfGenerationMatch = gen
	}
	_, err = l.store.Write(ctx, name, bytes.NewReader(data), opts)
	if errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrPrecondition) {
		return fmt.Errorf("write %s: %w", name, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// put stores v as name unconditionally (records nobody updates concurrently).
func (l *Local) put(ctx context.Context, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	if _, err := l.store.Write(ctx, name, bytes.NewReader(data), objstore.WriteOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// remove deletes name; an object already gone is fine.
func (l *Local) remove(ctx context.Context, name string) error {
	if err := l.store.Delete(ctx, name); err != nil && !errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// backoff waits a short random time after a lost compare-and-swap.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.IntN(1+min(attempt, 20))) * 500 * time.Microsecond
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// retry runs fn until it does not return ErrConflict.
func retry(ctx context.Context, fn func() error) error {
	for attempt := range maxAttempts {
		err := fn()
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", maxAttempts, ErrConflict)
}

// updateTable applies fn to the table document and writes it back by
// compare-and-swap, retrying on conflicts. fn must not write anything itself
// (it may run several times); returning an error stops without writing.
func (l *Local) updateTable(ctx context.Context, tableID string, fn func(t *TableDoc, exists bool) error) error {
	name := l.tableName(tableID)
	return retry(ctx, func() error {
		t := TableDoc{Table: tableID}
		gen, err := l.read(ctx, name, &t)
		if err != nil {
			return err
		}
		if err := fn(&t, gen != 0); err != nil {
			return err
		}
		return l.write(ctx, name, &t, gen)
	})
}

// readTable reads a table document; exists is false when there is none.
func (l *Local) readTable(ctx context.Context, tableID string) (t TableDoc, gen int64, err error) {
	t.Table = tableID
	gen, err = l.read(ctx, l.tableName(tableID), &t)
	return t, gen, err
}

// Acquire implements pipeline.Leaser.
func (l *Local) Acquire(ctx context.Context, tableID, holder string, ttl time.Duration) (Lease, error) {
	if err := ValidTableID(tableID); err != nil {
		return Lease{}, err
	}
	if err := ValidAcquire(holder, ttl); err != nil {
		return Lease{}, err
	}
	var out Lease
	var gone LeaseDoc // the lease taken over from a gone process, if any
	err := l.updateTable(ctx, tableID, func(t *TableDoc, _ bool) error {
		cur, now := t.Lease, l.now()
		gone = LeaseDoc{}
		if cur.Live(now) && cur.Holder != holder && cur.Process != nil && cur.Process.goneFrom(l.proc, probeProcess) {
			gone, cur = cur, LeaseDoc{Token: cur.Token}
		}
		next, lease, err := cur.Acquire(tableID, holder, ttl, now)
		if err != nil {
			return err
		}
		next.Process = &l.proc
		t.Lease, out = next, lease
		return nil
	})
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease on %s for %s: %w", tableID, holder, err)
	}
	if gone.Process != nil {
		l.log.Warn("took over the lease of a process that is gone", "table", tableID,
			"holder", gone.Holder, "process", gone.Process.String(), "token", gone.Token,
			"expires", gone.Expires, "new_holder", holder, "new_token", out.Token)
	}
	return out, nil
}

// Renew implements pipeline.Leaser.
func (l *Local) Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	if err := ValidTTL(ttl); err != nil {
		return Lease{}, err
	}
	if err := ValidTableID(lease.Table); err != nil {
		return Lease{}, err
	}
	var out Lease
	err := l.updateTable(ctx, lease.Table, func(t *TableDoc, _ bool) error {
		next, renewed, err := t.Lease.Renew(lease, ttl, l.now())
		t.Lease, out = next, renewed
		return err
	})
	if err != nil {
		return Lease{}, fmt.Errorf("renew: %w", err)
	}
	return out, nil
}

// Release implements pipeline.Leaser.
func (l *Local) Release(ctx context.Context, lease Lease) error {
	if err := ValidTableID(lease.Table); err != nil {
		return err
	}
	err := l.updateTable(ctx, lease.Table, func(t *TableDoc, _ bool) error {
		next, err := t.Lease.Release(lease)
		t.Lease = next
		return err
	})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// CheckLease implements pipeline.Leaser.
func (l *Local) CheckLease(ctx context.Context, lease Lease) error {
	if err := ValidTableID(lease.Table); err != nil {
		return err
	}
	t, _, err := l.readTable(ctx, lease.Table)
	if err != nil {
		return fmt.Errorf("check lease on %s: %w", lease.Table, err)
	}
	return t.Lease.Check(lease, l.now())
}

// reserveArrival hands out the table's next arrival number.
func (l *Local) reserveArrival(ctx context.Context, tableID string) (int64, error) {
	var seq int64
	err := l.updateTable(ctx, tableID, func(t *TableDoc, _ bool) error {
		t.LastArrivalSeq++
		seq = t.LastArrivalSeq
		return nil
	})
	return seq, err
}

// RegisterFile implements pipeline.Registry.
func (l *Local) RegisterFile(ctx context.Context, in FileRecord) (FileRecord, bool, error) {
	if err := ValidFile(in); err != nil {
		return FileRecord{}, false, fmt.Errorf("register file: %w", err)
	}
	id := FileID(in.Bucket, in.Name, in.Generation)
	name := l.fileName(in.Table, id)
	var rec FileRecord
	var created bool
	err := retry(ctx, func() error {
		var cur FileRecord
		gen, err := l.read(ctx, name, &cur)
		if err != nil {
			return err
		}
		if !Stages(cur, gen != 0) {
			rec, created = cur, false
			return nil
		}
		seq, err := l.reserveArrival(ctx, in.Table)
		if err != nil {
			return err
		}
		next := NewRecord(in, seq, l.now())
		marker := l.markerName(in.Table, seq, id)
		if err := l.write(ctx, marker, struct{}{}, 0); err != nil {
			return err // a fresh arrival number cannot have a marker: no conflict
		}
		if err := l.write(ctx, name, &next, gen); err != nil {
			if rmErr := l.remove(ctx, marker); rmErr != nil {
				return errors.Join(err, rmErr)
			}
			return err // ErrConflict: somebody else registered it; look again
		}
		rec, created = next, true
		return nil
	})
	if err != nil {
		return FileRecord{}, false, fmt.Errorf("register %s/%s (generation %d) for %s: %w", in.Bucket, in.Name, in.Generation, in.Table, err)
	}
	return rec, created, nil
}

// Quarantine implements pipeline.Registry.
func (l *Local) Quarantine(ctx context.Context, in FileRecord, reason string) (FileRecord, error) {
	if err := ValidFile(in); err != nil {
		return FileRecord{}, fmt.Errorf("quarantine file: %w", err)
	}
	id := FileID(in.Bucket, in.Name, in.Generation)
	name := l.fileName(in.Table, id)
	var rec FileRecord
	err := retry(ctx, func() error {
		var cur FileRecord
		gen, err := l.read(ctx, name, &cur)
		if err != nil {
			return err
		}
		var arrival int64
		if gen == 0 {
			if arrival, err = l.reserveArrival(ctx, in.Table); err != nil {
				return err
			}
		}
		next, err := QuarantineRecord(cur, gen != 0, in, reason, arrival, l.now())
		if err != nil {
			return err
		}
		if err := l.write(ctx, name, &next, gen); err != nil {
			return err
		}
		rec = next
		if gen != 0 && cur.State == StateStaged {
			// The marker is stale now; Pending would skip it anyway.
			return l.remove(ctx, l.markerName(cur.Table, cur.ArrivalSeq, id))
		}
		return nil
	})
	if err != nil {
		return FileRecord{}, fmt.Errorf("quarantine %s/%s (generation %d) for %s: %w", in.Bucket, in.Name, in.Generation, in.Table, err)
	}
	return rec, nil
}

// Skip implements pipeline.Registry.
func (l *Local) Skip(ctx context.Context, in FileRecord, reason string) (FileRecord, error) {
	if err := ValidFile(in); err != nil {
		return FileRecord{}, fmt.Errorf("skip file: %w", err)
	}
	id := FileID(in.Bucket, in.Name, in.Generation)
	var rec FileRecord
	err := retry(ctx, func() error {
		cur, found, err := l.lookup(ctx, in.Table, id)
		if err != nil || found {
			rec = cur
			return err
		}
		if err := l.ensureTable(ctx, in.Table); err != nil {
			return err
		}
		next := SkipRecord(in, reason, l.now(), l.retention)
		if err := l.write(ctx, l.skippedName(in.Table, id), &next, 0); err != nil {
			return err // ErrConflict: skipped meanwhile; look again
		}
		rec = next
		return nil
	})
	if err != nil {
		return FileRecord{}, fmt.Errorf("skip %s/%s (generation %d) for %s: %w", in.Bucket, in.Name, in.Generation, in.Table, err)
	}
	return rec, nil
}

// ensureTable creates the table document when there is none.
func (l *Local) ensureTable(ctx context.Context, tableID string) error {
	name := l.tableName(tableID)
	_, err := l.store.Stat(ctx, name)
	if !errors.Is(err, objstore.ErrNotExist) {
		if err != nil {
			return fmt.Errorf("stat %s: %w", name, err)
		}
		return nil
	}
	if err := l.write(ctx, name, &TableDoc{Table: tableID}, 0); err != nil && !errors.Is(err, ErrConflict) {
		return err // ErrConflict: created meanwhile, which is all we want
	}
	return nil
}

// lookup reads the record of file id in table tableID: the record that
// takes part in the table's work, else the skipped one.
func (l *Local) lookup(ctx context.Context, tableID, id string) (FileRecord, bool, error) {
	for _, name := range []string{l.fileName(tableID, id), l.skippedName(tableID, id)} {
		var rec FileRecord
		gen, err := l.read(ctx, name, &rec)
		if err != nil || gen != 0 {
			return rec, err == nil, err
		}
	}
	return FileRecord{}, false, nil
}

// tableIDs lists the tables that have a table document.
func (l *Local) tableIDs(ctx context.Context) ([]string, error) {
	prefix := l.root + "/tables/"
	var out []string
	err := l.store.List(ctx, prefix, "", func(info objstore.Info) error {
		rest := strings.TrimPrefix(info.Name, prefix)
		if table, ok := strings.CutSuffix(rest, ".json"); ok && !strings.Contains(table, "/") {
			out = append(out, table)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	return out, nil
}

// File implements pipeline.Registry. Records are kept per table, so the tables
// are probed in turn; there are few.
func (l *Local) File(ctx context.Context, id string) (FileRecord, error) {
	if err := ValidFileID(id); err != nil {
		return FileRecord{}, err
	}
	tables, err := l.tableIDs(ctx)
	if err != nil {
		return FileRecord{}, fmt.Errorf("file %s: %w", id, err)
	}
	for _, table := range tables {
		rec, found, err := l.lookup(ctx, table, id)
		if err != nil {
			return FileRecord{}, fmt.Errorf("file %s: %w", id, err)
		}
		if found {
			return rec, nil
		}
	}
	return FileRecord{}, fmt.Errorf("file %s: %w", id, ErrNotFound)
}

// maxProbes is how many (file, table) pairs Files probes one by one; beyond
// it, one listing of every record is cheaper than the probes, two reads
// each for an unknown file.
const maxProbes = 128

// Files implements pipeline.Registry. Records are kept per table: a few ids
// are probed in each table, many are found in one listing of all records.
func (l *Local) Files(ctx context.Context, ids []string) (map[string]FileRecord, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := ValidFileID(id); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		want[id] = true
	}
	out := make(map[string]FileRecord, len(want))
	if len(want) == 0 {
		return out, nil
	}
	tables, err := l.tableIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	if len(want)*len(tables) > maxProbes {
		if err := l.findFiles(ctx, want, out); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		return out, nil
	}
	for id := range want {
		for _, table := range tables {
			rec, found, err := l.lookup(ctx, table, id)
			if err != nil {
				return nil, fmt.Errorf("files: %w", err)
			}
			if found {
				out[id] = rec
				break
			}
		}
	}
	return out, nil
}

// findFiles adds to out the records of the wanted ids, found by listing
// every record once: of each file, the first table's record that takes part
// in the work, else its first skipped record, as lookup and File choose.
func (l *Local) findFiles(ctx context.Context, want map[string]bool, out map[string]FileRecord) error {
	type found struct {
		name    string
		skipped bool
	}
	names := map[string]found{}
	prefix := l.filesPrefix()
	if err := l.store.List(ctx, prefix, "", func(info objstore.Info) error {
		_, id, skipped, ok := l.parseFileName(info.Name)
		if !ok || !want[id] {
			return nil
		}
		if cur, seen := names[id]; !seen || (cur.skipped && !skipped) {
			names[id] = found{info.Name, skipped}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	for id, f := range names {
		var rec FileRecord
		gen, err := l.read(ctx, f.name, &rec)
		if err != nil {
			return err
		}
		if gen != 0 { // else expired since the listing
			out[id] = rec
		}
	}
	return nil
}

// pending lists up to limit staged files of table t in arrival order,
// skipping files of t's open batch, and deletes markers that can never
// become valid again.
func (l *Local) pending(ctx context.Context, t *TableDoc, limit int) ([]FileRecord, error) {
	prefix := l.markerPrefix(t.Table)
	var markers []objstore.Info
	if err := l.store.List(ctx, prefix, "", func(info objstore.Info) error {
		markers = append(markers, info)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	var out []FileRecord
	for _, m := range markers {
		if limit > 0 && len(out) >= limit {
			break
		}
		seqText, id, ok := strings.Cut(strings.TrimPrefix(m.Name, prefix), "_")
		seq, err := strconv.ParseInt(seqText, 10, 64)
		if !ok || err != nil {
			continue // not ours
		}
		var rec FileRecord
		gen, err := l.read(ctx, l.fileName(t.Table, id), &rec)
		if err != nil {
			return nil, err
		}
		switch {
		case gen == 0:
			// A registration in flight, or one that crashed: Expire cleans up.
		case rec.ArrivalSeq != seq || rec.State != StateStaged:
			// The file moved on; its arrival number never comes back.
			if err := l.remove(ctx, m.Name); err != nil {
				return nil, err
			}
		case slices.Contains(t.OpenFiles, id):
			// Batched by a NextBatch that has not marked it yet.
		default:
			out = append(out, rec)
		}
	}
	return out, nil
}

// Pending implements pipeline.Registry.
func (l *Local) Pending(ctx context.Context, tableID string, limit int) ([]FileRecord, error) {
	if err := ValidTableID(tableID); err != nil {
		return nil, err
	}
	t, _, err := l.readTable(ctx, tableID)
	if err != nil {
		return nil, fmt.Errorf("list pending files of %s: %w", tableID, err)
	}
	out, err := l.pending(ctx, &t, limit)
	if err != nil {
		return nil, fmt.Errorf("list pending files of %s: %w", tableID, err)
	}
	return out, nil
}

// ListFiles implements pipeline.Registry. Skipped records, which have no
// arrival number, come first, by file id, as in Firestore.
func (l *Local) ListFiles(ctx context.Context, tableID string, state FileState) ([]FileRecord, error) {
	if err := ValidTableID(tableID); err != nil {
		return nil, err
	}
	stored, err := l.records(ctx, tableID)
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", tableID, err)
	}
	// A file that was skipped and then staged has both records; the
	// staged one is current.
	live := map[string]bool{}
	for _, s := range stored {
		if !s.skipped {
			live[s.rec.ID] = true
		}
	}
	var out []FileRecord
	for _, s := range stored {
		if (!s.skipped || !live[s.rec.ID]) && (state == "" || s.rec.State == state) {
			out = append(out, s.rec)
		}
	}
	slices.SortFunc(out, func(a, b FileRecord) int {
		if c := compareInt(a.ArrivalSeq, b.ArrivalSeq); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// storedRecord is a record as stored, with its object name.
type storedRecord struct {
	name    string
	skipped bool // a skipped record, written once
	rec     FileRecord
}

// records reads every record in tableID's folder, skipped ones included.
func (l *Local) records(ctx context.Context, tableID string) ([]storedRecord, error) {
	prefix := l.filesPrefix() + tableID + "/"
	var stored []storedRecord
	if err := l.store.List(ctx, prefix, "", func(info objstore.Info) error {
		if table, _, skipped, ok := l.parseFileName(info.Name); ok && table == tableID {
			stored = append(stored, storedRecord{name: info.Name, skipped: skipped})
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	out := stored[:0]
	for _, s := range stored {
		gen, err := l.read(ctx, s.name, &s.rec)
		if err != nil {
			return nil, err
		}
		if gen != 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// openFiles reads the records of t's open batch and finishes opening it:
// files still staged are marked batched and their markers deleted. It is
// idempotent, so a resumed batch repairs what a crash left undone.
func (l *Local) openFiles(ctx context.Context, t *TableDoc) ([]FileRecord, error) {
	out := make([]FileRecord, 0, len(t.OpenFiles))
	for _, id := range t.OpenFiles {
		name := l.fileName(t.Table, id)
		var rec FileRecord
		err := retry(ctx, func() error {
			gen, err := l.read(ctx, name, &rec)
			if err != nil {
				return err
			}
			if gen == 0 {
				return fmt.Errorf("batch %d file %s: %w", t.OpenBatchSeq, id, ErrNotFound)
			}
			if rec.State != StateStaged || rec.ArrivalSeq > t.OpenArrival {
				return nil // moved on, or registered again after leaving the batch
			}
			marker := l.markerName(t.Table, rec.ArrivalSeq, id)
			rec.State, rec.BatchSeq = StateBatched, t.OpenBatchSeq
			if err := l.write(ctx, name, &rec, gen); err != nil {
				return err
			}
			return l.remove(ctx, marker)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// NextBatch implements pipeline.Batches.
func (l *Local) NextBatch(ctx context.Context, lease Lease, tableID string, lim BatchLimits) (Batch, error) {
	if err := ValidTableID(tableID); err != nil {
		return Batch{}, err
	}
	var b Batch
	err := retry(ctx, func() error {
		t, gen, err := l.readTable(ctx, tableID)
		if err != nil {
			return err
		}
		if lease.Table != tableID {
			return fmt.Errorf("lease on %s used for %s: %w", lease.Table, tableID, ErrLeaseLost)
		}
		if err := t.Lease.Check(lease, l.now()); err != nil {
			return err
		}
		resumed := t.OpenBatchSeq != 0
		if !resumed {
			pending, err := l.pending(ctx, &t, lim.MaxFiles())
			if err != nil {
				return err
			}
			files := SelectBatch(pending, lim)
			if len(files) == 0 {
				return ErrNoWork
			}
			now := l.now()
			t.OpenBatch(files, now)
			if err := l.write(ctx, l.tableName(tableID), &t, gen); err != nil {
				return err // lost a race: look again, lease check included
			}
			// The batch is committed; its record is for inspection.
			bd := BatchDoc{Table: tableID, Seq: t.OpenBatchSeq, FileIDs: t.OpenFiles, State: BatchOpen, Created: now, Files: int64(len(files))}
			if err := l.put(ctx, l.batchName(tableID, t.OpenBatchSeq), bd); err != nil {
				return err
			}
		}
		files, err := l.openFiles(ctx, &t)
		if err != nil {
			return err
		}
		b = Batch{Table: tableID, Seq: t.OpenBatchSeq, Files: files, Created: t.OpenCreated, Resumed: resumed}
		return nil
	})
	if err != nil {
		return Batch{}, fmt.Errorf("next batch of %s: %w", tableID, err)
	}
	return b, nil
}

// CompleteBatch implements pipeline.Batches.
func (l *Local) CompleteBatch(ctx context.Context, lease Lease, b Batch, stats BatchStats) error {
	if err := ValidTableID(b.Table); err != nil {
		return err
	}
	err := retry(ctx, func() error {
		t, gen, err := l.readTable(ctx, b.Table)
		if err != nil {
			return err
		}
		if lease.Table != b.Table {
			return fmt.Errorf("lease on %s used for %s: %w", lease.Table, b.Table, ErrLeaseLost)
		}
		if err := t.Lease.Check(lease, l.now()); err != nil {
			return err
		}
		if b.Seq <= 0 || b.Seq > t.LastBatchSeq {
			return fmt.Errorf("batch %d: %w", b.Seq, ErrNotFound)
		}
		if t.OpenBatchSeq != b.Seq {
			return nil // done already: a retried completion
		}
		now := l.now()
		// Mark the files merged before closing the batch, so a closed batch
		// never has files left behind.
		files := make([]FileRecord, 0, len(t.OpenFiles))
		for _, id := range t.OpenFiles {
			rec, err := l.markMerged(ctx, b.Table, id, b.Seq, now)
			if err != nil {
				return err
			}
			files = append(files, rec)
		}
		done := t.CompleteBatch(files, stats, now, l.retention)
		if err := l.write(ctx, l.tableName(b.Table), &t, gen); err != nil {
			return err
		}
		return l.put(ctx, l.batchName(b.Table, b.Seq), done)
	})
	if err != nil {
		return fmt.Errorf("complete batch %d of %s: %w", b.Seq, b.Table, err)
	}
	return nil
}

// markMerged marks one file of batch seq merged, unless it was quarantined,
// and returns its record.
func (l *Local) markMerged(ctx context.Context, tableID, id string, seq int64, now time.Time) (FileRecord, error) {
	name := l.fileName(tableID, id)
	var rec FileRecord
	err := retry(ctx, func() error {
		gen, err := l.read(ctx, name, &rec)
		if err != nil {
			return err
		}
		if gen == 0 {
			return fmt.Errorf("batch %d file %s: %w", seq, id, ErrNotFound)
		}
		before := rec.State
		if !mergeFile(&rec, seq, now, l.retention) || before == StateMerged {
			return nil
		}
		if err := l.write(ctx, name, &rec, gen); err != nil {
			return err
		}
		return nil
	})
	return rec, err
}

// status returns a table's status with counts from its records, or
// ErrNotFound for a table without files.
func (l *Local) status(ctx context.Context, tableID string) (TableStatus, error) {
	t, gen, err := l.readTable(ctx, tableID)
	if err != nil {
		return TableStatus{}, err
	}
	if gen == 0 || t.LastArrivalSeq == 0 {
		return TableStatus{}, ErrNotFound
	}
	files, err := l.ListFiles(ctx, tableID, "")
	if err != nil {
		return TableStatus{}, err
	}
	s := t.Status()
	s.Pending, s.Quarantined = 0, 0
	for _, f := range files {
		switch {
		case f.State == StateQuarantined:
			s.Quarantined++
		case f.State == StateStaged && !slices.Contains(t.OpenFiles, f.ID):
			s.Pending++
		}
	}
	return WithLease(s, t.Lease, l.now()), nil
}

// Status implements pipeline.Status.
func (l *Local) Status(ctx context.Context, tableID string) (TableStatus, error) {
	if err := ValidTableID(tableID); err != nil {
		return TableStatus{}, err
	}
	s, err := l.status(ctx, tableID)
	if err != nil {
		return TableStatus{}, fmt.Errorf("status of %s: %w", tableID, err)
	}
	return s, nil
}

// Statuses implements pipeline.Status.
func (l *Local) Statuses(ctx context.Context) ([]TableStatus, error) {
	tables, err := l.tableIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []TableStatus
	for _, table := range tables {
		s, err := l.status(ctx, table)
		if errors.Is(err, ErrNotFound) {
			continue // a lease but no files yet
		}
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", table, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Expire implements pipeline.Expirer. It also deletes pending markers left by
// registrations that crashed before the cutoff.
func (l *Local) Expire(ctx context.Context, before time.Time) (int, error) {
	tables, err := l.tableIDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("expire: %w", err)
	}
	n := 0
	for _, table := range tables {
		m, err := l.expireTable(ctx, table, before)
		n += m
		if err != nil {
			return n, fmt.Errorf("expire %s: %w", table, err)
		}
	}
	return n, nil
}

func (l *Local) expireTable(ctx context.Context, tableID string, before time.Time) (int, error) {
	t, _, err := l.readTable(ctx, tableID)
	if err != nil {
		return 0, err
	}
	n := 0
	var batches []string
	if err := l.store.List(ctx, l.root+"/batches/"+tableID+"/", "", func(info objstore.Info) error {
		batches = append(batches, info.Name)
		return nil
	}); err != nil {
		return n, fmt.Errorf("list batches: %w", err)
	}
	for _, name := range batches {
		var bd BatchDoc
		gen, err := l.read(ctx, name, &bd)
		if err != nil {
			return n, err
		}
		if gen == 0 || bd.State != BatchDone || !bd.DoneAt.Before(before) || bd.Seq == t.LastBatchSeq {
			continue
		}
		if err := l.remove(ctx, name); err != nil {
			return n, err
		}
		n++
	}
	stored, err := l.records(ctx, tableID)
	if err != nil {
		return n, err
	}
	// A merged record never changes again, and a skipped record is never
	// rewritten (registering the file again writes the other record), so
	// deleting them races with nothing.
	for _, s := range stored {
		if !Expired(s.rec, before) {
			continue
		}
		if err := l.remove(ctx, s.name); err != nil {
			return n, err
		}
		n++
	}
	prefix := l.markerPrefix(tableID)
	var orphans []string
	if err := l.store.List(ctx, prefix, "", func(info objstore.Info) error {
		if info.Updated.Before(before) {
			orphans = append(orphans, info.Name)
		}
		return nil
	}); err != nil {
		return n, fmt.Errorf("list %s: %w", prefix, err)
	}
	// Markers this old belong to files that moved on, or to registrations
	// that crashed before writing the record.
	for _, name := range orphans {
		seqText, id, _ := strings.Cut(strings.TrimPrefix(name, prefix), "_")
		var rec FileRecord
		gen, err := l.read(ctx, l.fileName(tableID, id), &rec)
		if err != nil {
			return n, err
		}
		if gen != 0 && rec.State == StateStaged && strconv.FormatInt(rec.ArrivalSeq, 10) == strings.TrimLeft(seqText, "0") {
			continue // a file staged long ago and still waiting
		}
		if err := l.remove(ctx, name); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Watermark implements pipeline.Watermarks.
func (l *Local) Watermark(ctx context.Context, key string) ([]byte, int64, error) {
	if err := ValidWatermarkKey(key); err != nil {
		return nil, 0, err
	}
	var d WatermarkDoc
	gen, err := l.read(ctx, l.watermarkName(key), &d)
	if err != nil {
		return nil, 0, fmt.Errorf("watermark %q: %w", key, err)
	}
	data, rev, err := d.Get(gen != 0, key)
	if err != nil {
		return nil, 0, fmt.Errorf("watermark %q: %w", key, err)
	}
	return data, rev, nil
}

// PutWatermark implements pipeline.Watermarks: one compare-and-swap on the
// generation read, so that of writers from the same revision one wins.
func (l *Local) PutWatermark(ctx context.Context, key string, data []byte, rev int64) (int64, error) {
	if err := ValidWatermark(key, data, rev); err != nil {
		return 0, err
	}
	name := l.watermarkName(key)
	var next WatermarkDoc
	err := func() error {
		var cur WatermarkDoc
		gen, err := l.read(ctx, name, &cur)
		if err != nil {
			return err
		}
		if next, err = cur.Put(gen != 0, key, data, rev, l.now()); err != nil {
			return err
		}
		return l.write(ctx, name, &next, gen) // ErrConflict: another writer stored first
	}()
	if err != nil {
		return 0, fmt.Errorf("put watermark %q at revision %d: %w", key, rev, err)
	}
	return next.Rev, nil
}

// ListWatermarks implements pipeline.Watermarks. Documents are named by a
// hash of their key, so every one is read to find the keys; they are read
// again, one at a time, to call fn in key order.
func (l *Local) ListWatermarks(ctx context.Context, prefix string, fn func(key string, data []byte) error) error {
	dir := l.root + "/watermarks/"
	var names []string
	if err := l.store.List(ctx, dir, "", func(info objstore.Info) error {
		names = append(names, info.Name)
		return nil
	}); err != nil {
		return fmt.Errorf("list watermarks: %w", err)
	}
	type entry struct{ key, name string }
	var found []entry
	for _, name := range names {
		var d WatermarkDoc
		gen, err := l.read(ctx, name, &d)
		if err != nil {
			return fmt.Errorf("list watermarks: %w", err)
		}
		if gen != 0 && strings.HasPrefix(d.Key, prefix) {
			found = append(found, entry{d.Key, name})
		}
	}
	slices.SortFunc(found, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range found {
		var d WatermarkDoc
		gen, err := l.read(ctx, e.name, &d)
		if err != nil {
			return fmt.Errorf("list watermarks: %w", err)
		}
		if gen == 0 || d.Key != e.key {
			continue // deleted since the listing
		}
		if err := fn(d.Key, d.Data); err != nil {
			return err
		}
	}
	return nil
}
