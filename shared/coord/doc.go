// Package coord coordinates the pipeline's work on each table: a lease with a
// fencing token so that one merge runs per table at a time, a registry of
// staged files (idempotent per source object), merge batches with sequence
// numbers, per-table status, and the watermarks of the reconcile.
//
// The use cases ask for each part through an interface of their own
// (pipeline.Leaser, Registry, Batches, Status, Expirer, Watermarks), which
// documents its methods. Two backends provide them all, safe for concurrent
// use, also from several processes sharing the same backing store: Local
// (NewLocal) over an objstore.Store for the embedded mode, storing JSON
// documents under _dsdelta/coord/ in the lake, and Firestore for the cloud,
// in package firestorecoord so that this package links no cloud SDK. Both
// apply the same rules to the same documents (state.go) and differ only in
// how they read and write atomically. One conformance suite (package
// coordtest) runs against both so the embedded mode cannot drift from the
// cloud mode.
//
// # Exactly once
//
// A source object is identified by (bucket, name, generation); RegisterFile
// is idempotent on that identity, so a re-delivered notification is a no-op.
// NextBatch forms a batch under the lease and records it (with its sequence
// number and files) before the merge starts any work; until CompleteBatch
// closes it, every NextBatch returns the same open batch — same seq, same
// files — so a crashed or timed-out merge resumes exactly the batch it was
// doing. The merge stamps every Delta commit of the batch with
// txn{appId: "dsdelta/<table>", version: seq} and skips a table whose
// snapshot already holds that version; CompleteBatch is called only after all
// commits succeeded and marks the files merged. Records of merged files must
// be kept (Options.Retention) longer than notifications can be re-delivered,
// or a very late duplicate would be registered and merged again.
//
// A file that staging found nothing to merge in (no events, or a table the
// configuration excludes) is recorded as skipped (Skip), so that the
// reconcile, which lists the source bucket for files whose notification
// never arrived (Files tells it which are known), does not stage it again.
// A skipped record is no work: never pending, batched or counted; it
// expires like a merged one, and registering the file stages it again.
//
// A file in an open batch may be quarantined by the merge (for example for an
// incompatible schema change); the open batch keeps the file, returned with
// State quarantined. The merge processes only the files of a batch whose
// State is batched; because the state is stored, a resumed merge skips the
// same files and commits the same content.
//
// # Lease
//
// A lease is held by a holder (a unique id per worker) until it expires,
// is renewed or released. The local backend also records the holder's
// process (see Process) and takes over, at once, the lease of a process
// on the same host that no longer exists; the takeover is an acquisition
// like any other, so the token grows and the gone holder's lease is lost. Every acquisition gets a fencing token that is
// strictly greater than every token handed out before for the table, and a
// lease holds only while its token is the current one and it has not
// expired: an expired lease is lost even when nobody took it over yet.
// NextBatch and CompleteBatch check the token in the same atomic step that
// writes, so a holder whose lease was lost cannot form or close batches.
// The lease is for efficiency; Delta correctness rests on put-if-absent
// commits and txn versions, so a stale holder can waste work but not corrupt
// a table. Expiry is judged with the coordinator's clock (Options.Now), so
// TTLs must be large against clock skew between workers.
//
// # Watermarks
//
// The reconcile keeps its progress through each source folder in a
// watermark: a document opaque to the coordinator (at most
// MaxWatermarkBytes) under a key such as "gs://bucket/prefix/folder",
// stored under WatermarkID(key) with the key inside: in watermarks/ by the
// local backend, in the dsdelta_watermarks collection by Firestore. Each put
// compares the revision the writer read (PutWatermark returns ErrConflict
// when another writer stored first), so two reconciles never both advance
// a folder from the same point. Watermarks never expire: neither Expire nor
// a TTL policy touches them.
//
// # No lost wake-ups
//
// A merge that releases a table must check Pending afterwards (or re-publish
// a wake-up): a file registered after the merge's last NextBatch but before
// the release would otherwise wait for the next notification.
package coord
