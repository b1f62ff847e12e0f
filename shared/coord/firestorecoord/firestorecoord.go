package firestorecoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

// Firestore collections, each prefixed with Options.Prefix:
//
//	dsdelta_leases/{table}              lease: holder, token, expires
//	dsdelta_tables/{table}              counters, open batch, status
//	dsdelta_files/{FileID}              one FileRecord per source object
//	dsdelta_batches/{table}__{seq:020d} batch records
//	dsdelta_watermarks/{WatermarkID}    WatermarkDoc: key, data, rev
//
// Every change touching several documents runs in one transaction, and the
// lease token is checked in the transaction that writes.
//
// Composite indexes the queries need in a real database (the emulator needs
// none), as firestore.indexes.json entries:
//
//	{"collectionGroup": "dsdelta_files", "queryScope": "COLLECTION", "fields": [
//	  {"fieldPath": "table", "order": "ASCENDING"},
//	  {"fieldPath": "state", "order": "ASCENDING"},
//	  {"fieldPath": "arrivalSeq", "order": "ASCENDING"}]}
//	{"collectionGroup": "dsdelta_files", "queryScope": "COLLECTION", "fields": [
//	  {"fieldPath": "table", "order": "ASCENDING"},
//	  {"fieldPath": "arrivalSeq", "order": "ASCENDING"}]}
//
// Expire filters on doneAt alone, and ListWatermarks on key alone, served by
// the automatic single-field indexes. TTL policies on the expireAt field of
// dsdelta_files and dsdelta_batches delete records the same way Expire does;
// expireAt is absent until a file is merged or skipped or a batch is done.
// dsdelta_watermarks has no TTL policy and its documents no expireAt: a
// watermark lost would send the reconcile back over a whole folder.
const (
	collLeases     = "dsdelta_leases"
	collTables     = "dsdelta_tables"
	collFiles      = "dsdelta_files"
	collBatches    = "dsdelta_batches"
	collWatermarks = "dsdelta_watermarks"
)

// getAllRefs bounds the documents of one GetAll call in Files.
const getAllRefs = 300

// Options configures New.
type Options struct {
	// Prefix is prepended to every collection name, so that tests or several
	// deployments can share a database.
	Prefix string
	// Now is the clock that judges lease expiry; time.Now when nil.
	Now func() time.Time
	// Retention sets ExpireAt of merged files and done batches;
	// coord.DefaultRetention when zero.
	Retention time.Duration
	// MaxAttempts bounds transaction retries under contention; 30 when zero.
	MaxAttempts int
}

// Coordinator is the coordination backend on Cloud Firestore (native mode):
// it provides every part of the coordination the use cases ask for
// (pipeline.Coordinator), as coord.Local does, and the conformance suite
// (coordtest) checks it the same way.
type Coordinator struct {
	client                                     *firestore.Client
	leases, tables, files, batches, watermarks *firestore.CollectionRef
	now                                        func() time.Time
	retention                                  time.Duration
	attempts                                   int
}

// New returns a Coordinator over client. The client stays owned by the
// caller.
func New(ctx context.Context, client *firestore.Client, opts Options) (*Coordinator, error) {
	if client == nil {
		return nil, errors.New("new firestore coordinator: nil client")
	}
	f := &Coordinator{
		client:     client,
		leases:     client.Collection(opts.Prefix + collLeases),
		tables:     client.Collection(opts.Prefix + collTables),
		files:      client.Collection(opts.Prefix + collFiles),
		batches:    client.Collection(opts.Prefix + collBatches),
		watermarks: client.Collection(opts.Prefix + collWatermarks),
		now:        opts.Now,
		retention:  opts.Retention,
		attempts:   opts.MaxAttempts,
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.retention <= 0 {
		f.retention = coord.DefaultRetention
	}
	if f.attempts <= 0 {
		f.attempts = 30
	}
	return f, nil
}

// run runs fn in a transaction with the configured retry budget.
//
// Firestore bills the reads of every attempt of a transaction but the
// writes of the committed one only, so each attempt counts into a counter
// of its own (opcount), settled when the next attempt starts (aborted: its
// reads, and a retry) or when the transaction ends (its writes too if it
// committed).
func (f *Coordinator) run(ctx context.Context, fn func(context.Context, *firestore.Transaction) error) error {
	parent := opcount.From(ctx)
	var attempt *opcount.Counter
	settle := func(committed bool) {
		if attempt == nil {
			return
		}
		c := attempt.Counts()
		if !committed {
			c.FirestoreWrites, c.FirestoreDeletes = 0, 0
		}
		parent.AddCounts(c)
	}
	err := f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if attempt != nil {
			settle(false)
			parent.Add(opcount.FirestoreRetry, 1)
		}
		var actx context.Context
		actx, attempt = opcount.Start(opcount.Without(ctx))
		return fn(actx, tx)
	}, firestore.MaxAttempts(f.attempts))
	settle(err == nil)
	return err
}

