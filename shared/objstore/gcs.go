package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// GCS is a Store on a Google Cloud Storage bucket, or a prefix of one, through
// the JSON API of cloud.google.com/go/storage. With STORAGE_EMULATOR_HOST set,
// a client from NewGCSFromEnv talks to that emulator (fake-gcs-server).
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
type GCS struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string
	prefix string // "" or ends with '/'
	owned  bool   // Close closes client
}

// NewGCS returns a Store on bucket under prefix ("" for the whole bucket)
// using client, which the caller keeps owning. It does no I/O: a missing
// bucket shows up on the first call. (ctx is accepted for symmetry with
// NewGCSFromEnv and is not used.)
func NewGCS(ctx context.Context, client *storage.Client, bucket, prefix string) *GCS {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &GCS{client: client, bucket: client.Bucket(bucket), name: bucket, prefix: prefix}
}

// NewGCSFromEnv returns a Store on bucket under prefix with a client built
// from the environment: Application Default Credentials, or the emulator
// named by STORAGE_EMULATOR_HOST. Close releases the client.
func NewGCSFromEnv(ctx context.Context, bucket, prefix string) (*GCS, error) {
	client, err := storage.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("open gs://%s: new storage client: %w", bucket, err)
	}
	g := NewGCS(ctx, client, bucket, prefix)
	g.owned = true
	return g, nil
}

// Close closes the client if this store created it (NewGCSFromEnv).
func (g *GCS) Close() error {
	if !g.owned {
		return nil
	}
	return g.client.Close()
}

// URL returns "gs://bucket" or "gs://bucket/prefix".
func (g *GCS) URL() string {
	if g.prefix == "" {
		return "gs://" + g.name
	}
	return "gs://" + g.name + "/" + strings.TrimSuffix(g.prefix, "/")
}

func (g *GCS) where(name string) string { return "gs://" + g.name + "/" + g.prefix + name }

func (g *GCS) object(name string) *storage.ObjectHandle {
	return g.bucket.Object(g.prefix + name)
}

// NewReader implements Store. Reading from an offset at or past the end of
// the object returns an empty reader, as the other backends do (GCS itself
// answers 416).
func (g *GCS) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := ValidName(name); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if err := checkRange(offset); err != nil {
		return nil, fmt.Errorf("read %s: %w", g.where(name), err)
	}
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
		return nil, fmt.Errorf("read %s: %w", g.where(name), mapGCSError(err))
	}
	return r, nil
}

// Stat implements Store.
func (g *GCS) Stat(ctx context.Context, name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", name, err)
	}
	attrs, err := g.object(name).Attrs(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", g.where(name), mapGCSError(err))
	}
	return g.info(attrs), nil
}

// Write implements Store.
func (g *GCS) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", name, err)
	}
	if err := checkOptions(opts); err != nil {
		return Info{}, fmt.Errorf("write %s: %w", g.where(name), err)
	}
	obj := g.object(name)
	switch {
	case opts.IfAbsent:
		obj = obj.If(storage.Conditions{DoesNotExist: true}).Retryer(storage.WithPolicy(storage.RetryIdempotent))
	case opts.IfGenerationMatch > 0:
		obj = obj.If(storage.Conditions{GenerationMatch: opts.IfGenerationMatch}).Retryer(storage.WithPolicy(storage.RetryIdempotent))
	default:
		obj = obj.Retryer(storage.WithPolicy(storage.RetryAlways))
	}
	// Cancelling the writer's context is the only way to abandon an upload
	// without committing what was written so far.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ContentType = opts.ContentType
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		_ = w.Close()
		return Info{}, fmt.Errorf("write %s: %w", g.where(name), err)
	}
	if err := w.Close(); err != nil {
		if code(err) == http.StatusPreconditionFailed {
			if opts.IfAbsent {
				return Info{}, fmt.Errorf("write %s: %w", g.where(name), ErrExists)
			}
			return Info{}, fmt.Errorf("write %s (if generation %d): %w", g.where(name), opts.IfGenerationMatch, ErrPrecondition)
		}
		return Info{}, fmt.Errorf("write %s: %w", g.where(name), mapGCSError(err))
	}
	return g.info(w.Attrs()), nil
}

// List implements Store. GCS lists in lexical byte order; StartOffset makes
// the server skip what precedes startAt. Objects whose names are not valid
// object names (such as the "dir/" placeholders the console creates) are
// skipped: they could not be read through this interface anyway.
func (g *GCS) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	if err := validPrefix(prefix); err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	q := &storage.Query{Prefix: g.prefix + prefix}
	if startAt != "" {
		q.StartOffset = g.prefix + startAt
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
		return fmt.Errorf("list %s: %w", g.where(prefix), err)
	}
	it := g.bucket.Objects(ctx, q)
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", g.where(prefix), mapGCSError(err))
		}
		info := g.info(attrs)
		if ValidName(info.Name) != nil || info.Name < startAt {
			continue
		}
		if err := fn(info); err != nil {
			return err
		}
	}
}

// Delete implements Store.
func (g *GCS) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	if err := g.object(name).Delete(ctx); err != nil {
		return fmt.Errorf("delete %s: %w", g.where(name), mapGCSError(err))
	}
	return nil
}

func (g *GCS) info(a *storage.ObjectAttrs) Info {
	return Info{
		Name:       strings.TrimPrefix(a.Name, g.prefix),
		Size:       a.Size,
		Generation: a.Generation,
		Updated:    a.Updated,
	}
}

// mapGCSError wraps the sentinel matching err, keeping err in the chain.
func mapGCSError(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || code(err) == http.StatusNotFound {
		return fmt.Errorf("%w (%w)", ErrNotExist, err)
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
