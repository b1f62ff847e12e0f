package coord

import (
	"fmt"
	"strings"
	"time"
)

// This file holds the backend-independent rules as functions over documents,
// so that Firestore and Local differ only in how they read and write
// atomically.

// leaseDoc is the stored lease of a table. It outlives releases so that the
// token keeps growing across acquisitions.
type leaseDoc struct {
	Holder  string    `firestore:"holder" json:"holder,omitempty"`
	Token   int64     `firestore:"token" json:"token"`
	Expires time.Time `firestore:"expires,omitempty" json:"expires,omitzero"`
	// Process is the holder's process, recorded by the local backend only:
	// leases of cloud functions simply expire.
	Process *Process `firestore:"-" json:"process,omitempty"`
}

// live reports whether somebody holds the lease at now.
func (d leaseDoc) live(now time.Time) bool {
	return d.Holder != "" && now.Before(d.Expires)
}

// acquire returns the lease document after holder takes the lease.
func (d leaseDoc) acquire(table, holder string, ttl time.Duration, now time.Time) (leaseDoc, Lease, error) {
	if d.live(now) && d.Holder != holder {
		return d, Lease{}, fmt.Errorf("held by %s%s until %s: %w",
			d.Holder, d.process(), d.Expires.UTC().Format(time.RFC3339Nano), ErrLeaseHeld)
	}
	next := leaseDoc{Holder: holder, Token: d.Token + 1, Expires: now.Add(ttl)}
	return next, Lease{Table: table, Holder: holder, Token: next.Token, Expires: next.Expires}, nil
}

// process describes the holder's process for messages: " (process
// host/pid)", or nothing when it is not recorded.
func (d leaseDoc) process() string {
	if d.Process == nil {
		return ""
	}
	return " (process " + d.Process.String() + ")"
}

// check returns nil when l is the current, unexpired lease.
func (d leaseDoc) check(l Lease, now time.Time) error {
	switch {
	case d.Token != l.Token || d.Holder != l.Holder:
		return fmt.Errorf("lease on %s with token %d: now token %d held by %q: %w",
			l.Table, l.Token, d.Token, d.Holder, ErrLeaseLost)
	case !now.Before(d.Expires):
		return fmt.Errorf("lease on %s with token %d: expired at %s: %w",
			l.Table, l.Token, d.Expires.UTC().Format(time.RFC3339Nano), ErrLeaseLost)
	}
	return nil
}

// renew returns the lease document with l extended to now+ttl.
func (d leaseDoc) renew(l Lease, ttl time.Duration, now time.Time) (leaseDoc, Lease, error) {
	if err := d.check(l, now); err != nil {
		return d, Lease{}, err
	}
	d.Expires = now.Add(ttl)
	l.Expires = d.Expires
	return d, l, nil
}

// release returns the lease document with l given up. A lease that merely
// expired can still be released; one taken over cannot.
func (d leaseDoc) release(l Lease) (leaseDoc, error) {
	if d.Token != l.Token || d.Holder != l.Holder {
		return d, fmt.Errorf("release lease on %s with token %d: now token %d held by %q: %w",
			l.Table, l.Token, d.Token, d.Holder, ErrLeaseLost)
	}
	return leaseDoc{Token: d.Token}, nil
}

// tableDoc is the per-table state: counters that hand out arrival and batch
// sequence numbers, the open batch, and the status. The batch counter lives
// here, not in batch records, so batch records can expire freely.
type tableDoc struct {
	Table          string    `firestore:"table" json:"table"`
	LastArrivalSeq int64     `firestore:"lastArrivalSeq" json:"lastArrivalSeq"`
	LastBatchSeq   int64     `firestore:"lastBatchSeq" json:"lastBatchSeq"`
	OpenBatchSeq   int64     `firestore:"openBatchSeq" json:"openBatchSeq,omitempty"`
	OpenFiles      []string  `firestore:"openFiles" json:"openFiles,omitempty"`
	OpenCreated    time.Time `firestore:"openCreated,omitempty" json:"openCreated,omitzero"`
	// OpenArrival is LastArrivalSeq when the open batch was formed: a file
	// of the batch that was quarantined and then registered again has a
	// later arrival and is no longer part of the batch.
	OpenArrival int64 `firestore:"openArrival" json:"openArrival,omitempty"`
	// Pending and Quarantined are maintained by Firestore transactions; the
	// local backend counts records instead.
	Pending        int64     `firestore:"pending" json:"-"`
	Quarantined    int64     `firestore:"quarantined" json:"-"`
	LastSourceTime time.Time `firestore:"lastSourceTime,omitempty" json:"lastSourceTime,omitzero"`
	LastCommitTime time.Time `firestore:"lastCommitTime,omitempty" json:"lastCommitTime,omitzero"`
	StateVersion   int64     `firestore:"stateVersion" json:"stateVersion"`
	HistoryVersion int64     `firestore:"historyVersion" json:"historyVersion"`
	Batches        int64     `firestore:"batches" json:"batches"`
	Files          int64     `firestore:"files" json:"files"`
	Events         int64     `firestore:"events" json:"events"`
	Inserted       int64     `firestore:"inserted" json:"inserted"`
	Updated        int64     `firestore:"updated" json:"updated"`
	Deleted        int64     `firestore:"deleted" json:"deleted"`
	Stale          int64     `firestore:"stale" json:"stale"`
	// Lease is used by the local backend only, which keeps the lease in the
	// table document so that checking the token and writing are one
	// compare-and-swap. Firestore keeps leases in their own collection.
	Lease leaseDoc `firestore:"-" json:"lease"`
}

