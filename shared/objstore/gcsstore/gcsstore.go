package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Scheme is the URL scheme this package registers: gs://bucket[/prefix].
const Scheme = "gs"

func init() { objstore.Register(Scheme, openURL) }

// New returns a store on bucket under prefix ("" for the whole bucket)
// using client, which the caller keeps owning: closing the store leaves the
// client open. It does no I/O: a missing bucket shows up on the first call.
func New(client *storage.Client, bucket, prefix string) *objstore.Bucket {
	return objstore.NewBucket(newDriver(client, bucket, prefix, false))
}

// Open returns a store on bucket under prefix with a client of its own,
// built from the environment: Application Default Credentials, or the
// emulator named by STORAGE_EMULATOR_HOST. Closing the store closes the
// client.
func Open(ctx context.Context, bucket, prefix string) (*objstore.Bucket, error) {
	s, err := open(ctx, bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("open gs://%s: %w", bucket, err)
	}
	return s, nil
}

// open is Open for openURL, whose error objstore.Open describes.
func open(ctx context.Context, bucket, prefix string) (*objstore.Bucket, error) {
	var opts []option.ClientOption
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		// fake-gcs-server does not serve the XML API reads the client
		// makes by default; the JSON API reads it does serve.
		opts = append(opts, storage.WithJSONReads())
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("new storage client: %w", err)
	}
	return objstore.NewBucket(newDriver(client, bucket, prefix, true)), nil
}

// openURL opens gs://bucket[/prefix] for objstore.Open, which names the URL
// in the error.
func openURL(ctx context.Context, rawURL string) (*objstore.Bucket, error) {
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(rawURL, Scheme+"://"), "/")
	if bucket == "" {
		return nil, errors.New("no bucket")
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		if err := objstore.ValidName(prefix); err != nil {
			return nil, err
		}
	}
	return open(ctx, bucket, prefix)
}

// driver is the objstore.Driver of a bucket, or of a prefix of one.
//
// Put-if-absent is an upload with the DoesNotExist precondition
// (ifGenerationMatch=0); GCS admits exactly one of concurrent creators.
//
// Retries: the client retries a conditional upload (IfAbsent or
// IfGenerationMatch) on transient errors because the condition makes it
// idempotent. A consequence callers must know: if the first attempt reached
// the server but its response was lost, the retry fails with ErrExists or
// ErrPrecondition although the object now holds our own content. The Delta
// commit layer resolves this by reading the object back and comparing it with
// what it wrote. Unconditional uploads are retried too (the client would not
// by default): each attempt replaces the whole object with the same bytes, so
// a repeated attempt has the same effect as a single one.
type driver struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string
	prefix string // "" or ends with '/'
	owned  bool   // Close closes client
}

func newDriver(client *storage.Client, bucket, prefix string, owned bool) *driver {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &driver{client: client, bucket: client.Bucket(bucket), name: bucket, prefix: prefix, owned: owned}
}

// Close closes the client if the store created it.
func (g *driver) Close() error {
	if !g.owned {
		return nil
	}
	return g.client.Close()
}

// URL returns "gs://bucket" or "gs://bucket/prefix".
func (g *driver) URL() string {
	if g.prefix == "" {
		return "gs://" + g.name
	}
	return "gs://" + g.name + "/" + strings.TrimSuffix(g.prefix, "/")
}

func (g *driver) object(name string) *storage.ObjectHandle {
	return g.bucket.Object(g.prefix + name)
}

// NewRangeReader returns an empty reader for an offset at or past the end of
// the object, as the other backends do (GCS itself answers 416).
func (g *driver) NewRangeReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		// The client would read the whole object for length 0 on some paths;
		// an empty range still has to report a missing object.
		if _, err := g.Stat(ctx, name); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	r, err := g.object(name).NewRangeReader(ctx, offset, length)
	if err != nil {
		if code(err) == http.StatusRequestedRangeNotSatisfiable {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, mapError(err)
	}
	return r, nil
}

