package objstore

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Open opens the store a URL names:
//
//	gs://bucket[/prefix]  GCS, with a client from the environment (ADC, or
//	                      STORAGE_EMULATOR_HOST); see NewGCSFromEnv
//	mem://                a fresh, empty in-memory store
//	file:///abs/dir       a local directory, created if missing
//	/abs/dir, rel/dir     a local directory, created if missing
//
// A GCS store opened here owns its client; callers that open many should
// close it (it implements io.Closer).
func Open(ctx context.Context, rawURL string) (Store, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		if rawURL == "" {
			return nil, fmt.Errorf("open store: empty URL")
		}
		return NewLocal(rawURL)
	}
	switch scheme {
	case "gs":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("open store %s: no bucket", rawURL)
		}
		if err := checkPrefix(prefix); err != nil {
			return nil, fmt.Errorf("open store %s: %w", rawURL, err)
		}
		return NewGCSFromEnv(ctx, bucket, prefix)
	case "mem":
		prefix := strings.Trim(rest, "/")
		if err := checkPrefix(prefix); err != nil {
			return nil, fmt.Errorf("open store %s: %w", rawURL, err)
		}
		return Sub(NewMemory(), prefix), nil
	case "file":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", rawURL, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("open store %s: file URLs must name a local path (file:///dir)", rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("open store %s: no path", rawURL)
		}
		return NewLocal(filepath.FromSlash(u.Path))
	default:
		return nil, fmt.Errorf("open store %s: unsupported scheme %q (want gs, mem or file)", rawURL, scheme)
	}
}

func checkPrefix(prefix string) error {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return nil
	}
	return ValidName(prefix)
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
