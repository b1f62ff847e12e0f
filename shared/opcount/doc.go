// Package opcount counts the billable calls a run makes to the services
// dsdelta pays per call for: Cloud Storage class A operations (writes,
// copies, lists) and class B operations (reads, metadata reads), Firestore
// document reads, writes and deletes, and Pub/Sub publishes.
//
// A Counter rides in the context: a use case starts one for its run (a
// staged file, a merged batch) with Start, the backends add to whatever
// counter the context carries (none: nothing is counted), and the run logs
// its Counts as slog attributes. A counter started inside another adds to
// both, so a merge's total includes its batches'. The backends count what a
// call costs on the cloud service whatever backend serves it, so the local
// mode reports what the same work would cost in the cloud.
package opcount
