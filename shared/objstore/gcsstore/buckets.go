package gcsstore

import (
	"context"
	"errors"
	"sync"

	"cloud.google.com/go/storage"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Buckets opens whole-bucket stores by bucket name, all on one client, and
// keeps one store per bucket: the source files of a deployment name their
// bucket, and a client per file would cost a connection pool each. It
// implements pipeline.Sources. It is safe for concurrent use.
type Buckets struct {
	client *storage.Client
	mu     sync.Mutex
	stores map[string]*objstore.Bucket
}

// NewBuckets returns Buckets on client, which the caller keeps owning and
// closes after Buckets.
func NewBuckets(client *storage.Client) *Buckets {
	return &Buckets{client: client, stores: map[string]*objstore.Bucket{}}
}

// Bucket returns the store of the bucket named bucket, opening it on first
// use.
func (b *Buckets) Bucket(_ context.Context, bucket string) (objstore.Store, error) {
	if bucket == "" {
		return nil, errors.New("open gs://: no bucket")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.stores[bucket]
	if !ok {
		s = New(b.client, bucket, "")
		b.stores[bucket] = s
	}
	return s, nil
}

// Close closes the stores it opened; the client stays open.
func (b *Buckets) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for name, s := range b.stores {
		errs = append(errs, s.Close())
		delete(b.stores, name)
	}
	return errors.Join(errs...)
}
