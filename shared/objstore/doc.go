// Package objstore is the object-store abstraction every other package writes
// through: a flat namespace of immutable-ish objects with ranged reads,
// atomic create (put-if-absent), lexical listing and generations.
//
// Delta commits rely on PutIfAbsent being atomic: exactly one of any number of
// concurrent creators of a name succeeds. Every backend (GCS, local directory,
// memory) runs the same conformance suite so the embedded mode cannot drift
// from the cloud mode.
//
// The package follows the Go CDK's driver model: a backend implements the
// narrow Driver interface and is used through Bucket, the portable Store that
// checks names, ranges, write options, contexts and closed handles once, and
// names the operation and the object in every error, for every backend alike.
// Backends register a URL scheme with Register from their package's init, and
// Open looks the scheme up: the local-directory (file:// and plain paths) and
// memory (mem://) backends are built in; GCS (gs://) lives in package
// gcsstore, so that a program which does not import it never links the cloud
// client.
//
// Semantics every backend shares (checked by package objstoretest):
//
//   - Names are checked by ValidName; an invalid name fails with
//     ErrInvalidName before any I/O, so no name can reach outside the root.
//   - A read from an offset at or past the end of an object is empty, not an
//     error; a length past the end is cut at the end; a negative offset is an
//     error.
//   - IfGenerationMatch on a missing object fails with ErrPrecondition (as
//     GCS does); IfAbsent together with IfGenerationMatch is an error.
//   - A write whose source fails stores nothing and leaves any previous
//     object unchanged.
//   - A put-if-absent that fails with ErrExists may, on GCS, have been
//     preceded by a lost-response attempt of the same call that succeeded:
//     callers that must know whether they won compare the stored content with
//     what they wrote (see gcsstore).
//   - After Close every call fails with ErrClosed.
//
// Bucket also counts each call in the context's opcount.Counter as Cloud
// Storage bills it, whatever the backend: a write or a copy is a class A
// operation, a read or a stat class B, a listing class A per page of 1,000
// objects; deletes are free.
//
// Backends: NewLocal, NewMemory and package gcsstore; Open picks one from a
// URL, Sub views a prefix of a store, NewReaderAt adapts a store to
// io.ReaderAt.
package objstore
