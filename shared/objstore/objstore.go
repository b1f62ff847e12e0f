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
// Backends: NewLocal, NewMemory and package gcsstore; Open picks one from a
// URL, Sub views a prefix of a store, NewReaderAt adapts a store to
// io.ReaderAt.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNotExist is returned when an object does not exist.
	ErrNotExist = errors.New("object does not exist")
	// ErrExists is returned by a put-if-absent write when the object exists.
	ErrExists = errors.New("object already exists")
	// ErrPrecondition is returned when a generation precondition fails.
	ErrPrecondition = errors.New("object generation precondition failed")
	// ErrInvalidName is returned for names that could escape the store root.
	ErrInvalidName = errors.New("invalid object name")
	// ErrClosed is returned by every call on a store after its Close.
	ErrClosed = errors.New("store is closed")
)

// Info describes a stored object.
type Info struct {
	Name       string    // relative to the store root, '/'-separated
	Size       int64     // bytes
	Generation int64     // changes on every write of the name; > 0
	Updated    time.Time // last write
}

// WriteOptions are preconditions for Write.
type WriteOptions struct {
	// IfAbsent makes the write an atomic create: it fails with ErrExists when
	// the name exists.
	IfAbsent bool
	// IfGenerationMatch, when > 0, makes the write fail with ErrPrecondition
	// unless the object's current generation equals it.
	IfGenerationMatch int64
	// ContentType is advisory metadata (GCS); backends may ignore it.
	ContentType string
}

// Store is a bucket, or a prefix of one. Names are relative, '/'-separated,
// never start with '/', never contain "." or ".." segments.
type Store interface {
	// NewReader reads length bytes from offset; length < 0 reads to the end.
	NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error)
	// Stat returns the object's Info or ErrNotExist.
	Stat(ctx context.Context, name string) (Info, error)
	// Write stores the whole content of r under name, atomically: readers see
	// the old object or the new one, never a part.
	Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error)
	// List calls fn for every object whose name starts with prefix and is
	// lexically >= startAt, in lexical (byte) order. Returning an error from
	// fn stops the listing with that error.
	List(ctx context.Context, prefix, startAt string, fn func(Info) error) error
	// Delete removes the object; deleting a missing object returns ErrNotExist.
	Delete(ctx context.Context, name string) error
	// URL names the store root for messages, e.g. "gs://bucket/prefix" or "/data/lake".
	URL() string
	// Close releases what the store holds (a client it opened itself).
	// Whoever opened a store closes it; a view made by Sub needs no
	// closing.
	Close() error
}
