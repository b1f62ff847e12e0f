package coord

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds the documents every backend stores and the rules that
// change them, as functions over documents, so that backends differ only in
// how they read and write atomically. They are exported for the backends in
// packages of their own (firestorecoord); callers use a backend's methods,
// which apply a rule and write its result in one atomic step.

// LeaseDoc is the stored lease of a table. It outlives releases so that the
// token keeps growing across acquisitions.
type LeaseDoc struct {
	Holder  string    `firestore:"holder" json:"holder,omitempty"`
	Token   int64     `firestore:"token" json:"token"`
	Expires time.Time `firestore:"expires,omitempty" json:"expires,omitzero"`
	// Process is the holder's process, recorded by the local backend only:
	// leases of cloud functions simply expire.
	Process *Process `firestore:"-" json:"process,omitempty"`
}

// Live reports whether somebody holds the lease at now.
func (d LeaseDoc) Live(now time.Time) bool {
	return d.Holder != "" && now.Before(d.Expires)
}

// Acquire returns the lease document after holder takes the lease.
func (d LeaseDoc) Acquire(tableID, holder string, ttl time.Duration, now time.Time) (LeaseDoc, Lease, error) {
	if d.Live(now) && d.Holder != holder {
		return d, Lease{}, fmt.Errorf("held by %s%s until %s: %w",
			d.Holder, d.process(), d.Expires.UTC().Format(time.RFC3339Nano), ErrLeaseHeld)
	}
	next := LeaseDoc{Holder: holder, Token: d.Token + 1, Expires: now.Add(ttl)}
	return next, Lease{Table: tableID, Holder: holder, Token: next.Token, Expires: next.Expires}, nil
}

// process describes the holder's process for messages: " (process
// host/pid)", or nothing when it is not recorded.
func (d LeaseDoc) process() string {
	if d.Process == nil {
		return ""
	}
	return " (process " + d.Process.String() + ")"
}