// getDoc reads a document into dst inside tx; it reports whether it exists.
// A missing document is billed as a read too.
func getDoc(ctx context.Context, tx *firestore.Transaction, ref *firestore.DocumentRef, dst any) (bool, error) {
	opcount.Add(ctx, opcount.FirestoreRead, 1)
	snap, err := tx.Get(ref)
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	if err := snap.DataTo(dst); err != nil {
		return false, fmt.Errorf("decode %s: %w", ref.Path, err)
	}
	return true, nil
}

// set writes a document inside tx (counted once its attempt commits, see
// run).
func set(ctx context.Context, tx *firestore.Transaction, ref *firestore.DocumentRef, v any) error {
	opcount.Add(ctx, opcount.FirestoreWrite, 1)
	return tx.Set(ref, v)
}

// queried counts the reads of a query that returned n documents: a query
// is billed one read at least.
func queried(ctx context.Context, n int) {
	opcount.Add(ctx, opcount.FirestoreRead, int64(max(n, 1)))
}

// Acquire implements pipeline.Leaser.
func (f *Coordinator) Acquire(ctx context.Context, tableID, holder string, ttl time.Duration) (coord.Lease, error) {
	if err := coord.ValidTableID(tableID); err != nil {
		return coord.Lease{}, err
	}
	if err := coord.ValidAcquire(holder, ttl); err != nil {
		return coord.Lease{}, err
	}
	var l coord.Lease
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ref := f.leases.Doc(tableID)
		var cur coord.LeaseDoc
		if _, err := getDoc(ctx, tx, ref, &cur); err != nil {
			return err
		}
		next, lease, err := cur.Acquire(tableID, holder, ttl, f.now())
		if err != nil {
			return err
		}
		l = lease
		return set(ctx, tx, ref, next)
	})
	if err != nil {
		return coord.Lease{}, fmt.Errorf("acquire lease on %s for %s: %w", tableID, holder, err)
	}
	return l, nil
}

// Renew implements pipeline.Leaser.
func (f *Coordinator) Renew(ctx context.Context, l coord.Lease, ttl time.Duration) (coord.Lease, error) {
	if err := coord.ValidTTL(ttl); err != nil {
		return coord.Lease{}, err
	}
	if err := coord.ValidLease(l); err != nil {
		return coord.Lease{}, err
	}
	var out coord.Lease
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ref := f.leases.Doc(l.Table)
		var cur coord.LeaseDoc
		if _, err := getDoc(ctx, tx, ref, &cur); err != nil {
			return err
		}
		next, lease, err := cur.Renew(l, ttl, f.now())
		if err != nil {
			return err
		}
		out = lease
		return set(ctx, tx, ref, next)
	})
	if err != nil {
		return coord.Lease{}, fmt.Errorf("renew: %w", err)
	}
	return out, nil
}

// Release implements pipeline.Leaser.
func (f *Coordinator) Release(ctx context.Context, l coord.Lease) error {
	if err := coord.ValidLease(l); err != nil {
		return err
	}
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ref := f.leases.Doc(l.Table)
		var cur coord.LeaseDoc
		if _, err := getDoc(ctx, tx, ref, &cur); err != nil {
			return err
		}
		next, err := cur.Release(l)
		if err != nil {
			return err
		}
		return set(ctx, tx, ref, next)
	})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// CheckLease implements pipeline.Leaser.