func (g *driver) Stat(ctx context.Context, name string) (objstore.Info, error) {
	attrs, err := g.object(name).Attrs(ctx)
	if err != nil {
		return objstore.Info{}, mapError(err)
	}
	return g.info(attrs), nil
}

func (g *driver) Write(ctx context.Context, name string, r io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	obj := conditioned(g.object(name), opts)
	// Cancelling the writer's context is the only way to abandon an upload
	// without committing what was written so far.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ContentType = opts.ContentType
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		_ = w.Close()
		return objstore.Info{}, err
	}
	if err := w.Close(); err != nil {
		if code(err) == http.StatusPreconditionFailed {
			if opts.IfAbsent {
				return objstore.Info{}, objstore.ErrExists
			}
			return objstore.Info{}, objstore.ErrPrecondition
		}
		return objstore.Info{}, mapError(err)
	}
	return g.info(w.Attrs()), nil
}

// conditioned applies a write's preconditions to its object, and the retry
// policy they allow: a write with a precondition is idempotent.
func conditioned(obj *storage.ObjectHandle, opts objstore.WriteOptions) *storage.ObjectHandle {
	switch {
	case opts.IfAbsent:
		return obj.If(storage.Conditions{DoesNotExist: true}).Retryer(storage.WithPolicy(storage.RetryIdempotent))
	case opts.IfGenerationMatch > 0:
		return obj.If(storage.Conditions{GenerationMatch: opts.IfGenerationMatch}).Retryer(storage.WithPolicy(storage.RetryIdempotent))
	default:
		return obj.Retryer(storage.WithPolicy(storage.RetryAlways))
	}
}

// Copy rewrites src to dst within GCS (objstore.Copier): the bytes do not
// pass through the process.
func (g *driver) Copy(ctx context.Context, src, dst string, opts objstore.WriteOptions) (objstore.Info, error) {
	obj := conditioned(g.object(dst), opts)
	c := obj.CopierFrom(g.object(src))
	c.ContentType = opts.ContentType
	attrs, err := c.Run(ctx)
	if err != nil {
		if code(err) == http.StatusPreconditionFailed {
			if opts.IfAbsent {
				return objstore.Info{}, objstore.ErrExists
			}
			return objstore.Info{}, objstore.ErrPrecondition
		}
		return objstore.Info{}, mapError(err)
	}
	return g.info(attrs), nil
}

// List lists in GCS's lexical byte order; StartOffset makes the server skip
// what precedes startAt. Objects whose names are not valid object names
// (such as the "dir/" placeholders the console creates) are skipped: they
// could not be read through a store anyway.
func (g *driver) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	q := &storage.Query{Prefix: g.prefix + prefix}
	if startAt != "" {
		q.StartOffset = g.prefix + startAt
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
		return err
	}
	it := g.bucket.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return mapError(err)
		}
		info := g.info(attrs)
		if objstore.ValidName(info.Name) != nil || info.Name < startAt {
			continue
		}
		if err := fn(info); err != nil {
			return err
		}
	}
}

func (g *driver) Delete(ctx context.Context, name string) error {
	return mapError(g.object(name).Delete(ctx))
}

func (g *driver) info(a *storage.ObjectAttrs) objstore.Info {
	return objstore.Info{
		Name:       strings.TrimPrefix(a.Name, g.prefix),
		Size:       a.Size,
		Generation: a.Generation,
		Updated:    a.Updated,
	}
}

// mapError wraps the sentinel matching err, keeping err in the chain.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrObjectNotExist) || code(err) == http.StatusNotFound {
		return fmt.Errorf("%w (%w)", objstore.ErrNotExist, err)
	}
	return err
}

// code returns the HTTP status of a JSON API error, or 0.
func code(err error) int {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return gerr.Code
	}
	return 0
}