// status returns the status fields the document holds.
func (t *tableDoc) status() TableStatus {
	return TableStatus{
		Table:          t.Table,
		LastSourceTime: t.LastSourceTime,
		LastCommitTime: t.LastCommitTime,
		Pending:        t.Pending,
		Quarantined:    t.Quarantined,
		StateVersion:   t.StateVersion,
		HistoryVersion: t.HistoryVersion,
		LastBatchSeq:   t.LastBatchSeq,
		OpenBatchSeq:   t.OpenBatchSeq,
		LastArrivalSeq: t.LastArrivalSeq,
		Batches:        t.Batches,
		Files:          t.Files,
		Events:         t.Events,
		Inserted:       t.Inserted,
		Updated:        t.Updated,
		Deleted:        t.Deleted,
		Stale:          t.Stale,
	}
}

// withLease adds a live lease to a status.
func withLease(s TableStatus, d leaseDoc, now time.Time) TableStatus {
	if d.live(now) {
		s.LeaseHolder, s.LeaseExpires = d.Holder, d.Expires
		if d.Process != nil {
			s.LeaseProcess = d.Process.String()
		}
	}
	return s
}

// openBatch records a new batch of files in t and returns it.
func (t *tableDoc) openBatch(files []FileRecord, now time.Time) Batch {
	t.LastBatchSeq++
	t.OpenBatchSeq = t.LastBatchSeq
	t.OpenCreated = now
	t.OpenArrival = t.LastArrivalSeq
	t.OpenFiles = make([]string, len(files))
	for i := range files {
		files[i].State = StateBatched
		files[i].BatchSeq = t.OpenBatchSeq
		t.OpenFiles[i] = files[i].ID
	}
	return Batch{Table: t.Table, Seq: t.OpenBatchSeq, Files: files, Created: now}
}

// batchState is the life-cycle state of a batch record.
type batchState string

const (
	batchOpen batchState = "open"
	batchDone batchState = "done"
)

// batchDoc is the record of a batch, kept for inspection and expired after
// Retention. It is not needed for exactly-once: the open batch is in the
// table document and the sequence counter too.
type batchDoc struct {
	Table    string     `firestore:"table" json:"table"`
	Seq      int64      `firestore:"seq" json:"seq"`
	FileIDs  []string   `firestore:"fileIds" json:"fileIds"`
	State    batchState `firestore:"state" json:"state"`
	Created  time.Time  `firestore:"created" json:"created"`
	DoneAt   time.Time  `firestore:"doneAt,omitempty" json:"doneAt,omitzero"`
	ExpireAt time.Time  `firestore:"expireAt,omitempty" json:"expireAt,omitzero"`
	Files    int64      `firestore:"files" json:"files"`
	Stats    BatchStats `firestore:"stats" json:"stats"`
}

// completeBatch closes t's open batch: files still batched in it become
// merged (marked in place), the status advances, and the done batch record
// is returned.
func (t *tableDoc) completeBatch(files []FileRecord, stats BatchStats, now time.Time, retention time.Duration) batchDoc {
	seq := t.OpenBatchSeq
	done := batchDoc{
		Table: t.Table, Seq: seq, FileIDs: t.OpenFiles, State: batchDone,
		Created: t.OpenCreated, DoneAt: now, ExpireAt: now.Add(retention), Stats: stats,
	}
	for i := range files {
		f := &files[i]
		if !mergeFile(f, seq, now, retention) {
			continue // quarantined during the merge, or not this batch's
		}
		done.Files++
		t.Events += f.Events
		if f.MaxSourceTime.After(t.LastSourceTime) {
			t.LastSourceTime = f.MaxSourceTime
		}
	}
	committed := stats.CommittedAt
	if committed.IsZero() {
		committed = now
	}
	if committed.After(t.LastCommitTime) {
		t.LastCommitTime = committed
	}
	// A batch whose files were all quarantined commits nothing and reports
	// zero versions; keep the versions of the last real commit.
	t.StateVersion = max(t.StateVersion, stats.StateVersion)
	t.HistoryVersion = max(t.HistoryVersion, stats.HistoryVersion)
	t.Batches++
	t.Files += done.Files
	t.Inserted += stats.Inserted
	t.Updated += stats.Updated
	t.Deleted += stats.Deleted
	t.Stale += stats.Stale
	t.OpenBatchSeq, t.OpenFiles, t.OpenCreated, t.OpenArrival = 0, nil, time.Time{}, 0
	return done
}