func (f *Coordinator) CheckLease(ctx context.Context, l coord.Lease) error {
	if err := coord.ValidLease(l); err != nil {
		return err
	}
	var cur coord.LeaseDoc
	opcount.Add(ctx, opcount.FirestoreRead, 1)
	snap, err := f.leases.Doc(l.Table).Get(ctx)
	switch {
	case status.Code(err) == codes.NotFound:
	case err != nil:
		return fmt.Errorf("check lease on %s: %w", l.Table, err)
	default:
		if err := snap.DataTo(&cur); err != nil {
			return fmt.Errorf("check lease on %s: decode: %w", l.Table, err)
		}
	}
	return cur.Check(l, f.now())
}

// checkLeaseTx checks l inside tx, so that the writes of tx are fenced.
func (f *Coordinator) checkLeaseTx(ctx context.Context, tx *firestore.Transaction, l coord.Lease, tableID string) error {
	if l.Table != tableID {
		return fmt.Errorf("lease on %s used for %s: %w", l.Table, tableID, coord.ErrLeaseLost)
	}
	var cur coord.LeaseDoc
	if _, err := getDoc(ctx, tx, f.leases.Doc(tableID), &cur); err != nil {
		return err
	}
	return cur.Check(l, f.now())
}

// RegisterFile implements pipeline.Registry.
func (f *Coordinator) RegisterFile(ctx context.Context, in coord.FileRecord) (coord.FileRecord, bool, error) {
	if err := coord.ValidFile(in); err != nil {
		return coord.FileRecord{}, false, fmt.Errorf("register file: %w", err)
	}
	id := coord.FileID(in.Bucket, in.Name, in.Generation)
	var rec coord.FileRecord
	var created bool
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		created = false
		fref, tref := f.files.Doc(id), f.tables.Doc(in.Table)
		var cur coord.FileRecord
		exists, err := getDoc(ctx, tx, fref, &cur)
		if err != nil {
			return err
		}
		if !coord.Stages(cur, exists) {
			rec = cur
			return nil
		}
		t := coord.TableDoc{Table: in.Table}
		if _, err := getDoc(ctx, tx, tref, &t); err != nil {
			return err
		}
		if exists && cur.State == coord.StateQuarantined {
			t.Quarantined--
		}
		t.LastArrivalSeq++
		t.Pending++
		rec = coord.NewRecord(in, t.LastArrivalSeq, f.now())
		created = true
		if err := set(ctx, tx, fref, rec); err != nil {
			return err
		}
		return set(ctx, tx, tref, t)
	})
	if err != nil {
		return coord.FileRecord{}, false, fmt.Errorf("register %s/%s (generation %d) for %s: %w", in.Bucket, in.Name, in.Generation, in.Table, err)
	}
	return rec, created, nil
}

// Quarantine implements pipeline.Registry.
func (f *Coordinator) Quarantine(ctx context.Context, in coord.FileRecord, reason string) (coord.FileRecord, error) {
	if err := coord.ValidFile(in); err != nil {
		return coord.FileRecord{}, fmt.Errorf("quarantine file: %w", err)
	}
	id := coord.FileID(in.Bucket, in.Name, in.Generation)
	var rec coord.FileRecord
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		fref := f.files.Doc(id)
		var cur coord.FileRecord
		exists, err := getDoc(ctx, tx, fref, &cur)
		if err != nil {
			return err
		}
		known := coord.Tracked(cur, exists)
		if known {
			// The file stays with the table it was registered for.
			in.Table = cur.Table
		}
		tref := f.tables.Doc(in.Table)
		t := coord.TableDoc{Table: in.Table}
		if _, err := getDoc(ctx, tx, tref, &t); err != nil {
			return err
		}
		var arrival int64
		if !known {
			t.LastArrivalSeq++
			arrival = t.LastArrivalSeq
		}
		rec, err = coord.QuarantineRecord(cur, exists, in, reason, arrival, f.now())
		if err != nil {
			return err
		}
		if !known || cur.State != coord.StateQuarantined {
			t.Quarantined++
		}
		if known && cur.State == coord.StateStaged {
			t.Pending--
		}
		if err := set(ctx, tx, fref, rec); err != nil {
			return err
		}
		return set(ctx, tx, tref, t)
	})
	if err != nil {
		return coord.FileRecord{}, fmt.Errorf("quarantine %s/%s (generation %d) for %s: %w", in.Bucket, in.Name, in.Generation, in.Table, err)
	}
	return rec, nil
}

