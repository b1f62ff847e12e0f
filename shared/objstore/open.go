package objstore

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// Opener opens the store that a URL of its scheme names. It gets the URL as
// given, not parsed: a prefix may hold '#', '?' or '%', which URL parsing
// would take for a fragment, a query or an escape. Its error need not repeat
// the URL; Open adds it.
type Opener func(ctx context.Context, rawURL string) (*Bucket, error)

// urlMux maps URL schemes to the Openers registered for them.
type urlMux struct {
	openers map[string]Opener
}

// defaultMux is the registry Open reads. Only init functions change it
// (Register), so Open needs no lock.
var defaultMux = &urlMux{openers: map[string]Opener{}}

// The built-in backends need nothing beyond the standard library, and a
// path without a scheme is a local directory anyway.
func init() {
	Register("file", openFile)
	Register("mem", openMemory)
}

// Register makes Open use open for URLs of scheme ("gs" for gs://...). A
// driver package calls it from its init, as the Go CDK's drivers register
// with blob.DefaultURLMux, so that importing the package is what makes its
// scheme available, and a program that never imports it never links its
// client. Registering a scheme twice panics.
func Register(scheme string, open Opener) { defaultMux.register(scheme, open) }

// Open opens the store a URL names:
//
//	/abs/dir, rel/dir     a local directory, created if missing
//	file:///abs/dir       a local directory, created if missing
//	mem://                a fresh, empty in-memory store
//	mem://prefix          a view of prefix in a fresh in-memory store
//	gs://bucket[/prefix]  GCS, when package gcsstore is imported
//
// and any other scheme a driver registered. The caller closes the store.
func Open(ctx context.Context, rawURL string) (*Bucket, error) {
	return defaultMux.open(ctx, rawURL)
}

func (m *urlMux) register(scheme string, open Opener) {
	if scheme == "" || strings.ContainsAny(scheme, ":/") || open == nil {
		panic(fmt.Sprintf("objstore: Register(%q): want a scheme without ':' or '/' and an opener", scheme))
	}
	if _, dup := m.openers[scheme]; dup {
		panic(fmt.Sprintf("objstore: scheme %q registered twice", scheme))
	}
	m.openers[scheme] = open
}

func (m *urlMux) open(ctx context.Context, rawURL string) (*Bucket, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		if rawURL == "" {
			return nil, fmt.Errorf("open store: empty URL")
		}
		return NewLocal(rawURL)
	}
	open, ok := m.openers[scheme]
	if !ok {
		return nil, fmt.Errorf("open store %s: unsupported scheme %q (registered: %s; a driver registers its scheme when its package is imported)",
			rawURL, scheme, strings.Join(slices.Sorted(maps.Keys(m.openers)), ", "))
	}
	b, err := open(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", rawURL, err)
	}
	return b, nil
}

// openMemory opens mem://[prefix].
func openMemory(_ context.Context, rawURL string) (*Bucket, error) {
	prefix := strings.Trim(strings.TrimPrefix(rawURL, "mem://"), "/")
	if prefix == "" {
		return NewMemory(), nil
	}
	if err := ValidName(prefix); err != nil {
		return nil, err
	}
	// Not a view: the caller owns the store, and Close closes it.
	return NewBucket(newPrefixed(newMemory(), prefix, "mem://")), nil
}

// openFile opens file:///abs/dir (or file://localhost/abs/dir).
func openFile(_ context.Context, rawURL string) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("file URLs must name a local path (file:///dir)")
	}
	if u.Path == "" {
		return nil, fmt.Errorf("no path")
	}
	return newLocal(filepath.FromSlash(u.Path))
}

// Split splits the URL of one object into the URL of the store holding it and
// the object's name, so that Open(dirURL) then reading name reaches it:
// "gs://b/x/f.avro" gives ("gs://b/x", "f.avro"), "/data/f.json" gives
// ("/data", "f.json"). The name is empty when the URL names no object
// ("gs://b").
func Split(rawURL string) (dirURL, name string) {
	if scheme, rest, ok := strings.Cut(rawURL, "://"); ok {
		root := scheme + "://"
		if scheme == "file" {
			// file:///a/b: the path starts after the (empty) host.
			host, path, _ := strings.Cut(rest, "/")
			root += host + "/"
			rest = path
		}
		dir, file, found := cutLast(rest, "/")
		if !found {
			if scheme == "gs" {
				return root + rest, "" // gs://bucket
			}
			return root, rest
		}
		if scheme == "file" && dir == "" {
			return root, file
		}
		return root + dir, file
	}
	dir, file := filepath.Split(rawURL)
	if dir == "" {
		return ".", file
	}
	if d := filepath.Clean(dir); d != "" {
		dir = d
	}
	return dir, file
}
