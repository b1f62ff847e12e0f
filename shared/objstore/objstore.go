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