// Skip implements pipeline.Registry. A skipped file is not counted, so the
// table document is left alone.
func (f *Coordinator) Skip(ctx context.Context, in coord.FileRecord, reason string) (coord.FileRecord, error) {
	if err := coord.ValidFile(in); err != nil {
		return coord.FileRecord{}, fmt.Errorf("skip file: %w", err)
	}
	id := coord.FileID(in.Bucket, in.Name, in.Generation)
	var rec coord.FileRecord
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		fref := f.files.Doc(id)
		var cur coord.FileRecord
		exists, err := getDoc(ctx, tx, fref, &cur)
		if err != nil {
			return err
		}
		if exists {
			rec = cur
			return nil
		}
		rec = coord.SkipRecord(in, reason, f.now(), f.retention)
		return set(ctx, tx, fref, rec)
	})
	if err != nil {
		return coord.FileRecord{}, fmt.Errorf("skip %s/%s (generation %d) for %s: %w", in.Bucket, in.Name, in.Generation, in.Table, err)
	}
	return rec, nil
}

// Files implements pipeline.Registry, reading getAllRefs documents a call.
func (f *Coordinator) Files(ctx context.Context, ids []string) (map[string]coord.FileRecord, error) {
	refs := make([]*firestore.DocumentRef, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := coord.ValidFileID(id); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		if !seen[id] {
			seen[id] = true
			refs = append(refs, f.files.Doc(id))
		}
	}
	out := make(map[string]coord.FileRecord, len(refs))
	for chunk := range slices.Chunk(refs, getAllRefs) {
		opcount.Add(ctx, opcount.FirestoreRead, int64(len(chunk)))
		snaps, err := f.client.GetAll(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("files: read %d records: %w", len(chunk), err)
		}
		for _, snap := range snaps {
			if !snap.Exists() {
				continue
			}
			var rec coord.FileRecord
			if err := snap.DataTo(&rec); err != nil {
				return nil, fmt.Errorf("files: decode %s: %w", snap.Ref.Path, err)
			}
			out[snap.Ref.ID] = rec
		}
	}
	return out, nil
}

// File implements pipeline.Registry.
func (f *Coordinator) File(ctx context.Context, id string) (coord.FileRecord, error) {
	if err := coord.ValidFileID(id); err != nil {
		return coord.FileRecord{}, err
	}
	opcount.Add(ctx, opcount.FirestoreRead, 1)
	snap, err := f.files.Doc(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return coord.FileRecord{}, fmt.Errorf("file %s: %w", id, coord.ErrNotFound)
	}
	if err != nil {
		return coord.FileRecord{}, fmt.Errorf("read file %s: %w", id, err)
	}
	var rec coord.FileRecord
	if err := snap.DataTo(&rec); err != nil {
		return coord.FileRecord{}, fmt.Errorf("decode file %s: %w", id, err)
	}
	return rec, nil
}

// pendingQuery selects a table's staged files in arrival order.
func (f *Coordinator) pendingQuery(tableID string, limit int) firestore.Query {
	q := f.files.Where("table", "==", tableID).Where("state", "==", string(coord.StateStaged)).OrderBy("arrivalSeq", firestore.Asc)
	if limit > 0 {
		q = q.Limit(limit)
	}
	return q
}

// readFiles decodes every document of the query it iterates.
func readFiles(ctx context.Context, it *firestore.DocumentIterator) ([]coord.FileRecord, error) {
	defer it.Stop()
	var out []coord.FileRecord
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			queried(ctx, len(out))
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var rec coord.FileRecord
		if err := snap.DataTo(&rec); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		out = append(out, rec)
	}
}

// Pending implements pipeline.Registry.
func (f *Coordinator) Pending(ctx context.Context, tableID string, limit int) ([]coord.FileRecord, error) {
	out, err := readFiles(ctx, f.pendingQuery(tableID, limit).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list pending files of %s: %w", tableID, err)
	}
	return out, nil
}

// ListFiles implements pipeline.Registry.
func (f *Coordinator) ListFiles(ctx context.Context, tableID string, state coord.FileState) ([]coord.FileRecord, error) {
	q := f.files.Where("table", "==", tableID)
	if state != "" {
		q = q.Where("state", "==", string(state))
	}
	out, err := readFiles(ctx, q.OrderBy("arrivalSeq", firestore.Asc).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", tableID, err)
	}
	return out, nil
}