// mergeFile marks f merged by batch seq and reports whether f counts as
// merged by it. A file the local backend marked merged before it closed the
// batch counts too, and keeps its DoneAt.
func mergeFile(f *FileRecord, seq int64, now time.Time, retention time.Duration) bool {
	if f.BatchSeq != seq {
		return false
	}
	switch f.State {
	case StateMerged:
		return true
	case StateStaged, StateBatched:
		f.State = StateMerged
		f.DoneAt = now
		f.ExpireAt = now.Add(retention)
		return true
	}
	return false
}

// selectBatch takes files from pending (in arrival order) up to lim; the
// first file is always taken so that a file larger than a limit cannot
// block the table.
func selectBatch(pending []FileRecord, lim BatchLimits) []FileRecord {
	maxFiles := batchLimit(lim.Files)
	var out []FileRecord
	var bytes, events, source int64
	for _, f := range pending {
		if len(out) >= maxFiles {
			break
		}
		if len(out) > 0 && (passes(bytes+f.Size, lim.Bytes) || passes(events+f.Events, lim.Events) ||
			passes(source+f.SourceBytes, lim.SourceBytes)) {
			break
		}
		out = append(out, f)
		bytes += f.Size
		events += f.Events
		source += f.SourceBytes
	}
	return out
}

// passes reports whether total is over limit, where limit <= 0 is none.
func passes(total, limit int64) bool {
	return limit > 0 && total > limit
}

// batchLimit caps a requested batch size to (0, MaxBatchFiles].
func batchLimit(maxFiles int) int {
	if maxFiles <= 0 || maxFiles > MaxBatchFiles {
		return MaxBatchFiles
	}
	return maxFiles
}

// newRecord fills the coordinator-owned fields of a newly staged record.
func newRecord(f FileRecord, arrival int64, now time.Time) FileRecord {
	f.ID = FileID(f.Bucket, f.Name, f.Generation)
	f.State = StateStaged
	f.ArrivalSeq = arrival
	f.BatchSeq = 0
	f.Reason, f.Record = "", ""
	f.StagedAt = now
	f.DoneAt, f.ExpireAt = time.Time{}, time.Time{}
	return f
}

// quarantined returns the record after quarantining: cur when the file was
// known (exists), else f as a new record with the given arrival number.
func quarantined(cur FileRecord, exists bool, f FileRecord, reason string, arrival int64, now time.Time) (FileRecord, error) {
	if exists {
		if cur.State == StateMerged {
			return cur, fmt.Errorf("quarantine %s (%s): already merged in batch %d: %w",
				cur.Name, cur.ID, cur.BatchSeq, ErrInvalidState)
		}
		cur.State, cur.Reason, cur.Record = StateQuarantined, reason, f.Record
		return cur, nil
	}
	rec := newRecord(f, arrival, now)
	rec.State, rec.Reason, rec.Record = StateQuarantined, reason, f.Record
	return rec, nil
}

// validateTable rejects table ids that cannot name a document or object.
func validateTable(table string) error {
	if table == "" || table == "." || table == ".." || strings.ContainsAny(table, "/\\\x00\r\n") ||
		(strings.HasPrefix(table, "__") && strings.HasSuffix(table, "__")) {
		return fmt.Errorf("invalid table id %q", table)
	}
	return nil
}

// validateFile checks what RegisterFile and Quarantine need.
func validateFile(f FileRecord) error {
	if err := validateTable(f.Table); err != nil {
		return err
	}
	if f.Name == "" {
		return fmt.Errorf("file of table %s has no name", f.Table)
	}
	return nil
}

// validateLease rejects leases no coordinator can have handed out, so that
// they fail before naming a document.
func validateLease(l Lease) error {
	if err := validateTable(l.Table); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// validateAcquire rejects an empty holder (an empty holder marks a free
// lease) and lease durations that would expire at once.
func validateAcquire(holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("lease holder is empty")
	}
	return validateTTL(ttl)
}

// validateTTL rejects lease durations that would expire at once.
func validateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("lease ttl %s is not positive", ttl)
	}
	return nil
}

// validateID rejects file ids that cannot name a document or object.
func validateID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\\.") {
		return fmt.Errorf("invalid file id %q", id)
	}
	return nil
}