// Check returns nil when l is the current, unexpired lease.
func (d LeaseDoc) Check(l Lease, now time.Time) error {
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

// Renew returns the lease document with l extended to now+ttl.
func (d LeaseDoc) Renew(l Lease, ttl time.Duration, now time.Time) (LeaseDoc, Lease, error) {
	if err := d.Check(l, now); err != nil {
		return d, Lease{}, err
	}
	d.Expires = now.Add(ttl)
	l.Expires = d.Expires
	return d, l, nil
}

// Release returns the lease document with l given up. A lease that merely
// expired can still be released; one taken over cannot.
func (d LeaseDoc) Release(l Lease) (LeaseDoc, error) {
	if d.Token != l.Token || d.Holder != l.Holder {
		return d, fmt.Errorf("release lease on %s with token %d: now token %d held by %q: %w",
			l.Table, l.Token, d.Token, d.Holder, ErrLeaseLost)
	}
	return LeaseDoc{Token: d.Token}, nil
}

// TableDoc is the per-table state: counters that hand out arrival and batch
// sequence numbers, the open batch, and the status. The batch counter lives
// here, not in batch records, so batch records can expire freely.
type TableDoc struct {
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
	Lease LeaseDoc `firestore:"-" json:"lease"`
}

// Status returns the status fields the document holds.
func (t *TableDoc) Status() TableStatus {
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

// WithLease adds a live lease to a status.
func WithLease(s TableStatus, d LeaseDoc, now time.Time) TableStatus {
	if d.Live(now) {
		s.LeaseHolder, s.LeaseExpires = d.Holder, d.Expires
		if d.Process != nil {
			s.LeaseProcess = d.Process.String()
		}
	}
	return s
}

// OpenBatch records a new batch of files in t and returns it.
func (t *TableDoc) OpenBatch(files []FileRecord, now time.Time) Batch {
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

// BatchState is the life-cycle state of a batch record.
type BatchState string

// Batch states: a batch is open until CompleteBatch, then done.
const (
	BatchOpen BatchState = "open"
	BatchDone BatchState = "done"
)

// BatchDoc is the record of a batch, kept for inspection and expired after
// Retention. It is not needed for exactly-once: the open batch is in the
// table document and the sequence counter too.
type BatchDoc struct {
	Table    string     `firestore:"table" json:"table"`
	Seq      int64      `firestore:"seq" json:"seq"`
	FileIDs  []string   `firestore:"fileIds" json:"fileIds"`
	State    BatchState `firestore:"state" json:"state"`
	Created  time.Time  `firestore:"created" json:"created"`
	DoneAt   time.Time  `firestore:"doneAt,omitempty" json:"doneAt,omitzero"`
	ExpireAt time.Time  `firestore:"expireAt,omitempty" json:"expireAt,omitzero"`
	Files    int64      `firestore:"files" json:"files"`
	Stats    BatchStats `firestore:"stats" json:"stats"`
}

// CompleteBatch closes t's open batch: files still batched in it become
// merged (marked in place), the status advances, and the done batch record
// is returned.
func (t *TableDoc) CompleteBatch(files []FileRecord, stats BatchStats, now time.Time, retention time.Duration) BatchDoc {
	seq := t.OpenBatchSeq
	done := BatchDoc{
		Table: t.Table, Seq: seq, FileIDs: t.OpenFiles, State: BatchDone,
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

// SelectBatch takes files from pending (in arrival order) up to lim; the
// first file is always taken so that a file larger than a limit cannot
// block the table.
func SelectBatch(pending []FileRecord, lim BatchLimits) []FileRecord {
	maxFiles := lim.MaxFiles()
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

// MaxFiles returns lim.Files capped to (0, MaxBatchFiles]: the most files a
// batch formed under lim takes.
func (lim BatchLimits) MaxFiles() int {
	if lim.Files <= 0 || lim.Files > MaxBatchFiles {
		return MaxBatchFiles
	}
	return lim.Files
}

// NewRecord fills the coordinator-owned fields of a newly staged record.
func NewRecord(f FileRecord, arrival int64, now time.Time) FileRecord {
	f.ID = FileID(f.Bucket, f.Name, f.Generation)
	f.State = StateStaged
	f.ArrivalSeq = arrival
	f.BatchSeq = 0
	f.Reason, f.Record = "", ""
	f.StagedAt = now
	f.DoneAt, f.ExpireAt = time.Time{}, time.Time{}
	return f
}

// Stages reports whether RegisterFile stages a file whose stored record is
// cur (exists false: there is none): an unknown file, a quarantined one (a
// replay after a fix) or a skipped one (after the configuration includes
// its table, say). Any other record is returned unchanged.
func Stages(cur FileRecord, exists bool) bool {
	return !exists || cur.State == StateQuarantined || cur.State == StateSkipped
}

// Tracked reports whether a stored record takes part in its table's work:
// staged, batched, merged or quarantined. A skipped record does not, so
// RegisterFile and Quarantine record its file anew, with a new arrival
// number and the caller's table, as if it were unknown.
func Tracked(cur FileRecord, exists bool) bool {
	return exists && cur.State != StateSkipped
}

// QuarantineRecord returns the record after quarantining: cur when the file
// was known (exists, see Tracked), else f as a new record with the given
// arrival number.
func QuarantineRecord(cur FileRecord, exists bool, f FileRecord, reason string, arrival int64, now time.Time) (FileRecord, error) {
	if Tracked(cur, exists) {
		if cur.State == StateMerged {
			return cur, fmt.Errorf("quarantine %s (%s): already merged in batch %d: %w",
				cur.Name, cur.ID, cur.BatchSeq, ErrInvalidState)
		}
		cur.State, cur.Reason, cur.Record = StateQuarantined, reason, f.Record
		return cur, nil
	}
	rec := NewRecord(f, arrival, now)
	rec.State, rec.Reason, rec.Record = StateQuarantined, reason, f.Record
	return rec, nil
}

// SkipRecord returns the record of a file that staging found nothing to
// merge in, skipped for reason: done now and expiring after retention, like
// a merged file. It has no arrival number: it never enters the work queue.
func SkipRecord(f FileRecord, reason string, now time.Time, retention time.Duration) FileRecord {
	rec := NewRecord(f, 0, now)
	rec.State, rec.Reason = StateSkipped, reason
	rec.DoneAt, rec.ExpireAt = now, now.Add(retention)
	return rec
}

// Expired reports whether Expire deletes f at the cutoff before: a merged
// or skipped file done before it. Staged, batched and quarantined records
// never expire.
func Expired(f FileRecord, before time.Time) bool {
	return (f.State == StateMerged || f.State == StateSkipped) && !f.DoneAt.IsZero() && f.DoneAt.Before(before)
}

// WatermarkDoc is a stored watermark: a document opaque to the coordinator,
// kept under WatermarkID(Key) with a revision that PutWatermark compares.
// It never expires.
type WatermarkDoc struct {
	Key     string    `firestore:"key" json:"key"`
	Data    []byte    `firestore:"data" json:"data,omitempty"`
	Rev     int64     `firestore:"rev" json:"rev"`
	Updated time.Time `firestore:"updated,omitempty" json:"updated,omitzero"`
}

// Get returns the data and revision of the stored document d of key (exists
// false: there is none): nil and 0 when there is none.
func (d WatermarkDoc) Get(exists bool, key string) ([]byte, int64, error) {
	if !exists {
		return nil, 0, nil
	}
	if d.Key != key {
		return nil, 0, fmt.Errorf("its document %s holds another key, %q", WatermarkID(key), d.Key)
	}
	return d.Data, d.Rev, nil
}

// Put returns the document after storing data under key when the stored
// revision (0 when exists is false) is still rev: the next revision, one
// more than the stored one. Otherwise it returns ErrConflict.
func (d WatermarkDoc) Put(exists bool, key string, data []byte, rev int64, now time.Time) (WatermarkDoc, error) {
	_, stored, err := d.Get(exists, key)
	if err != nil {
		return d, err
	}
	if stored != rev {
		return d, fmt.Errorf("stored revision is %d: %w", stored, ErrConflict)
	}
	return WatermarkDoc{Key: key, Data: data, Rev: stored + 1, Updated: now}, nil
}

// ValidWatermarkKey rejects keys that no query can select: empty, longer
// than MaxWatermarkKeyBytes, or not UTF-8 (Firestore strings are UTF-8).
func ValidWatermarkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("watermark key is empty")
	case len(key) > MaxWatermarkKeyBytes:
		return fmt.Errorf("watermark key of %d bytes is longer than %d", len(key), MaxWatermarkKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("watermark key %q is not UTF-8", key)
	}
	return nil
}

// ValidWatermark checks what PutWatermark needs: a valid key, at most
// MaxWatermarkBytes of data and a revision that is not negative.
func ValidWatermark(key string, data []byte, rev int64) error {
	if err := ValidWatermarkKey(key); err != nil {
		return err
	}
	if len(data) > MaxWatermarkBytes {
		return fmt.Errorf("watermark %q: document of %d bytes is larger than %d", key, len(data), MaxWatermarkBytes)
	}
	if rev < 0 {
		return fmt.Errorf("watermark %q: revision %d is negative", key, rev)
	}
	return nil
}

// ValidTableID rejects table ids that cannot name a document or object.
func ValidTableID(tableID string) error {
	if tableID == "" || tableID == "." || tableID == ".." || strings.ContainsAny(tableID, "/\\\x00\r\n") ||
		(strings.HasPrefix(tableID, "__") && strings.HasSuffix(tableID, "__")) {
		return fmt.Errorf("invalid table id %q", tableID)
	}
	return nil
}

// ValidFile checks what RegisterFile, Quarantine and Skip need.
func ValidFile(f FileRecord) error {
	if err := ValidTableID(f.Table); err != nil {
		return err
	}
	if f.Name == "" {
		return fmt.Errorf("file of table %s has no name", f.Table)
	}
	return nil
}

// ValidLease rejects leases no coordinator can have handed out, so that
// they fail before naming a document.
func ValidLease(l Lease) error {
	if err := ValidTableID(l.Table); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// ValidAcquire rejects an empty holder (an empty holder marks a free
// lease) and lease durations that would expire at once.
func ValidAcquire(holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("lease holder is empty")
	}
	return ValidTTL(ttl)
}

// ValidTTL rejects lease durations that would expire at once.
func ValidTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("lease ttl %s is not positive", ttl)
	}
	return nil
}

// ValidFileID rejects file ids that cannot name a document or object.
func ValidFileID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\\.") {
		return fmt.Errorf("invalid file id %q", id)
	}
	return nil
}