// batchRef names a batch record; zero-padding keeps them in seq order.
func (f *Coordinator) batchRef(tableID string, seq int64) *firestore.DocumentRef {
	return f.batches.Doc(fmt.Sprintf("%s__%020d", tableID, seq))
}

// filesTx reads the records of ids inside tx, in the order of ids.
func (f *Coordinator) filesTx(ctx context.Context, tx *firestore.Transaction, ids []string) ([]coord.FileRecord, error) {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = f.files.Doc(id)
	}
	opcount.Add(ctx, opcount.FirestoreRead, int64(len(refs)))
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return nil, fmt.Errorf("read batch files: %w", err)
	}
	out := make([]coord.FileRecord, 0, len(snaps))
	for _, snap := range snaps {
		if !snap.Exists() {
			return nil, fmt.Errorf("batch file %s: %w", snap.Ref.ID, coord.ErrNotFound)
		}
		var rec coord.FileRecord
		if err := snap.DataTo(&rec); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// NextBatch implements pipeline.Batches.
func (f *Coordinator) NextBatch(ctx context.Context, l coord.Lease, tableID string, lim coord.BatchLimits) (coord.Batch, error) {
	if err := coord.ValidTableID(tableID); err != nil {
		return coord.Batch{}, err
	}
	var b coord.Batch
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := f.checkLeaseTx(ctx, tx, l, tableID); err != nil {
			return err
		}
		tref := f.tables.Doc(tableID)
		var t coord.TableDoc
		exists, err := getDoc(ctx, tx, tref, &t)
		if err != nil {
			return err
		}
		if !exists {
			return coord.ErrNoWork
		}
		if t.OpenBatchSeq != 0 {
			files, err := f.filesTx(ctx, tx, t.OpenFiles)
			if err != nil {
				return err
			}
			b = coord.Batch{Table: tableID, Seq: t.OpenBatchSeq, Files: files, Created: t.OpenCreated, Resumed: true}
			return nil
		}
		pending, err := readFiles(ctx, tx.Documents(f.pendingQuery(tableID, lim.MaxFiles())))
		if err != nil {
			return fmt.Errorf("list pending files: %w", err)
		}
		files := coord.SelectBatch(pending, lim)
		if len(files) == 0 {
			return coord.ErrNoWork
		}
		now := f.now()
		b = t.OpenBatch(files, now)
		t.Pending -= int64(len(files))
		for _, rec := range b.Files {
			if err := set(ctx, tx, f.files.Doc(rec.ID), rec); err != nil {
				return err
			}
		}
		bd := coord.BatchDoc{Table: tableID, Seq: b.Seq, FileIDs: t.OpenFiles, State: coord.BatchOpen, Created: now, Files: int64(len(files))}
		if err := set(ctx, tx, f.batchRef(tableID, b.Seq), bd); err != nil {
			return err
		}
		return set(ctx, tx, tref, t)
	})
	if err != nil {
		return coord.Batch{}, fmt.Errorf("next batch of %s: %w", tableID, err)
	}
	return b, nil
}

// CompleteBatch implements pipeline.Batches.
func (f *Coordinator) CompleteBatch(ctx context.Context, l coord.Lease, b coord.Batch, stats coord.BatchStats) error {
	if err := coord.ValidTableID(b.Table); err != nil {
		return err
	}
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := f.checkLeaseTx(ctx, tx, l, b.Table); err != nil {
			return err
		}
		tref := f.tables.Doc(b.Table)
		var t coord.TableDoc
		exists, err := getDoc(ctx, tx, tref, &t)
		if err != nil {
			return err
		}
		if !exists || b.Seq <= 0 || b.Seq > t.LastBatchSeq {
			return fmt.Errorf("batch %d: %w", b.Seq, coord.ErrNotFound)
		}
		if t.OpenBatchSeq != b.Seq {
			return nil // done already: a retried completion
		}
		files, err := f.filesTx(ctx, tx, t.OpenFiles)
		if err != nil {
			return err
		}
		done := t.CompleteBatch(files, stats, f.now(), f.retention)
		for _, rec := range files {
			if err := set(ctx, tx, f.files.Doc(rec.ID), rec); err != nil {
				return err
			}
		}
		if err := set(ctx, tx, f.batchRef(b.Table, b.Seq), done); err != nil {
			return err
		}
		return set(ctx, tx, tref, t)
	})
	if err != nil {
		return fmt.Errorf("complete batch %d of %s: %w", b.Seq, b.Table, err)
	}
	return nil
}

// Status implements pipeline.Status.
func (f *Coordinator) Status(ctx context.Context, tableID string) (coord.TableStatus, error) {
	if err := coord.ValidTableID(tableID); err != nil {
		return coord.TableStatus{}, err
	}
	opcount.Add(ctx, opcount.FirestoreRead, 2)
	snaps, err := f.client.GetAll(ctx, []*firestore.DocumentRef{f.tables.Doc(tableID), f.leases.Doc(tableID)})
	if err != nil {
		return coord.TableStatus{}, fmt.Errorf("status of %s: %w", tableID, err)
	}
	if !snaps[0].Exists() {
		return coord.TableStatus{}, fmt.Errorf("status of %s: %w", tableID, coord.ErrNotFound)
	}
	return f.statusOf(snaps[0], snaps[1])
}

// statusOf decodes a table document and its lease document.
func (f *Coordinator) statusOf(tsnap, lsnap *firestore.DocumentSnapshot) (coord.TableStatus, error) {
	var t coord.TableDoc
	if err := tsnap.DataTo(&t); err != nil {
		return coord.TableStatus{}, fmt.Errorf("decode %s: %w", tsnap.Ref.Path, err)
	}
	var ld coord.LeaseDoc
	if lsnap.Exists() {
		if err := lsnap.DataTo(&ld); err != nil {
			return coord.TableStatus{}, fmt.Errorf("decode %s: %w", lsnap.Ref.Path, err)
		}
	}
	return coord.WithLease(t.Status(), ld, f.now()), nil
}

// Statuses implements pipeline.Status.
func (f *Coordinator) Statuses(ctx context.Context) ([]coord.TableStatus, error) {
	tsnaps, err := f.tables.OrderBy(firestore.DocumentID, firestore.Asc).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	queried(ctx, len(tsnaps))
	if len(tsnaps) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(tsnaps))
	for i, s := range tsnaps {
		refs[i] = f.leases.Doc(s.Ref.ID)
	}
	opcount.Add(ctx, opcount.FirestoreRead, int64(len(refs)))
	lsnaps, err := f.client.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("list tables: read leases: %w", err)
	}
	out := make([]coord.TableStatus, len(tsnaps))
	for i := range tsnaps {
		if out[i], err = f.statusOf(tsnaps[i], lsnaps[i]); err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
	}
	return out, nil
}

// deletion is a document Expire deletes, under its preconditions.
type deletion struct {
	ref      *firestore.DocumentRef
	preconds []firestore.Precondition
}

// Expire implements pipeline.Expirer.
func (f *Coordinator) Expire(ctx context.Context, before time.Time) (int, error) {
	tables, err := f.tables.Documents(ctx).GetAll()
	if err != nil {
		return 0, fmt.Errorf("expire: list tables: %w", err)
	}
	queried(ctx, len(tables))
	lastSeq := map[string]int64{}
	for _, s := range tables {
		var t coord.TableDoc
		if err := s.DataTo(&t); err != nil {
			return 0, fmt.Errorf("expire: decode %s: %w", s.Ref.Path, err)
		}
		lastSeq[s.Ref.ID] = t.LastBatchSeq
	}
	var dels []deletion
	// Only merged and skipped files and done batches have doneAt.
	files, err := f.files.Where("doneAt", "<", before).Select("state", "doneAt").Documents(ctx).GetAll()
	if err != nil {
		return 0, fmt.Errorf("expire: list merged and skipped files: %w", err)
	}
	queried(ctx, len(files))
	for _, s := range files {
		var rec coord.FileRecord
		if err := s.DataTo(&rec); err != nil {
			return 0, fmt.Errorf("expire: decode %s: %w", s.Ref.Path, err)
		}
		if !coord.Expired(rec, before) {
			continue
		}
		// A skipped file may be registered again meanwhile: delete the
		// record only as it was read.
		dels = append(dels, deletion{s.Ref, []firestore.Precondition{firestore.LastUpdateTime(s.UpdateTime)}})
	}
	batches, err := f.batches.Where("doneAt", "<", before).Select("table", "seq").Documents(ctx).GetAll()
	if err != nil {
		return 0, fmt.Errorf("expire: list done batches: %w", err)
	}
	queried(ctx, len(batches))
	for _, s := range batches {
		var bd coord.BatchDoc
		if err := s.DataTo(&bd); err != nil {
			return 0, fmt.Errorf("expire: decode %s: %w", s.Ref.Path, err)
		}
		if bd.Seq == lastSeq[bd.Table] {
			continue // keep each table's latest batch for inspection
		}
		dels = append(dels, deletion{ref: s.Ref}) // a done batch never changes
	}
	if len(dels) == 0 {
		return 0, nil
	}
	opcount.Add(ctx, opcount.FirestoreDelete, int64(len(dels)))
	bw := f.client.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(dels))
	for _, d := range dels {
		job, err := bw.Delete(d.ref, d.preconds...)
		if err != nil {
			bw.End()
			return 0, fmt.Errorf("expire: delete %s: %w", d.ref.Path, err)
		}
		jobs = append(jobs, job)
	}
	bw.End()
	n := 0
	var errs []error
	for i, job := range jobs {
		_, err := job.Results()
		switch {
		case status.Code(err) == codes.FailedPrecondition:
			// Changed since it was read: registered again, so kept.
		case err != nil:
			errs = append(errs, fmt.Errorf("delete %s: %w", dels[i].ref.Path, err))
		default:
			n++
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("expire: %w", errors.Join(errs...))
	}
	return n, nil
}

// Watermark implements pipeline.Watermarks.
func (f *Coordinator) Watermark(ctx context.Context, key string) ([]byte, int64, error) {
	if err := coord.ValidWatermarkKey(key); err != nil {
		return nil, 0, err
	}
	var d coord.WatermarkDoc
	opcount.Add(ctx, opcount.FirestoreRead, 1)
	snap, err := f.watermarks.Doc(coord.WatermarkID(key)).Get(ctx)
	switch {
	case status.Code(err) == codes.NotFound:
		return d.Get(false, key)
	case err != nil:
		return nil, 0, fmt.Errorf("watermark %q: %w", key, err)
	}
	if err := snap.DataTo(&d); err != nil {
		return nil, 0, fmt.Errorf("watermark %q: decode %s: %w", key, snap.Ref.Path, err)
	}
	data, rev, err := d.Get(true, key)
	if err != nil {
		return nil, 0, fmt.Errorf("watermark %q: %w", key, err)
	}
	return data, rev, nil
}

// PutWatermark implements pipeline.Watermarks: the stored revision is
// compared in the transaction that writes.
func (f *Coordinator) PutWatermark(ctx context.Context, key string, data []byte, rev int64) (int64, error) {
	if err := coord.ValidWatermark(key, data, rev); err != nil {
		return 0, err
	}
	ref := f.watermarks.Doc(coord.WatermarkID(key))
	var next coord.WatermarkDoc
	err := f.run(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var cur coord.WatermarkDoc
		exists, err := getDoc(ctx, tx, ref, &cur)
		if err != nil {
			return err
		}
		if next, err = cur.Put(exists, key, data, rev, f.now()); err != nil {
			return err
		}
		return set(ctx, tx, ref, next)
	})
	if err != nil {
		return 0, fmt.Errorf("put watermark %q at revision %d: %w", key, rev, err)
	}
	return next.Rev, nil
}

// ListWatermarks implements pipeline.Watermarks. Keys with the prefix are
// contiguous in key order, so the query starts at the prefix and stops at
// the first key without it.
func (f *Coordinator) ListWatermarks(ctx context.Context, prefix string, fn func(key string, data []byte) error) error {
	q := f.watermarks.OrderBy("key", firestore.Asc)
	if prefix != "" {
		q = f.watermarks.Where("key", ">=", prefix).OrderBy("key", firestore.Asc)
	}
	it := q.Documents(ctx)
	defer it.Stop()
	read := 0
	defer func() { queried(ctx, read) }()
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list watermarks: %w", err)
		}
		read++
		var d coord.WatermarkDoc
		if err := snap.DataTo(&d); err != nil {
			return fmt.Errorf("list watermarks: decode %s: %w", snap.Ref.Path, err)
		}
		if !strings.HasPrefix(d.Key, prefix) {
			return nil
		}
		if err := fn(d.Key, d.Data); err != nil {
			return err
		}
	}
}
